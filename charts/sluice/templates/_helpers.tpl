{{/* Labels on every object; `component` is the workload's name. */}}
{{- define "sluice.labels" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/part-of: sluice
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end }}

{{/* The labels a selector uses: stable across upgrades. */}}
{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}

{{- define "sluice.image" -}}
{{ .Values.image.registry }}/{{ .name }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "sluice.namesrvAddr" -}}
{{- if .Values.rocketmq.enabled -}}
sluice-namesrv.{{ .Release.Namespace }}.svc.cluster.local:9876
{{- else -}}
{{ required "rocketmq.namesrvAddr is required when rocketmq.enabled is false" .Values.rocketmq.namesrvAddr }}
{{- end }}
{{- end }}

{{- define "sluice.redisUrl" -}}
{{- if .Values.redis.bundled.enabled -}}
redis://sluice-redis:6379
{{- else -}}
{{ required "redis.url is required" .Values.redis.url }}
{{- end }}
{{- end }}

{{/* Pod and container security: non-root, read-only root, no capabilities. */}}
{{- define "sluice.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "sluice.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}
