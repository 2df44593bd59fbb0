{{/* The chart's name. */}}
{{- define "kubeplace.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: the release name when it already contains the chart name. */}}
{{- define "kubeplace.fullname" -}}
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

{{- define "kubeplace.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubeplace.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- /* The release's `helm test` pod. */ -}}
{{- define "kubeplace.testSelectorLabels" -}}
{{ include "kubeplace.selectorLabels" . }}
app.kubernetes.io/component: test
{{- end }}

{{- define "kubeplace.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "kubeplace.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubeplace
{{- end }}

{{- define "kubeplace.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kubeplace.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kubeplace.webhookService" -}}
{{- printf "%s-webhook" (include "kubeplace.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kubeplace.placementService" -}}
{{- printf "%s-placement" (include "kubeplace.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kubeplace.metricsService" -}}
{{- printf "%s-metrics" (include "kubeplace.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kubeplace.tlsSecret" -}}
{{- printf "%s-webhook-tls" (include "kubeplace.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kubeplace.certificate" -}}
{{- printf "%s-webhook" (include "kubeplace.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The ConfigMap holding the webhook's client CA, when one is given; empty otherwise. */}}
{{- define "kubeplace.webhookClientCAConfigMap" -}}
{{- $ca := .Values.webhook.clientCA }}
{{- if and $ca.pem $ca.configMap }}
{{- fail "webhook.clientCA: give pem or configMap, not both" }}
{{- end }}
{{- if $ca.pem }}
{{- printf "%s-webhook-client-ca" (include "kubeplace.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $ca.configMap }}
{{- end }}
{{- end }}
