{{/* Names, labels and the shared pieces of every component's objects. */}}

{{- define "tributary.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object's name: "<release>-tributary", or the release name when it
already contains the chart's name. */}}
{{- define "tributary.fullname" -}}
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

{{- define "tributary.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "tributary.labels" -}}
helm.sh/chart: {{ include "tributary.chart" . }}
app.kubernetes.io/name: {{ include "tributary.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tributary
{{- end }}

{{/* Selector labels of one component: (dict "root" $ "name" "ingest"). */}}
{{- define "tributary.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tributary.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}
{{- end }}

{{- define "tributary.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tributary.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image of one component: (dict "root" $ "name" "ingest"). */}}
{{- define "tributary.image" -}}
{{- $img := .root.Values.image -}}
{{- printf "%s/%s%s:%s" $img.registry $img.repositoryPrefix .name (default .root.Chart.AppVersion $img.tag) }}
{{- end }}

{{- define "tributary.envConfigMap" -}}
{{- printf "%s-env" (include "tributary.fullname" .) }}
{{- end }}

{{/* The Secret with SASL credentials (and the receiver's secret, the console's token): the chart's or an existing one. */}}
{{- define "tributary.kafkaSecret" -}}
{{- default (printf "%s-secrets" (include "tributary.fullname" .)) .Values.kafka.sasl.existingSecret }}
{{- end }}

{{/* Whether the chart renders its own Secret. */}}
{{- define "tributary.ownSecret" -}}
{{- if or (and .Values.kafka.sasl.mechanism (not .Values.kafka.sasl.existingSecret)) (and .Values.receiver.enabled .Values.receiver.sharedSecret) (include "tributary.consoleOwnToken" .) }}true{{ end }}
{{- end }}

{{/* Whether the console's token is kept in the chart's Secret (console.token, no existingSecret). */}}
{{- define "tributary.consoleOwnToken" -}}
{{- if and .Values.console.enabled .Values.console.token (not .Values.console.existingSecret) }}true{{ end }}
{{- end }}

{{/* The Secret and key of the audiences profile API's token (AUDIENCES_TOKEN), as
"<name>/<key>": audiences.token.existingSecret's, else the chart's <fullname>-audiences-token. */}}
{{- define "tributary.audiencesTokenRef" -}}
{{- with .Values.audiences.token.existingSecret }}
{{- printf "%s/%s" . $.Values.audiences.token.secretKey }}
{{- else }}
{{- printf "%s-audiences-token/token" (include "tributary.fullname" .) }}
{{- end }}
{{- end }}

{{/* The token the chart keeps in <fullname>-audiences-token: audiences.token.value, else the
one that Secret already holds (lookup: kept across upgrades), else a new random one, generated
once per render (remembered in .Values, which every template of the chart shares). */}}
{{- define "tributary.audiencesToken" -}}
{{- $t := .Values.audiences.token }}
{{- if $t.value }}
{{- $t.value }}
{{- else }}
{{- if not (hasKey $t "generated") }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (printf "%s-audiences-token" (include "tributary.fullname" .)) }}
{{- $old := "" }}
{{- if $existing }}
{{- $old = dig "data" "token" "" $existing | b64dec }}
{{- end }}
{{- $_ := set $t "generated" ($old | default (randAlphaNum 48)) }}
{{- end }}
{{- $t.generated }}
{{- end }}
{{- end }}

{{/* The pod annotation that rolls the pods using the chart's audiences token when it changes
(none with an existing Secret). */}}
{{- define "tributary.audiencesTokenChecksum" -}}
{{- if not .Values.audiences.token.existingSecret }}
{{- include "tributary.audiencesToken" . | sha256sum }}
{{- end }}
{{- end }}

{{/* The names a Service is reached by inside the cluster, comma-separated: (dict "root" $
"name" "<service name>"): <name>, <name>.<namespace>, <name>.<namespace>.svc and
<name>.<namespace>.svc.<clusterDomain>. With "wildcard" true, the names of its pods
instead (*.<name>.<namespace>.svc ...: a headless Service's). */}}
{{- define "tributary.serviceHosts" -}}
{{- $ns := .root.Release.Namespace }}
{{- $pre := ternary "*." "" (default false .wildcard) }}
{{- $names := list }}
{{- if not .wildcard }}
{{- $names = append $names .name }}
{{- end }}
{{- $names = append $names (printf "%s%s.%s" $pre .name $ns) }}
{{- $names = append $names (printf "%s%s.%s.svc" $pre .name $ns) }}
{{- $names = append $names (printf "%s%s.%s.svc.%s" $pre .name $ns .root.Values.clusterDomain) }}
{{- join "," $names }}
{{- end }}

{{/* An ALLOWED_HOSTS value: (dict "names" (list ...) "extra" <the component's allowedHosts>),
the names comma-separated, without repeats; "*" when extra holds it. */}}
{{- define "tributary.allowedHosts" -}}
{{- if has "*" (.extra | default list) }}*{{ else }}
{{- $all := list }}
{{- range concat .names (.extra | default list) }}
{{- range splitList "," . }}
{{- $all = append $all (trim .) }}
{{- end }}
{{- end }}
{{- join "," (compact (uniq $all)) }}
{{- end }}
{{- end }}

{{/* Whether a tenant config is given at all. */}}
{{- define "tributary.hasTenantConfig" -}}
{{- if or .Values.tenantConfig.content .Values.tenantConfig.existingConfigMap .Values.tenantConfig.existingSecret }}true{{ end }}
{{- end }}

{{/* Environment every container gets: the SASL credentials and the config encryption key. */}}
{{- define "tributary.commonEnv" -}}
{{- if .Values.kafka.sasl.mechanism }}
- name: KAFKA_SASL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ include "tributary.kafkaSecret" . }}
      key: {{ ternary .Values.kafka.sasl.usernameKey "username" (ne .Values.kafka.sasl.existingSecret "") }}
- name: KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "tributary.kafkaSecret" . }}
      key: {{ ternary .Values.kafka.sasl.passwordKey "password" (ne .Values.kafka.sasl.existingSecret "") }}
{{- end }}
{{- with .Values.tenantConfig.encryption.existingSecret }}
- name: CONFIG_ENCRYPTION_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.tenantConfig.encryption.secretKey }}
{{- end }}
{{- end }}

{{/* Volumes and mounts for the Kafka CA certificate. */}}
{{- define "tributary.caVolume" -}}
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.caSecret }}
- name: kafka-ca
  secret:
    secretName: {{ .Values.kafka.tls.caSecret }}
    items:
      - key: {{ .Values.kafka.tls.caKey }}
        path: ca.crt
{{- end }}
{{- end }}
{{- define "tributary.caMount" -}}
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.caSecret }}
- name: kafka-ca
  mountPath: /etc/tributary/kafka-ca
  readOnly: true
{{- end }}
{{- end }}

