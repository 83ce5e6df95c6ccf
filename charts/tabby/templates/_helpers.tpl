{{- define "tabby.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "tabby.labels" -}}
app.kubernetes.io/name: tabby
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "tabby.version" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "tabby.selectorLabels" -}}
app.kubernetes.io/name: tabby
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: tabby-node
{{- end -}}

{{- define "tabby.version" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{- define "tabby.image" -}}
{{ .Values.image.repository }}:{{ include "tabby.version" . }}
{{- end -}}

{{- define "tabby.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}{{ default "tabby-node" .Values.serviceAccount.name }}{{- else -}}{{ default "default" .Values.serviceAccount.name }}{{- end -}}
{{- end -}}

{{- define "tabby.typhaName" -}}
{{ include "tabby.fullname" . }}-typha
{{- end -}}

{{- define "tabby.typhaTLSSecret" -}}
{{- default (printf "%s-tls" (include "tabby.typhaName" .)) .Values.typha.tlsSecret -}}
{{- end -}}

{{- define "tabby.typhaSelectorLabels" -}}
app.kubernetes.io/name: tabby
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: tabby-typha
{{- end -}}

{{- define "tabby.observeTLSSecret" -}}
{{- default (printf "%s-node-observe-tls" (include "tabby.fullname" .)) .Values.observe.tlsSecret -}}
{{- end -}}
