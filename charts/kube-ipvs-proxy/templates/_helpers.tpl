{{/* The objects' name: the release's, or the chart's after it. */}}
{{- define "kip.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The pods' k8s-app label, which is also the metrics job's name. */}}
{{- define "kip.app" -}}
{{- if .Values.kubeProxyLabels -}}kube-proxy{{- else -}}{{ include "kip.fullname" . }}{{- end -}}
{{- end -}}

{{- define "kip.labels" -}}
k8s-app: {{ include "kip.app" . }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The config file kube-proxy's way: the chart's mode and kubeconfig over .Values.config. */}}
{{- define "kip.config" -}}
{{- $fixed := dict "apiVersion" "kubeproxy.config.k8s.io/v1alpha1" "kind" "KubeProxyConfiguration" "mode" "ipvs" "clientConnection" (dict "kubeconfig" "/var/lib/kube-ipvs-proxy/kubeconfig.conf") -}}
{{- toYaml (mustMergeOverwrite (deepCopy .Values.config) $fixed) -}}
{{- end -}}

{{/* The ports of the health and metrics addresses, as the config sets them. */}}
{{- define "kip.healthzPort" -}}
{{- .Values.config.healthzBindAddress | default "0.0.0.0:10256" | splitList ":" | last -}}
{{- end -}}
{{- define "kip.metricsPort" -}}
{{- .Values.config.metricsBindAddress | default "127.0.0.1:10249" | splitList ":" | last -}}
{{- end -}}