{{/* Checks that hold for every install. */}}
{{- define "tributary.validate" -}}
{{- if not .Values.kafka.brokers }}
{{- fail "kafka.brokers is required: the bootstrap servers of your Kafka cluster (host:port each)" }}
{{- end }}
{{- if lt (int .Values.kafka.partitions) 1 }}
{{- fail "kafka.partitions must be at least 1" }}
{{- end }}
{{- if and .Values.kafka.sasl.mechanism (not .Values.kafka.sasl.existingSecret) (or (not .Values.kafka.sasl.username) (not .Values.kafka.sasl.password)) }}
{{- fail "kafka.sasl: username and password (or existingSecret) are required with a mechanism" }}
{{- end }}
{{- if and (not .Values.kafka.tls.enabled) .Values.kafka.tls.caSecret }}
{{- fail "kafka.tls.caSecret needs kafka.tls.enabled" }}
{{- end }}
{{- if and .Values.console.enabled (not .Values.console.token) (not .Values.console.existingSecret) }}
{{- fail "console.token or console.existingSecret is required: the console's admin API refuses to start without a bearer token (CONSOLE_TOKEN); e.g. --set console.token=$(openssl rand -hex 32), or console.enabled=false" }}
{{- end }}
{{- if and .Values.console.enabled .Values.console.token (not .Values.console.existingSecret) (lt (len .Values.console.token) 16) }}
{{- fail (printf "console.token must be at least 16 characters (CONSOLE_TOKEN), got %d: e.g. --set console.token=$(openssl rand -hex 32)" (len .Values.console.token)) }}
{{- end }}
{{- with .Values.audiences.token.value }}
{{- if and $.Values.audiences.enabled (not $.Values.audiences.token.existingSecret) (lt (len .) 16) }}
{{- fail (printf "audiences.token.value must be at least 16 characters (AUDIENCES_TOKEN), got %d: e.g. --set audiences.token.value=$(openssl rand -hex 32), or leave it empty and the chart generates one" (len .)) }}
{{- end }}
{{- end }}
{{- /* Any number of consoles (docs/console.md#more-than-one-console), but a fixed one: the
console's load is people and automation, not traffic, so it has no autoscaling block. */}}
{{- if and .Values.console.enabled (lt (int .Values.console.replicas) 1) }}
{{- fail "console.replicas must be at least 1 (console.enabled=false renders no console)" }}
{{- end }}
{{- if and .Values.console.enabled (dig "autoscaling" "enabled" false .Values.console) }}
{{- fail "console.autoscaling is not supported: set console.replicas (2 or more for a console that stays up through a pod's restart, docs/operations.md#two-consoles)" }}
{{- end }}
{{- if gt (len (compact (list .Values.tenantConfig.content .Values.tenantConfig.existingConfigMap .Values.tenantConfig.existingSecret))) 1 }}
{{- fail "tenantConfig: give one of content, existingConfigMap and existingSecret" }}
{{- end }}
{{- end }}

{{/* An Ingress to one component's Service (port "http"): (dict "root" $ "name" "ingest"
"values" .Values.ingress), the values having className, annotations, hosts (host and paths
of path and pathType) and tls (secretName and hosts). */}}
{{- define "tributary.ingress" -}}
{{- $svc := printf "%s-%s" (include "tributary.fullname" .root) .name | trunc 63 | trimSuffix "-" }}
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {{ $svc }}
  labels:
    {{- include "tributary.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .name }}
  {{- with .values.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  {{- with .values.className }}
  ingressClassName: {{ . }}
  {{- end }}
  {{- with .values.tls }}
  tls:
    {{- range . }}
    - secretName: {{ .secretName }}
      hosts:
        {{- toYaml .hosts | nindent 8 }}
    {{- end }}
  {{- end }}
  rules:
    {{- range .values.hosts }}
    - host: {{ .host | quote }}
      http:
        paths:
          {{- range .paths }}
          - path: {{ .path }}
            pathType: {{ default "Prefix" .pathType }}
            backend:
              service:
                name: {{ $svc }}
                port:
                  name: http
          {{- end }}
    {{- end }}
{{- end }}
