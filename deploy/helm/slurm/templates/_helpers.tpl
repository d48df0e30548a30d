{{/* Labels on everything this chart creates. The CRs deliberately carry no
app.kubernetes.io/name or instance label: those belong to the pods the
operator makes from them. */}}
{{- define "slurm.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/part-of: slurm
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "slurm.slurmKeyName" -}}
{{- default (printf "%s-auth-slurm" .Release.Name) .Values.slurmKeyRef.name }}
{{- end }}

{{- define "slurm.jwtKeyName" -}}
{{- default (printf "%s-auth-jwt" .Release.Name) .Values.jwtKeyRef.name }}
{{- end }}

{{- define "slurm.sssdConfName" -}}
{{- printf "%s-sssd-conf" .Release.Name }}
{{- end }}

{{/* slurm.merge: dict "defaults" D "entry" E -> YAML of D updated by E.
Maps present on both sides merge key by key; any other value in E
(including false, 0 and "") replaces D's. Sprig's merge and mergeOverwrite
would let a default of true or 1 win over an explicit false or 0. */}}
{{- define "slurm.merge" -}}
{{- $out := deepCopy (.defaults | default dict) }}
{{- range $k, $v := (.entry | default dict) }}
{{- $d := index $out $k }}
{{- if and (kindIs "map" $v) (kindIs "map" $d) }}
{{- $_ := set $out $k (include "slurm.merge" (dict "defaults" $d "entry" $v) | fromYaml) }}
{{- else }}
{{- $_ := set $out $k $v }}
{{- end }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/* slurm.container: dict "c" C "root" $ -> YAML of a container override.
image {repository, tag} (or a plain string) becomes "repository:tag"; the
other keys pass through; imagePullPolicy defaults to the chart's. */}}
{{- define "slurm.container" -}}
{{- $c := omit (.c | default dict) "image" }}
{{- $image := (.c | default dict).image }}
{{- if kindIs "string" $image }}
{{- $_ := set $c "image" $image }}
{{- else if $image }}
{{- if $image.tag }}
{{- $_ := set $c "image" (printf "%s:%s" $image.repository (toString $image.tag)) }}
{{- else }}
{{- $_ := set $c "image" $image.repository }}
{{- end }}
{{- end }}
{{- if and (hasKey $c "resources") (not $c.resources) }}
{{- $_ := unset $c "resources" }}
{{- end }}
{{- if and .root.Values.imagePullPolicy (not (hasKey $c "imagePullPolicy")) }}
{{- $_ := set $c "imagePullPolicy" .root.Values.imagePullPolicy }}
{{- end }}
{{- toYaml $c }}
{{- end }}

{{/* slurm.podTemplate: dict "v" V "root" $ ["spec" S] -> YAML of a
PodTemplate {metadata, spec}, or nothing when it would be empty. S holds
fields the chart sets itself (a NodeSet's hostname prefix); V's podSpec,
nodeSelector, tolerations and affinity, and the chart-wide
priorityClassName and imagePullSecrets, are added to it. */}}
{{- define "slurm.podTemplate" -}}
{{- $v := .v }}
{{- $spec := deepCopy ($v.podSpec | default dict) }}
{{- range $k, $x := (.spec | default dict) }}
{{- $_ := set $spec $k $x }}
{{- end }}
{{- with $v.nodeSelector }}
{{- $_ := set $spec "nodeSelector" . }}
{{- end }}
{{- with $v.tolerations }}
{{- $_ := set $spec "tolerations" . }}
{{- end }}
{{- with $v.affinity }}
{{- $_ := set $spec "affinity" . }}
{{- end }}
{{- if and .root.Values.priorityClassName (not (hasKey $spec "priorityClassName")) }}
{{- $_ := set $spec "priorityClassName" .root.Values.priorityClassName }}
{{- end }}
{{- if and .root.Values.imagePullSecrets (not (hasKey $spec "imagePullSecrets")) }}
{{- $_ := set $spec "imagePullSecrets" .root.Values.imagePullSecrets }}
{{- end }}
{{- $meta := dict }}
{{- with $v.podLabels }}
{{- $_ := set $meta "labels" . }}
{{- end }}
{{- with $v.podAnnotations }}
{{- $_ := set $meta "annotations" . }}
{{- end }}
{{- $t := dict }}
{{- if $meta }}
{{- $_ := set $t "metadata" $meta }}
{{- end }}
{{- if $spec }}
{{- $_ := set $t "spec" $spec }}
{{- end }}
{{- if $t }}
{{- toYaml $t }}
{{- end }}
{{- end }}

{{/* slurm.extraConf: controller.extraConf, then one PartitionName line per
enabled entry of `partitions`. */}}
{{- define "slurm.extraConf" -}}
{{- $lines := list }}
{{- with .Values.controller.extraConf }}
{{- $lines = append $lines (trim .) }}
{{- end }}
{{- range $name, $p := .Values.partitions }}
{{- if and $p $p.enabled }}
{{- if not $p.nodesets }}
{{- fail (printf "partitions.%s: nodesets is empty (list nodeset keys, or ALL)" $name) }}
{{- end }}
{{- $lines = append $lines (printf "PartitionName=%s Nodes=%s %s" $name (join "," $p.nodesets) ($p.config | default "") | trim) }}
{{- end }}
{{- end }}
{{- join "\n" $lines }}
{{- end }}

{{/* slurm.checkKey: dict "what" W "key" K: fail unless K can be part of a
Kubernetes object name and a hostname. */}}
{{- define "slurm.checkKey" -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" .key) }}
{{- fail (printf "%s key %q: want lower-case letters, digits and '-' (it becomes an object name and a hostname)" .what .key) }}
{{- end }}
{{- end }}
