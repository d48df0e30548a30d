{{/* Chart name, or nameOverride. */}}
{{- define "slurmop.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of every object: the release name when it already contains
the chart name (release "slurmop" gives "slurmop"), else release-chart. */}}
{{- define "slurmop.fullname" -}}
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

{{- define "slurmop.selectorLabels" -}}
app.kubernetes.io/name: {{ include "slurmop.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "slurmop.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "slurmop.selectorLabels" . }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: slurmop
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "slurmop.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "slurmop.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Lease's name and namespace (--leader-elect-lease, --leader-elect-namespace). */}}
{{- define "slurmop.lease" -}}
{{- default (include "slurmop.fullname" .) .Values.leaderElection.lease }}
{{- end }}

{{- define "slurmop.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace }}
{{- end }}

{{- define "slurmop.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag | toString) }}
{{- end }}
{{- end }}

{{/*
"true" when the topology webhook's certificate comes from cert-manager:
topologyWebhook.certManager "true", or "auto" with cert-manager's API
installed. Otherwise the operator makes a self-signed one and keeps the
webhook configuration's caBundle.
*/}}
{{- define "slurmop.webhookCertManager" -}}
{{- $cm := toString .Values.topologyWebhook.certManager -}}
{{- if or (eq $cm "true") (and (eq $cm "auto") (.Capabilities.APIVersions.Has "cert-manager.io/v1")) -}}
true
{{- end -}}
{{- end -}}

{{- define "slurmop.webhookService" -}}
{{ include "slurmop.fullname" . }}-webhook
{{- end -}}
