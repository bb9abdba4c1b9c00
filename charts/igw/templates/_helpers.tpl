{{/* Chart name, or nameOverride. */}}
{{- define "igw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Prefix of every object name: the release name, plus the chart name unless the release name holds it. */}}
{{- define "igw.fullname" -}}
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

{{/* fullname plus a suffix, within a DNS label's 63 characters. */}}
{{- define "igw.childName" -}}
{{- $suffix := index . 1 }}
{{- printf "%s-%s" (include "igw.fullname" (index . 0) | trunc (int (sub 62 (len $suffix))) | trimSuffix "-") $suffix }}
{{- end }}

{{- define "igw.namespace" -}}
{{- default .Release.Namespace .Values.namespace }}
{{- end }}

{{- define "igw.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "igw.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "igw.extensionServerName" -}}
{{- include "igw.childName" (list . "extension-server") }}
{{- end }}

{{/* The FQDN Envoy Gateway dials for the extension server. */}}
{{- define "igw.extensionServerFQDN" -}}
{{- printf "%s.%s.svc.%s" (include "igw.extensionServerName" .) (include "igw.namespace" .) .Values.clusterDomain }}
{{- end }}

{{- define "igw.selectorLabels" -}}
app.kubernetes.io/name: {{ include "igw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "igw.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "igw.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: igw
{{- end }}

{{/* Port numbers must be 1..65535. */}}
{{- define "igw.port" -}}
{{- $p := int (index . 1) }}
{{- if or (lt $p 1) (gt $p 65535) }}
{{- fail (printf "%s must be a port between 1 and 65535, got %v" (index . 0) (index . 1)) }}
{{- end }}
{{- $p }}
{{- end }}

{{/* The operator's image tag: image.tag, else the chart's appVersion. */}}
{{- define "igw.imageTag" -}}
{{- toString (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* An igw component image (epp, bbr) of the operator's release, unless the value names one. */}}
{{- define "igw.componentImage" -}}
{{- $ctx := index . 0 }}
{{- default (printf "ghcr.io/igw-dev/igw-%s:%s" (index . 1) (include "igw.imageTag" $ctx)) (index . 2) }}
{{- end }}

{{/*
The pod's topology spread constraints as YAML (empty for none):
topologySpreadConstraints when set (each given the operator's selector when it
has no labelSelector), else one soft constraint per topologySpread.topologyKeys.
*/}}
{{- define "igw.topologySpreadConstraints" -}}
{{- $selector := include "igw.selectorLabels" . | fromYaml }}
{{- $out := list }}
{{- if .Values.topologySpreadConstraints }}
{{- range .Values.topologySpreadConstraints }}
{{- $c := deepCopy . }}
{{- if not (hasKey $c "labelSelector") }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" $selector) }}
{{- end }}
{{- $out = append $out $c }}
{{- end }}
{{- else if .Values.topologySpread.enabled }}
{{- range .Values.topologySpread.topologyKeys }}
{{- $out = append $out (dict "maxSkew" (int $.Values.topologySpread.maxSkew) "topologyKey" . "whenUnsatisfiable" $.Values.topologySpread.whenUnsatisfiable "labelSelector" (dict "matchLabels" $selector)) }}
{{- end }}
{{- end }}
{{- if $out }}
{{- toYaml $out }}
{{- end }}
{{- end }}
