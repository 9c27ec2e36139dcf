{{/* Full name of the release's objects: <release>-spindle-operator, or the release name when it already says spindle. */}}
{{- define "spindle.fullname" -}}
{{- if contains "spindle" .Release.Name -}}
{{- printf "%s-operator" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-spindle-operator" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "spindle.labels" -}}
app.kubernetes.io/name: spindle-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: spindle
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "spindle.selectorLabels" -}}
app.kubernetes.io/name: spindle-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "spindle.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "spindle.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
What the operator does in the namespaces it serves, verb by verb (least privilege):
- Brokers: watched and reconciled; kopf patches its progress annotations and finalizer, the
  operator writes status through the status subresource.
- LogVolumes: created, patched and deleted by the operator (one per volume), status written.
- Reassignments and Rebalances: watched, annotated by kopf, status written; a Rebalance's
  batches are Reassignments the operator creates.
- Pods, PVCs, ConfigMaps, Services: the objects a Broker owns, created/patched/deleted.
- Jobs: a Rebalance's planner, created, read, deleted (a new plan is a new Job); its
  ServiceAccount (the chart's, templates/planner.yaml) read, to say so when it is missing.
- Events (core/v1, which kopf and the operator post): what kubectl describe shows; read too,
  for volume-health Events (VolumeConditionAbnormal) on claims.
No Secrets, no Node or PersistentVolume writes (both only read, cluster-wide, for LogVolume
status), no wildcard.
*/}}
{{- define "spindle.namespacedRules" -}}
- apiGroups: [spindle.io]
  resources: [brokers, rebalances]
  verbs: [get, list, watch, patch]
# Remediation by MoveReplicas creates a Reassignment.
- apiGroups: [spindle.io]
  resources: [reassignments]
  verbs: [create]
- apiGroups: [spindle.io]
  resources: [reassignments]
  verbs: [get, list, watch, create, patch]
- apiGroups: [spindle.io]
  resources: [logvolumes]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [spindle.io]
  resources: [brokers/status, logvolumes/status, reassignments/status, rebalances/status]
  verbs: [get, patch]
- apiGroups: [""]
  resources: [pods, persistentvolumeclaims, configmaps, services]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, create, delete]
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get]
- apiGroups: [""]
  resources: [events]
  verbs: [create, list, watch]
{{- end -}}

{{/* Name of the chart's etcd StatefulSet and client Service. */}}
{{- define "spindle.etcdName" -}}
{{- printf "%s-etcd" .Release.Name | trunc 57 | trimSuffix "-" -}}
{{- end -}}

{{/*
The brokers' etcd client URLs, comma-separated (the operator's --etcd-endpoints): every member
of the chart's etcd, or etcd.endpoints; empty when neither. Refuses an even or absurd member
count (an even count tolerates no more failures than the odd one below it).
*/}}
{{- define "spindle.etcdEndpoints" -}}
{{- if .Values.etcd.enabled -}}
{{- $replicas := int .Values.etcd.replicas -}}
{{- if not (has $replicas (list 1 3 5)) -}}
{{- fail (printf "etcd.replicas must be 1, 3 or 5 (an odd quorum), got %v" .Values.etcd.replicas) -}}
{{- end -}}
{{- $name := include "spindle.etcdName" . -}}
{{- $urls := list -}}
{{- range $i := until $replicas -}}
{{- $urls = append $urls (printf "http://%s-%d.%s-peers.%s.svc:2379" $name $i $name $.Release.Namespace) -}}
{{- end -}}
{{- join "," $urls -}}
{{- else -}}
{{- join "," .Values.etcd.endpoints -}}
{{- end -}}
{{- end -}}
