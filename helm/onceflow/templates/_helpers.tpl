{{/* Names and labels shared by every object of the chart. */}}
{{- define "onceflow.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "onceflow.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "onceflow.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "onceflow.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- /* The operator's own account: the chart's, or one the platform made (create: false). */ -}}
{{- define "onceflow.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "onceflow.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: the account to run as when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "onceflow.labels" -}}
app.kubernetes.io/name: {{ include "onceflow.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "onceflow.selectorLabels" -}}
app.kubernetes.io/name: {{ include "onceflow.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "onceflow.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "onceflow.pullSecretNames" -}}
{{- $names := list -}}
{{- range .Values.imagePullSecrets -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- join "," $names -}}
{{- end -}}

{{- define "onceflow.webhookService" -}}
{{- printf "%s-webhook" (include "onceflow.fullname" .) -}}
{{- end -}}

{{- define "onceflow.webhookSecret" -}}
{{- default (printf "%s-webhook-tls" (include "onceflow.fullname" .)) .Values.webhook.certSecret -}}
{{- end -}}

{{- /* What the operator does in a namespace it watches, verb by verb: reconcile
Onceflow objects and write their status, post events, run task pods with their
ConfigMaps and their least-privilege RBAC, submit Spark drivers (SparkApplications or
Jobs), read the Secrets Pipelines and connectors name. */ -}}
{{- define "onceflow.namespacedRules" -}}
- apiGroups: [onceflow.io]
  resources: [pipelines, kafkasources, sparkjobs]
  verbs: [get, list, watch, patch]
- apiGroups: [onceflow.io]
  resources: [pipelines/status, kafkasources/status, sparkjobs/status]
  verbs: [update]
- apiGroups: [""]
  resources: [events]
  verbs: [create, list]
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch, create, delete]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, delete]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [create]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [create]
- apiGroups: [sparkoperator.k8s.io]
  resources: [sparkapplications]
  verbs: [get, list, watch, create, delete]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, delete]
{{- end -}}

{{- /* The CA of the operator's own webhook certificate goes into this one
configuration. */ -}}
{{- define "onceflow.webhookConfigurationRule" -}}
- apiGroups: [admissionregistration.k8s.io]
  resources: [validatingwebhookconfigurations]
  resourceNames: [{{ include "onceflow.fullname" . }}]
  verbs: [get, patch]
{{- end -}}
