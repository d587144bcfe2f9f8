{{/* Names, labels and the pieces every kernel pod shares (one image, one environment, one vault). */}}

{{- define "brain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "brain.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "brain.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "brain.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "brain.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "brain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: call with (dict "root" $ "component" "api"). */}}
{{- define "brain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "brain.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "brain.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "brain.secretName" -}}
{{- default (printf "%s-secrets" (include "brain.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "brain.vaultClaim" -}}
{{- default (printf "%s-vault" (include "brain.fullname" .)) .Values.vault.existingClaim -}}
{{- end -}}

{{/* Pod-level settings shared by every kernel pod. Call with (dict "root" $), adding "noVault" true for
the migration hook, which runs before the vault's PVC exists and never reads the vault, and "component"
"api" for the API (its anti-affinity). */}}
{{- define "brain.podSpec" -}}
{{- $root := .root -}}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- $shared := has "ReadWriteMany" $root.Values.vault.accessModes -}}
{{- if $root.Values.affinity }}
affinity:
  {{- toYaml $root.Values.affinity | nindent 2 }}
{{- else if and (eq (toString .component) "api") $shared }}
{{- /* Replicas spread over nodes, so a node drain or loss keeps one serving. */}}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "brain.selectorLabels" (dict "root" $root "component" "api") | nindent 14 }}
{{- else if eq (toString .component) "api" }}
{{- /* ReadWriteOnce: one node mounts the vault, so a rolling update's new pod starts beside the old one (the
first one matches itself); spread over nodes, it waited on a volume attached elsewhere and the rollout hung. */}}
affinity:
  podAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "brain.selectorLabels" (dict "root" $root "component" "api") | nindent 12 }}
{{- else if and (not .noVault) (not $shared) }}
{{- /* ReadWriteOnce: only pods on the API's node can mount the vault. */}}
affinity:
  podAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "brain.selectorLabels" (dict "root" $root "component" "api") | nindent 12 }}
{{- end }}
volumes:
  {{- if not .noVault }}
  - name: vault
    {{- with $root.Values.vault.source }}
    {{- toYaml . | nindent 4 }}
    {{- else }}
    persistentVolumeClaim:
      claimName: {{ include "brain.vaultClaim" $root }}
    {{- end }}
  {{- end }}
  - name: tmp
    emptyDir:
      sizeLimit: {{ $root.Values.tmpSizeLimit }}
  {{- with $root.Values.transcripts.claude }}
  - name: claude-transcripts
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $root.Values.transcripts.codex }}
  - name: codex-transcripts
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* Container-level settings shared by every kernel container: image, environment, mounts, security.
Call with (dict "root" $ "env" (list ...)): "env" adds the container's own variables. */}}
{{- define "brain.container" -}}
{{- $root := .root -}}
image: {{ include "brain.image" $root }}
imagePullPolicy: {{ $root.Values.image.pullPolicy }}
securityContext:
  {{- toYaml $root.Values.securityContext | nindent 2 }}
envFrom:
  - secretRef:
      name: {{ include "brain.secretName" $root }}
env:
  # Required: a pod whose Secret lacks it does not start (CreateContainerConfigError names the key).
  - name: DATABASE_URL
    valueFrom:
      secretKeyRef:
        name: {{ include "brain.secretName" $root }}
        key: DATABASE_URL
  - name: BRAIN_VAULT
    value: /vault
  - name: BRAIN_HOME
    value: /tmp/brain
  # The migrate hook alone moves the schema: a pod or job of the old image never undoes an upgrade or a rollback.
  - name: BRAIN_MIGRATE_ON_START
    value: "false"
  # No token, no start: a Secret of one's own without BRAIN_TOKENS must not serve the memory to anyone.
  - name: BRAIN_AUTH_REQUIRED
    value: "true"
  {{- if $root.Values.transcripts.claude }}
  - name: BRAIN_CLAUDE_DIR
    value: /transcripts/claude
  {{- end }}
  {{- if $root.Values.transcripts.codex }}
  - name: BRAIN_CODEX_DIR
    value: /transcripts/codex
  {{- end }}
  {{- with .env }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- range $name, $value := $root.Values.config }}
  - name: {{ $name }}
    value: {{ $value | toString | quote }}
  {{- end }}
volumeMounts:
  {{- if not .noVault }}
  - name: vault
    mountPath: /vault
  {{- end }}
  - name: tmp
    mountPath: /tmp
  {{- if $root.Values.transcripts.claude }}
  - name: claude-transcripts
    mountPath: /transcripts/claude
    readOnly: true
  {{- end }}
  {{- if $root.Values.transcripts.codex }}
  - name: codex-transcripts
    mountPath: /transcripts/codex
    readOnly: true
  {{- end }}
{{- end -}}

{{/* Pod annotations: a changed Secret or setting rolls the pods. */}}
{{- define "brain.podAnnotations" -}}
checksum/secrets: {{ toJson .Values.secrets | sha256sum }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* One CronJob: call with (dict "root" $ "name" "tick" "job" .Values.cronJobs.tick "args" (list ...)). */}}
{{- define "brain.cronJob" -}}
{{- $root := .root -}}
apiVersion: batch/v1
kind: CronJob
metadata:
  name: {{ include "brain.fullname" $root }}-{{ .name }}
  labels:
    {{- include "brain.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .name }}
spec:
  schedule: {{ .job.schedule | quote }}
  timeZone: Etc/UTC
  concurrencyPolicy: Forbid
  startingDeadlineSeconds: {{ $root.Values.cronJobs.startingDeadlineSeconds }}
  successfulJobsHistoryLimit: {{ $root.Values.cronJobs.successfulJobsHistoryLimit }}
  failedJobsHistoryLimit: {{ $root.Values.cronJobs.failedJobsHistoryLimit }}
  jobTemplate:
    spec:
      backoffLimit: 1
      activeDeadlineSeconds: {{ .job.activeDeadlineSeconds }}
      template:
        metadata:
          labels:
            {{- include "brain.selectorLabels" (dict "root" $root "component" .name) | nindent 12 }}
          annotations:
            {{- include "brain.podAnnotations" $root | nindent 12 }}
        spec:
          restartPolicy: Never
          {{- include "brain.podSpec" (dict "root" $root) | nindent 10 }}
          containers:
            - name: {{ .name }}
              {{- include "brain.container" (dict "root" $root) | nindent 14 }}
              {{- with .command }}
              command:
                {{- toYaml . | nindent 16 }}
              {{- end }}
              args:
                {{- toYaml .args | nindent 16 }}
              resources:
                {{- toYaml $root.Values.cronJobs.resources | nindent 16 }}
{{- end -}}

{{/* More names for a component's Service (api.service.aliases, mcp.service.aliases): upstream's in-cluster clients
reach the kernel by the names its charts gave (agentibrain-brain-api, agentibrain-embeddings, agentibrain-mcp),
on port 8080, which every upstream Service used. The label component is <component>-alias, so the ServiceMonitor
scrapes the pods through the main Service only. Call with (dict "root" $ "component" "api" "names" list). */}}
{{- define "brain.serviceAliases" -}}
{{- $root := .root }}
{{- $component := .component }}
{{- range .names }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ . }}
  labels:
    {{- include "brain.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ $component }}-alias
spec:
  type: ClusterIP
  selector:
    {{- include "brain.selectorLabels" (dict "root" $root "component" $component) | nindent 4 }}
  ports:
    - name: http
      port: 8080
      targetPort: http
{{- end }}
{{- end -}}
