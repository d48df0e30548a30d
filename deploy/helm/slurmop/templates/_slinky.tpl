{{/* Value names of Slinky's slurm-operator chart (release 1.2), so that its
values file works here: slurmop.slinkyNames moves every one that means the
same onto this chart's own name (the Slinky name wins: this chart's
values.yaml does not set it, so it was set by the user), fails for the ones
that cannot mean the same here, and leaves the ones with no meaning for
slurmop to the release notes (slurmop.slinkyIgnored). Every template includes
it first; it is idempotent. An empty map or list of Slinky's (its values.yaml
has nodeSelector: {}, resources: {}, ...) keeps this chart's default. */}}
{{- define "slurmop.slinkyNames" -}}
{{- $v := .Values }}
{{- if not (hasKey $v "_slinkyNamesDone") }}
{{- $_ := set $v "_slinkyNamesDone" true }}
{{- if ($v.crds | default dict).enabled }}
{{- fail "crds.enabled: this chart has no CRD subchart; install the slurmop-crds chart first (deploy/helm/slurmop-crds), which holds the same slinky.slurm.net CRDs" }}
{{- end }}
{{- with $v.namespaceOverride }}
{{- fail (printf "namespaceOverride=%s: not supported by this chart; install the release into that namespace (helm -n %s)" . .) }}
{{- end }}
{{- if hasKey $v "imagePullPolicy" }}
{{- $_ := set $v.image "pullPolicy" $v.imagePullPolicy }}
{{- end }}
{{- $op := $v.operator | default dict }}
{{- if and (hasKey $op "enabled") (not $op.enabled) }}
{{- fail "operator.enabled=false: this chart is the operator alone (its webhook, the other half of Slinky's chart, has no counterpart here); do not install it instead" }}
{{- end }}
{{- if not (kindIs "invalid" $op.replicas) }}{{- if hasKey $op "replicas" }}{{- $_ := set $v "replicas" $op.replicas }}{{- end }}{{- end }}
{{- with $op.imagePullPolicy }}{{- $_ := set $v.image "pullPolicy" . }}{{- end }}
{{- /* operator.image, unless it names Slinky's own manager image (its
values.yaml does): slurmop's flags mean nothing to that binary. */}}
{{- with $op.image }}
{{- if not (include "slurmop.slinkyImage" .) }}
{{- with .repository }}{{- $_ := set $v.image "repository" . }}{{- end }}
{{- with .tag }}{{- $_ := set $v.image "tag" (toString .) }}{{- end }}
{{- with .digest }}{{- $_ := set $v.image "digest" . }}{{- end }}
{{- end }}
{{- end }}
{{- with $op.serviceAccount }}
{{- if hasKey . "create" }}{{- $_ := set $v.serviceAccount "create" .create }}{{- end }}
{{- with .name }}{{- $_ := set $v.serviceAccount "name" . }}{{- end }}
{{- end }}
{{- range $k := list "nodeSelector" "affinity" "tolerations" "topologySpreadConstraints" "podSecurityContext" "resources" "securityContext" }}
{{- with index $op $k }}{{- $_ := set $v $k . }}{{- end }}
{{- end }}
{{- with $op.pdb }}
{{- if hasKey . "enabled" }}{{- $_ := set $v.podDisruptionBudget "enabled" .enabled }}{{- end }}
{{- if not (kindIs "invalid" .maxUnavailable) }}
{{- $_ := set $v.podDisruptionBudget "maxUnavailable" .maxUnavailable }}
{{- else if not (kindIs "invalid" .minAvailable) }}
{{- $_ := set $v.podDisruptionBudget "minAvailable" .minAvailable }}
{{- $_ := unset $v.podDisruptionBudget "maxUnavailable" }}
{{- end }}
{{- end }}
{{- with $op.logLevel }}{{- $_ := set $v "logLevel" . }}{{- end }}
{{- range $k := list "healthPort" "metricsPort" }}
{{- with index $op $k }}{{- $_ := set $v $k . }}{{- end }}
{{- end }}
{{- if hasKey $op "metricsSecure" }}{{- $_ := set $v "metricsSecure" $op.metricsSecure }}{{- end }}
{{- if hasKey $op "leaderElection" }}{{- $_ := set $v.leaderElection "enabled" $op.leaderElection }}{{- end }}
{{- with $op.namespaces }}
{{- $list := . }}
{{- if kindIs "string" . }}{{- $list = splitList "," . }}{{- end }}
{{- $clean := list }}
{{- range $list }}{{- with trim (toString .) }}{{- $clean = append $clean . }}{{- end }}{{- end }}
{{- $_ := set $v "namespaces" $clean }}
{{- end }}
{{- with $v.certManager }}
{{- if hasKey . "enabled" }}{{- $_ := set $v.topologyWebhook "certManager" (ternary "true" "false" (not (not .enabled))) }}{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- define "slurmop.slinkyImage" -}}
{{- if hasSuffix "slinkyproject/slurm-operator" (toString (.repository | default "")) }}true{{ end }}
{{- end }}

{{/* slurmop.slinkyIgnored: Slinky's value names set here that mean
nothing for slurmop, as a sorted JSON list "name: why". */}}
{{- define "slurmop.slinkyIgnored" -}}
{{- $out := list }}
{{- $v := .Values }}
{{- $op := $v.operator | default dict }}
{{- range $k := list "accountingWorkers" "controllerWorkers" "loginsetWorkers" "nodesetWorkers" "restapiWorkers" "tokenWorkers" "slurmclientWorkers" }}
{{- if hasKey $op $k }}{{ $out = append $out (printf "operator.%s: slurmop runs its reconcilers on one event loop, with no worker pools" $k) }}{{ end }}
{{- end }}
{{- range $k := list "profile" "profileAddr" }}
{{- if hasKey $op $k }}{{ $out = append $out (printf "operator.%s: slurmop has no Go profiler (its /metrics show the event loop's busy time)" $k) }}{{ end }}
{{- end }}
{{- if include "slurmop.slinkyImage" ($op.image | default dict) }}{{ $out = append $out (printf "operator.image.repository=%s: Slinky's own manager; this chart runs slurmop's image (image.repository)" $op.image.repository) }}{{ end }}
{{- if hasKey $v "webhook" }}{{ $out = append $out "webhook.*: slurmop has no admission webhook for the slinky.slurm.net kinds (their CRDs' schema defaults and CEL rules validate them); its only webhook is the topology one (topologyWebhook.*)" }}{{ end }}
{{- if hasKey ($v.certManager | default dict) "secretName" }}{{ $out = append $out "certManager.secretName: the topology webhook's certificate Secret has its own name (<fullname>-webhook-cert)" }}{{ end }}
{{- $out | sortAlpha | toJson }}
{{- end }}
