{{- /*
Added by tests/integration/test_helm_values.py to its temporary copy of
Slinky's slurm chart. Slinky keeps its vendor presets in the chart's
templates/vendor/ folder, and a Go module zip leaves out every folder named
vendor, so the chart fetched from the module proxy includes these helpers
but lacks their definitions and cannot render at all. These are the test's
own definitions of the helpers the chart calls, with the behaviour its
vendor README describes: the preset is on when vendor.nvidia.dcgm.enabled;
a NodeSet whose slurmd has an nvidia.com/gpu limit gets the job-mapping
folder; the Controller lists the ConfigMaps <fullname>-prolog-dcgm and
<fullname>-epilog-dcgm.
*/ -}}
{{- define "vendor.dcgm.enabled" -}}
{{- if dig "nvidia" "dcgm" "enabled" false (.Values.vendor | default dict) }}true{{ end -}}
{{- end }}
{{- define "vendor.dcgm.jobMappingDir" -}}
{{- dig "nvidia" "dcgm" "jobMappingDir" "/var/lib/dcgm-exporter/job-mapping" (.Values.vendor | default dict) -}}
{{- end }}
{{- define "vendor.dcgm.nodesetHasGPU" -}}
{{- if index (dig "resources" "limits" dict .) "nvidia.com/gpu" }}true{{ end -}}
{{- end }}
{{- define "vendor.dcgm.prologName" -}}
{{- include "slurm.fullname" . }}-prolog-dcgm
{{- end }}
{{- define "vendor.dcgm.epilogName" -}}
{{- include "slurm.fullname" . }}-epilog-dcgm
{{- end }}
