{{/* The chart's name, the release's full name (63 characters at most). */}}
{{- define "marketd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "marketd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A component's object name: fullname-component, 63 characters at most. */}}
{{- define "marketd.componentName" -}}
{{- printf "%s-%s" (include "marketd.fullname" .root | trunc (int (sub 62 (len .component))) | trimSuffix "-") .component -}}
{{- end -}}

{{- define "marketd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "marketd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "marketd.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "marketd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* dict root, component: the labels of a component's objects and pods. */}}
{{- define "marketd.componentLabels" -}}
{{ include "marketd.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "marketd.componentSelector" -}}
{{ include "marketd.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "marketd.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "marketd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "marketd.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret the roles read: the existing one or the chart's. */}}
{{- define "marketd.secretName" -}}
{{- default (include "marketd.fullname" .) .Values.existingSecret -}}
{{- end -}}

{{/* Whether the roles read a Secret at all. */}}
{{- define "marketd.hasSecret" -}}
{{- if or .Values.existingSecret .Values.secrets -}}true{{- end -}}
{{- end -}}

{{/* Refuses what the chart sets itself, and a key in both config and secrets. */}}
{{- define "marketd.validate" -}}
{{- range $k, $v := .Values.config -}}
{{- if has $k (list "MARKET_HTTP_ADDR" "MARKET_OPS_ADDR") -}}
{{- fail (printf "config.%s: set by the chart from ports; set ports.http / ports.ops instead" $k) -}}
{{- end -}}
{{- if and (not $.Values.existingSecret) (hasKey ($.Values.secrets | default dict) $k) -}}
{{- fail (printf "%s is in both config and secrets: keep it in one" $k) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.api.autoscaling.enabled (lt (int .Values.api.autoscaling.maxReplicas) (int .Values.api.autoscaling.minReplicas)) -}}
{{- fail "api.autoscaling.maxReplicas is below minReplicas" -}}
{{- end -}}
{{- end -}}

{{/* A map of name: value as a container's env list (sorted, values as strings). */}}
{{- define "marketd.envList" -}}
{{- range $k, $v := . }}
- name: {{ $k }}
  value: {{ toString $v | quote }}
{{- end -}}
{{- end -}}

{{/*
The pod annotations that roll the pods when their configuration changes: the
ConfigMap's and the Secret's content (an existing Secret: its name and
existingSecretRevision, as the chart cannot read it).
*/}}
{{- define "marketd.checksums" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
{{- if .Values.existingSecret }}
checksum/secret: {{ printf "%s/%s" .Values.existingSecret (toString .Values.existingSecretRevision) | sha256sum }}
{{- else }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end }}
{{- end -}}

{{/* dict root, port (name): the three probes on the ops port. */}}
{{- define "marketd.probes" -}}
{{- $p := .root.Values.probes -}}
startupProbe:
  httpGet: {path: /healthz, port: ops}
  periodSeconds: {{ $p.startup.periodSeconds }}
  failureThreshold: {{ $p.startup.failureThreshold }}
livenessProbe:
  httpGet: {path: /healthz, port: ops}
  periodSeconds: {{ $p.liveness.periodSeconds }}
  timeoutSeconds: {{ $p.liveness.timeoutSeconds }}
  failureThreshold: {{ $p.liveness.failureThreshold }}
readinessProbe:
  httpGet: {path: /readyz, port: ops}
  periodSeconds: {{ $p.readiness.periodSeconds }}
  timeoutSeconds: {{ $p.readiness.timeoutSeconds }}
  failureThreshold: {{ $p.readiness.failureThreshold }}
{{- end -}}
