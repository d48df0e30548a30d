{{/* The chart reads Slinky's value names (its slurm chart's values.yaml
works unchanged) and renders the same custom resources from them; the test
integration.helm_values renders both charts with the same values files and
compares. A value slurmop cannot honour the same way stops the render with a
message naming it (slurm.refuse), rather than being dropped. */}}

{{/* Object names: the release name, or "<release>-<chart>" unless the
release name already contains the chart name; nameOverride and
fullnameOverride as usual. */}}
{{- define "slurm.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "slurm.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{/* Labels on everything this chart creates (and on the pod templates of
the CRs). No app.kubernetes.io/name or instance: the operator puts those on
the pods it makes. */}}
{{- define "slurm.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/part-of: slurm
{{- with .Chart.AppVersion }}
app.kubernetes.io/version: {{ . | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* slurm.metadata: dict "m" M "root" $ -> YAML of M (a section's
`metadata`: labels, annotations) with the chart's labels added where M does
not set them. Used for the CR and its pod template alike. */}}
{{- define "slurm.metadata" -}}
{{- $m := deepCopy (.m | default dict) }}
{{- $labels := $m.labels | default dict }}
{{- range $k, $v := (include "slurm.labels" .root | fromYaml) }}
{{- if not (hasKey $labels $k) }}
{{- $_ := set $labels $k $v }}
{{- end }}
{{- end }}
{{- $_ := set $m "labels" $labels }}
{{- toYaml $m }}
{{- end }}

{{- define "slurm.priorityClassName" -}}
{{- if .Values.priorityClass.enabled }}
{{- .Values.priorityClass.name | default "slurm-priority-critical" }}
{{- end }}
{{- end }}

{{/* slurm.podTemplate: dict "v" V "root" $ ["extra" E] -> YAML of
{metadata, spec}: V.metadata with the chart's labels, V.podSpec with the
chart-wide imagePullSecrets appended to its own, priorityClassName (the
podSpec's, else the chart's priority class, else ""), and E's fields (a
NodeSet's hostname prefix, the DCGM volume). */}}
{{- define "slurm.podTemplate" -}}
{{- $spec := deepCopy (.v.podSpec | default dict) }}
{{- $pull := concat ($spec.imagePullSecrets | default list) (.root.Values.imagePullSecrets | default list) }}
{{- $_ := set $spec "imagePullSecrets" $pull }}
{{- $_ := set $spec "priorityClassName" ($spec.priorityClassName | default (include "slurm.priorityClassName" .root)) }}
{{- range $k, $x := (.extra | default dict) }}
{{- $_ := set $spec $k $x }}
{{- end }}
{{- toYaml (dict "metadata" (include "slurm.metadata" (dict "m" .v.metadata "root" .root) | fromYaml) "spec" $spec) }}
{{- end }}

{{/* slurm.image: an image value -> "repository@digest" when digest is set,
else "repository:tag"; a string passes as it is. */}}
{{- define "slurm.image" -}}
{{- if kindIs "string" . }}
{{- . }}
{{- else }}
{{- $image := . | default dict }}
{{- $repo := required "an image needs image.repository" $image.repository }}
{{- if $image.digest }}
{{- printf "%s@%s" $repo $image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (required "an image needs image.tag (or image.digest)" $image.tag | toString) }}
{{- end }}
{{- end }}
{{- end }}

{{/* slurm.container: dict "c" C "root" $ -> YAML of a container: the image
value becomes one string (slurm.image), imagePullPolicy defaults to the
chart's, every other key passes through. */}}
{{- define "slurm.container" -}}
{{- $src := .c | default dict }}
{{- $c := omit $src "image" }}
{{- $_ := set $c "image" (include "slurm.image" $src.image) }}
{{- $_ := set $c "imagePullPolicy" ($src.imagePullPolicy | default .root.Values.imagePullPolicy) }}
{{- toYaml $c }}
{{- end }}

{{/* slurm.entry: dict "defaults" D "v" V -> YAML of the entry V merged over
D (a nodesets or loginsets entry over nodesetDefaults or loginsetDefaults).
mergeOverwrite, as Slinky's chart merges: maps key by key, anything else
replaced by the entry's value. */}}
{{- define "slurm.entry" -}}
{{- toYaml (mergeOverwrite (dict) (deepCopy (.defaults | default dict)) (deepCopy (.v | default dict))) }}
{{- end }}

{{/* slurm.nodesets: the nodesets entries merged over nodesetDefaults, as
YAML {key: entry}; slurm.loginsets the same for loginsets. */}}
{{- define "slurm.nodesets" -}}
{{- $out := dict }}
{{- range $k, $v := .Values.nodesets }}
{{- $_ := set $out $k (include "slurm.entry" (dict "defaults" $.Values.nodesetDefaults "v" $v) | fromYaml) }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{- define "slurm.loginsets" -}}
{{- $out := dict }}
{{- range $k, $v := .Values.loginsets }}
{{- $_ := set $out $k (include "slurm.entry" (dict "defaults" $.Values.loginsetDefaults "v" $v) | fromYaml) }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/* slurm.pairs: a map of Slurm options {Name: [values]} (or Name: value)
-> a list of "Name=v1,v2" in key order; empty values are left out. */}}
{{- define "slurm.pairs" -}}
{{- $out := list }}
{{- range $k, $v := . }}
{{- if $v }}
{{- $out = append $out (printf "%s=%s" $k (join "," $v)) }}
{{- end }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/* slurm.confLines: dict "text" T "map" M "sep" S -> the lines of T split
on S, or else M's pairs, as a JSON list. */}}
{{- define "slurm.confLines" -}}
{{- if .text }}
{{- splitList .sep .text | toJson }}
{{- else if .map }}
{{- include "slurm.pairs" .map }}
{{- else }}
{{- list | toJson }}
{{- end }}
{{- end }}

{{/* The Controller's extraConf: controller.extraConf (or extraConfMap),
then a PartitionName line per enabled entry of `partitions`. Every
partition needs nodesets; an enabled one may only name enabled NodeSets or
ALL. */}}
{{- define "slurm.controllerExtraConf" -}}
{{- $lines := include "slurm.confLines" (dict "text" .Values.controller.extraConf "map" .Values.controller.extraConfMap "sep" "\n") | fromJsonArray }}
{{- $known := list "ALL" }}
{{- range $name, $ns := (include "slurm.nodesets" . | fromYaml) }}
{{- if and $ns $ns.enabled }}
{{- $known = append $known $name }}
{{- end }}
{{- end }}
{{- range $name, $p := .Values.partitions }}
{{- $p = $p | default dict }}
{{- $sets := $p.nodesets | default list | uniq | sortAlpha }}
{{- if not $sets }}
{{- fail (printf "partitions.%s.nodesets: empty; list NodeSet keys (or ALL)" $name) }}
{{- end }}
{{- if $p.enabled }}
{{- range $sets }}
{{- if not (has . $known) }}
{{- fail (printf "partitions.%s.nodesets: %q is not an enabled entry of nodesets" $name .) }}
{{- end }}
{{- end }}
{{- $config := list }}
{{- if $p.config }}
{{- $config = list $p.config }}
{{- else if $p.configMap }}
{{- $config = include "slurm.pairs" $p.configMap | fromJsonArray }}
{{- end }}
{{- $lines = append $lines (printf "PartitionName=%s Nodes=%s %s" $name (join "," $sets) (join " " $config)) }}
{{- end }}
{{- end }}
{{- join "\n" $lines }}
{{- end }}

{{- define "slurm.keyRef" -}}
{{- $ref := .ref | default dict -}}
name: {{ $ref.name | default .name }}
key: {{ $ref.key | default .key }}
{{- end }}

{{/* The three key references every Controller and Accounting carries. */}}
{{- define "slurm.authRefs" -}}
{{- $f := include "slurm.fullname" . -}}
slurmKeyRef:
  {{- include "slurm.keyRef" (dict "ref" .Values.slurmKey.secretRef "name" (printf "%s-auth-slurm" $f) "key" "slurm.key") | nindent 2 }}
jwtKeyRef:
  {{- include "slurm.keyRef" (dict "ref" .Values.jwtKey.secretRef "name" (printf "%s-auth-jwt" $f) "key" "jwt.key") | nindent 2 }}
{{- if .Values.jwksKeys.enabled }}
jwksKeyRef:
  {{- include "slurm.keyRef" (dict "ref" .Values.jwksKeys.configMapRef "name" (printf "%s-auth-jwks" $f) "key" "jwks.json") | nindent 2 }}
{{- end }}
{{- end }}

{{/* The sssd.conf Secret of LoginSets and ssh-enabled NodeSets: the chart's
own, or sssd.secretRef. */}}
{{- define "slurm.sssdConfRef" -}}
{{- if .Values.sssd.secretRef }}
name: {{ required "sssd.secretRef.name is required" .Values.sssd.secretRef.name }}
key: {{ required "sssd.secretRef.key is required" .Values.sssd.secretRef.key }}
{{- else }}
name: {{ include "slurm.fullname" . }}-sssd-conf
key: sssd.conf
{{- end }}
{{- end }}

{{/* slurm.block: a multi-line string as a YAML literal block at indent N
(dict "s" S "n" N). */}}
{{- define "slurm.block" -}}
|{{ .s | nindent .n }}
{{- end }}

{{/* slurm.checkKey: dict "what" W "key" K: fail unless K can be part of a
Kubernetes object name and a hostname. */}}
{{- define "slurm.checkKey" -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" .key) }}
{{- fail (printf "%s key %q: want lower-case letters, digits and '-' (it becomes an object name and a hostname)" .what .key) }}
{{- end }}
{{- end }}

{{/* NVIDIA DCGM job mapping (vendor.nvidia.dcgm): prolog and epilog
scripts that write and remove one file per GPU of a job, and the mapping
folder mounted into every NodeSet whose slurmd has an nvidia.com/gpu
limit. */}}
{{- define "slurm.dcgm.enabled" -}}
{{- if dig "nvidia" "dcgm" "enabled" false (.Values.vendor | default dict) }}true{{ end }}
{{- end }}

{{- define "slurm.dcgm.dir" -}}
{{- dig "nvidia" "dcgm" "jobMappingDir" "/var/lib/dcgm-exporter/job-mapping" (.Values.vendor | default dict) }}
{{- end }}

{{/* slurm.dcgm.hasGPU: a NodeSet entry whose slurmd or pod asks for
nvidia.com/gpu (a limit or a request). */}}
{{- define "slurm.dcgm.hasGPU" -}}
{{- $ns := . | default dict }}
{{- range $part := list ($ns.slurmd | default dict) ($ns.podSpec | default dict) }}
{{- range $kind := list "limits" "requests" }}
{{- if index (dig "resources" $kind dict $part) "nvidia.com/gpu" }}true{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/* Value names of this chart's first releases, before it took Slinky's:
set, they would now be ignored without a word, so they stop the render and
name what replaced them. */}}
{{- define "slurm.refuseOldNames" -}}
{{- $old := dict
  "slurmKeyRef" "slurmKey.secretRef (and slurmKey.create: false)"
  "jwtKeyRef" "jwtKey.secretRef (and jwtKey.create: false)"
  "sssdConf" "sssd.conf"
  "priorityClassName" "priorityClass.enabled and priorityClass.name" }}
{{- range $k := keys $old | sortAlpha }}
{{- if hasKey $.Values $k }}
{{- fail (printf "%s is no longer a value of this chart: use %s" $k (index $old $k)) }}
{{- end }}
{{- end }}
{{- $sections := dict "controller" .Values.controller "restapi" .Values.restapi "accounting" .Values.accounting }}
{{- range $k, $ns := .Values.nodesets }}
{{- $_ := set $sections (printf "nodesets.%s" $k) ($ns | default dict) }}
{{- end }}
{{- range $k, $ls := .Values.loginsets }}
{{- $_ := set $sections (printf "loginsets.%s" $k) ($ls | default dict) }}
{{- end }}
{{- range $name := keys $sections | sortAlpha }}
{{- $s := index $sections $name }}
{{- range $f := list "nodeSelector" "tolerations" "affinity" "podLabels" "podAnnotations" }}
{{- if hasKey $s $f }}
{{- fail (printf "%s.%s is no longer a value of this chart: use %s.%s" $name $f $name (ternary "metadata.labels" (ternary "metadata.annotations" (printf "podSpec.%s" $f) (eq $f "podAnnotations")) (eq $f "podLabels"))) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* slurm.refuseUnsupported: values of Slinky's chart that this chart
cannot honour stop the render, naming the value and why. */}}
{{- define "slurm.refuseUnsupported" -}}
{{- if dig "google" "a3mega" list (.Values.vendor | default dict) }}
{{- fail "vendor.google.a3mega: not supported by this chart (the GKE A3 Mega preset adds GPUDirect-TCPX sidecars, networks and gres.conf to the NodeSets it names); write those into the NodeSet entries yourself (podSpec, slurmd) and configFiles" }}
{{- end }}
{{- end }}

{{/* slurm.unknownNames: the value names set that mean nothing to this chart
(nor to Slinky's, which ignores them), as a sorted JSON list of dotted
paths, for the release notes. Top level, the controller, restapi and
accounting sections and every nodesets and loginsets entry are checked;
inside them the Kubernetes objects (podSpec, metadata, service, containers)
are passed through and not checked. */}}
{{- define "slurm.unknownNames" -}}
{{- $out := list }}
{{- $top := list "nameOverride" "fullnameOverride" "namespaceOverride" "asciiArt" "imagePullSecrets" "imagePullPolicy" "priorityClass" "slurmKey" "jwtKey" "jwksKeys" "clusterName" "configFiles" "prologSlurmctldScripts" "epilogSlurmctldScripts" "prologScripts" "epilogScripts" "controller" "restapi" "accounting" "sssd" "loginsetDefaults" "loginsets" "nodesetDefaults" "nodesets" "partitions" "vendor" "extraObjects" "global" }}
{{- range $k, $_ := .Values }}
{{- if not (has $k $top) }}{{ $out = append $out $k }}{{ end }}
{{- end }}
{{- $pod := list "metadata" "podSpec" "service" }}
{{- $sections := dict
  "controller" (concat $pod (list "external" "externalConfig" "slurmctld" "reconfigure" "logfile" "inplaceReconfigure" "persistence" "extraConf" "extraConfMap" "metrics" "ha"))
  "restapi" (concat $pod (list "replicas" "pdb" "slurmrestd"))
  "accounting" (concat $pod (list "enabled" "external" "externalConfig" "slurmdbd" "storageConfig" "extraConf" "extraConfMap")) }}
{{- range $name, $keys := $sections }}
{{- range $k, $_ := (index $.Values $name | default dict) }}
{{- if not (has $k $keys) }}{{ $out = append $out (printf "%s.%s" $name $k) }}{{ end }}
{{- end }}
{{- end }}
{{- $nsKeys := concat $pod (list "enabled" "scalingMode" "replicas" "pinToNode" "workloadDisruptionProtection" "pruneSlurmNodeRecords" "ordinalPadding" "oversubscribeNode" "slurmd" "logfile" "extraConf" "extraConfMap" "partition" "ssh" "updateStrategy" "taintKubeNodes" "minReadySeconds" "revisionHistoryLimit" "persistentVolumeClaimRetentionPolicy" "volumeClaimTemplates") }}
{{- $lsKeys := concat $pod (list "enabled" "replicas" "strategy" "login" "initconf" "rootSshAuthorizedKeys" "extraSshdConfig") }}
{{- range $group, $keys := dict "nodesetDefaults" $nsKeys "loginsetDefaults" $lsKeys }}
{{- range $k, $_ := (index $.Values $group | default dict) }}
{{- if not (has $k $keys) }}{{ $out = append $out (printf "%s.%s" $group $k) }}{{ end }}
{{- end }}
{{- end }}
{{- range $group, $keys := dict "nodesets" $nsKeys "loginsets" $lsKeys }}
{{- range $entry, $v := (index $.Values $group | default dict) }}
{{- range $k, $_ := ($v | default dict) }}
{{- if not (has $k $keys) }}{{ $out = append $out (printf "%s.%s.%s" $group $entry $k) }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- $out | sortAlpha | toJson }}
{{- end }}
