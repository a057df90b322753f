{{- define "checkfu.fullname" -}}
{{- printf "%s" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "checkfu.labels" -}}
app.kubernetes.io/name: checkfu
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "checkfu.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "checkfu.serviceAccountName" -}}
{{- default (include "checkfu.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The env every role gets: storage, bus, fan-out, limits — by Secret reference. */}}
{{- define "checkfu.env" -}}
- name: CHECKFU_DATABASE_URL
  valueFrom:
    secretKeyRef: {name: {{ .Values.secrets.existingSecret }}, key: database-url}
- name: CHECKFU_KAFKA_BROKERS
  valueFrom:
    secretKeyRef: {name: {{ .Values.secrets.existingSecret }}, key: kafka-brokers, optional: true}
- name: CHECKFU_REDIS_URL
  valueFrom:
    secretKeyRef: {name: {{ .Values.secrets.existingSecret }}, key: redis-url, optional: true}
- name: CHECKFU_RATE_LIMIT_PER_SECOND
  value: {{ .Values.rateLimitPerSecond | quote }}
- name: RUST_LOG
  value: info
{{- with .Values.featuresDisabled }}
- name: CHECKFU_FEATURES_DISABLED
  value: {{ join "," . | quote }}
{{- end }}
- name: CHECKFU_FILES_RETENTION_DAYS
  value: {{ .Values.filesRetentionDays | quote }}
{{- end -}}

{{/*
The internal mesh: which roles listen on it, and which roles call each one.
This mirrors the authorization table in proto/src/mesh.rs (the server
refuses any other caller); the NetworkPolicies enforce the same at the
network. The gateway and the runner call others but are called by none.
*/}}
{{- define "checkfu.meshCallers" -}}
governance: [gateway, sessions, runner, capability-gateway, scheduler, memory]
sessions: [gateway, capability-gateway, runner, scheduler, memory]
model-gateway: [gateway, runner, memory, sessions, scheduler]
capability-gateway: [gateway, runner, sessions, scheduler]
webhooks: [gateway]
scheduler: [gateway]
memory: [gateway, sessions, scheduler]
{{- end -}}

{{- define "checkfu.meshPort" -}}7421{{- end -}}

{{/* The sandbox egress proxy (capability gateway): the one route out of a
sandbox, for the runners relaying local sandboxes and for sandbox pods. */}}
{{- define "checkfu.egressPort" -}}7422{{- end -}}
