{{/*
Names and labels shared by the templates.
*/}}

{{/* nereid.name is the chart name, or nameOverride. */}}
{{- define "nereid.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
nereid.fullname prefixes every object's name: the release name, with the chart
name appended unless the release name already holds it ("nereid" stays
"nereid", so the default ServiceAccounts are nereid-globalmanager and
nereid-localcontroller, the names the binaries default to).
*/}}
{{- define "nereid.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "nereid.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* nereid.labels are the labels of every object of the release. */}}
{{- define "nereid.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "nereid.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: nereid
{{- end -}}

{{/* nereid.selectorLabels COMPONENT: the labels that select one component's Pods. */}}
{{- define "nereid.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nereid.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* nereid.image IMAGE-VALUES: registry/repository:tag, the tag defaulting to appVersion. */}}
{{- define "nereid.image" -}}
{{- $tag := default .root.Chart.AppVersion .image.tag -}}
{{- if .image.registry -}}
{{- printf "%s/%s:%s" .image.registry .image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "nereid.globalManager.name" -}}
{{- printf "%s-globalmanager" (include "nereid.fullname" .) -}}
{{- end -}}

{{/*
nereid.clusterScopedName names the release's cluster-scoped objects (the
GlobalManager's ClusterRole and ClusterRoleBinding): the release namespace, then
the GlobalManager's name ("nereid-system-nereid-globalmanager" by default).
Namespaced objects are told apart by their namespace; cluster-scoped ones are
not, so without it two releases of one name in two namespaces would share them
and the second would replace the first's binding. A valid DNS subdomain of at
most 253 characters.
*/}}
{{- define "nereid.clusterScopedName" -}}
{{- printf "%s-%s" .Release.Namespace (include "nereid.globalManager.name" .) | trunc 253 | trimSuffix "-" -}}
{{- end -}}

{{- define "nereid.localController.name" -}}
{{- printf "%s-localcontroller" (include "nereid.fullname" .) -}}
{{- end -}}

{{/* nereid.edgeHub.serviceName is the Service LocalControllers dial. */}}
{{- define "nereid.diServer.serviceName" -}}
{{- printf "%s-di-server" (include "nereid.fullname" .) -}}
{{- end -}}

{{/* nereid.diV1Server.serviceName is the Service v1alpha1 DIJobs' coordinators and aggregators call. */}}
{{- define "nereid.diV1Server.serviceName" -}}
{{- printf "%s-di-v1-server" (include "nereid.fullname" .) -}}
{{- end -}}

{{/* nereid.dijobConversion.serviceName is the Service the API server calls to convert DIJobs. */}}
{{- define "nereid.dijobConversion.serviceName" -}}
{{- printf "%s-dijob-conversion" (include "nereid.fullname" .) -}}
{{- end -}}

{{- define "nereid.edgeHub.serviceName" -}}
{{- printf "%s-edgehub" (include "nereid.fullname" .) -}}
{{- end -}}

{{/*
nereid.edgeHub.hostnames: the names the hub's certificate must hold, the
Service's cluster DNS names and the configured ones, comma-separated.
*/}}
{{- define "nereid.edgeHub.hostnames" -}}
{{- $svc := include "nereid.edgeHub.serviceName" . -}}
{{- $ns := .Release.Namespace -}}
{{- $names := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain) -}}
{{- concat $names .Values.globalManager.edgeHub.hostnames | uniq | join "," -}}
{{- end -}}

{{/* nereid.localController.gmAddress: localController.gmAddress or the hub Service's DNS name and port. */}}
{{- define "nereid.localController.gmAddress" -}}
{{- if .Values.localController.gmAddress -}}
{{- .Values.localController.gmAddress -}}
{{- else -}}
{{- printf "%s.%s.svc:%d" (include "nereid.edgeHub.serviceName" .) .Release.Namespace (int .Values.globalManager.edgeHub.port) -}}
{{- end -}}
{{- end -}}

{{/* nereid.restrictedContainerSecurityContext: what the restricted Pod Security Standard asks of a container. */}}
{{- define "nereid.restrictedContainerSecurityContext" -}}
runAsNonRoot: true
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* nereid.edgeNodeSelector: the hub's node rule (--edge-node-selector). globalManager.edgeHub.edgeNodeSelector when set; else the nodes the LocalControllers run on: every node (empty) with localController.everyNode or an empty localController.nodeSelector, else that nodeSelector as a label selector (a label whose value is empty, as KubeEdge's edge role is, by its key alone). */}}
{{- define "nereid.edgeNodeSelector" -}}
{{- $lc := .Values.localController -}}
{{- if .Values.globalManager.edgeHub.edgeNodeSelector -}}
{{- .Values.globalManager.edgeHub.edgeNodeSelector -}}
{{- else if not $lc.everyNode -}}
{{- $terms := list -}}
{{- range $k, $v := $lc.nodeSelector -}}
{{- if eq (toString $v) "" -}}
{{- $terms = append $terms $k -}}
{{- else -}}
{{- $terms = append $terms (printf "%s=%s" $k (toString $v)) -}}
{{- end -}}
{{- end -}}
{{- join "," $terms -}}
{{- end -}}
{{- end -}}

{{/* nereid.globalManager.metricsServiceName is the Service in front of every replica's /metrics. */}}
{{- define "nereid.globalManager.metricsServiceName" -}}
{{- printf "%s-metrics" (include "nereid.globalManager.name" .) -}}
{{- end -}}

{{/*
nereid.metrics.selector is the label matchers of the GlobalManager's series as
the chart's ServiceMonitor has them scraped: Prometheus's job label is the
metrics Service's name, its namespace label the release namespace (honorLabels
keeps the per-job gauges' own namespace label instead, which the alerts do not
read).
*/}}
{{- define "nereid.metrics.selector" -}}
{{- printf "job=%q, namespace=%q" (include "nereid.globalManager.metricsServiceName" .) .Release.Namespace -}}
{{- end -}}
