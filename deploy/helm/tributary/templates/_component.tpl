{{/*
tributary.component renders one component: its workload (a Deployment, or a StatefulSet for
consumers that need a stable identity), Service, HorizontalPodAutoscaler, PodDisruptionBudget
and ServiceMonitor. Called as:

  include "tributary.component" (dict
    "root" $                      the chart's context
    "name" "router"               component name: object names, image name, labels
    "kind" "StatefulSet"          Deployment or StatefulSet
    "port" 9101                   the HTTP port: /healthz /readyz /metrics (and the API)
    "addrEnv" "METRICS_ADDR"      the variable that sets the listen address
    "idEnv" "ROUTER_TRANSACTIONAL_ID"   optional: gets the pod's name (downward API)
    "bounded" true                replicas must not exceed kafka.partitions
    "metrics" true                the component serves /metrics (ServiceMonitor)
    "metricsPort" 9100            optional: /metrics on this port (METRICS_ADDR), off the HTTP port
    "env" (list ...)              component-specific EnvVar objects
    "podAnnotations" (dict ...)   optional: pod annotations of the chart's own (checksums)
    "noKafka" true                optional: no Kafka settings (the demo receiver)
    "publishNotReady" true        optional, StatefulSet: the headless Service publishes every
                                  pod's DNS name, ready or not (peers that reach each other
                                  by pod name: audiences' AUDIENCES_PEER_URL)
    "recreate" true               optional, Deployment: strategy Recreate (the old pods are gone
                                  before a new one starts) instead of RollingUpdate with
                                  maxSurge 1
    "values" .Values.router)      the component's values

Adding a component is one more templates/<name>.yaml with this call and one more block in
values.yaml (templates/audiences.yaml adds a Service of its own beside it; templates/console.yaml
a token from a Secret).
*/}}
{{- define "tributary.component" -}}
{{- $root := .root -}}
{{- $v := .values -}}
{{- $name := .name -}}
{{- $full := printf "%s-%s" (include "tributary.fullname" $root) $name | trunc 63 | trimSuffix "-" -}}
{{- $sel := include "tributary.selectorLabels" (dict "root" $root "name" $name) -}}
{{- $partitions := int $root.Values.kafka.partitions -}}
{{- /* A component without an autoscaling or pdb block in values.yaml (the console) has neither. */ -}}
{{- $hpa := dig "autoscaling" "enabled" false $v -}}
{{- $pdb := dig "pdb" "enabled" false $v -}}
{{- if .bounded }}
{{- if gt (int $v.replicas) $partitions }}
{{- fail (printf "%s.replicas (%d) exceeds kafka.partitions (%d): a replica beyond the partitions gets no work" $name (int $v.replicas) $partitions) }}
{{- end }}
{{- if and $hpa (gt (int $v.autoscaling.maxReplicas) $partitions) }}
{{- fail (printf "%s.autoscaling.maxReplicas (%d) exceeds kafka.partitions (%d): a replica beyond the partitions gets no work" $name (int $v.autoscaling.maxReplicas) $partitions) }}
{{- end }}
{{- end }}
{{- if and $hpa (gt (int $v.autoscaling.minReplicas) (int $v.autoscaling.maxReplicas)) }}
{{- fail (printf "%s.autoscaling: minReplicas exceeds maxReplicas" $name) }}
{{- end }}
---
apiVersion: apps/v1
kind: {{ .kind }}
metadata:
  name: {{ $full }}
  labels:
    {{- include "tributary.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ $name }}
spec:
  {{- if not $hpa }}
  replicas: {{ $v.replicas }}
  {{- end }}
  {{- if eq .kind "StatefulSet" }}
  serviceName: {{ $full }}
  # Pods are independent consumers: start and stop them together, not one by one.
  podManagementPolicy: Parallel
  updateStrategy:
    type: RollingUpdate
  {{- else if .recreate }}
  # Never two pods at once, not even during an upgrade: the old one stops before the new starts.
  strategy:
    type: Recreate
  {{- else }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 0
      maxSurge: 1
  {{- end }}
  selector:
    matchLabels:
      {{- $sel | nindent 6 }}
  template:
    metadata:
      labels:
        {{- $sel | nindent 8 }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        checksum/env: {{ include (print $root.Template.BasePath "/config.yaml") $root | sha256sum }}
        {{- with .podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with $v.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "tributary.serviceAccountName" $root }}
      automountServiceAccountToken: false
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      # Long enough for a graceful stop: finish in-flight work, commit, close.
      terminationGracePeriodSeconds: 60
      containers:
        - name: {{ $name }}
          image: {{ include "tributary.image" (dict "root" $root "name" $name) }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          {{- with $v.args }}
          args:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          ports:
            - name: http
              containerPort: {{ .port }}
              protocol: TCP
            {{- with .metricsPort }}
            - name: metrics
              containerPort: {{ . }}
              protocol: TCP
            {{- end }}
          {{- if not .noKafka }}
          envFrom:
            - configMapRef:
                name: {{ include "tributary.envConfigMap" $root }}
          {{- end }}
          env:
            - name: {{ .addrEnv }}
              value: {{ printf "0.0.0.0:%d" (int .port) | quote }}
            {{- with .metricsPort }}
            - name: METRICS_ADDR
              value: {{ printf "0.0.0.0:%d" (int .) | quote }}
            {{- end }}
            {{- with .idEnv }}
            - name: {{ . }}
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            {{- end }}
            {{- if not .noKafka }}
            {{- with (include "tributary.commonEnv" $root | trim) }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- end }}
            {{- with .env }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
            {{- with $v.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          startupProbe:
            httpGet: {path: /healthz, port: http}
            {{- toYaml $v.probes.startup | nindent 12 }}
          readinessProbe:
            httpGet: {path: /readyz, port: http}
            {{- toYaml $v.probes.readiness | nindent 12 }}
          livenessProbe:
            httpGet: {path: /healthz, port: http}
            {{- toYaml $v.probes.liveness | nindent 12 }}
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          {{- with (and (not .noKafka) (include "tributary.caMount" $root | trim)) }}
          volumeMounts:
            {{- . | nindent 12 }}
          {{- end }}
      {{- with (and (not .noKafka) (include "tributary.caVolume" $root | trim)) }}
      volumes:
        {{- . | nindent 8 }}
      {{- end }}
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- toYaml . | nindent 8 }}
      {{- end }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $full }}
  labels:
    {{- include "tributary.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ $name }}
spec:
  {{- if eq .kind "StatefulSet" }}
  # Headless: the StatefulSet's governing Service, and the scrape target of each pod.
  clusterIP: None
  {{- if .publishNotReady }}
  # <pod>.<this Service> resolves while the pod is not ready too.
  publishNotReadyAddresses: true
  {{- end }}
  {{- else }}
  type: {{ dig "service" "type" "ClusterIP" $v }}
  {{- end }}
  selector:
    {{- $sel | nindent 4 }}
  ports:
    - name: http
      port: {{ dig "service" "port" .port $v }}
      targetPort: http
      protocol: TCP
    {{- with .metricsPort }}
    - name: metrics
      port: {{ . }}
      targetPort: metrics
      protocol: TCP
    {{- end }}
{{- if $hpa }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ $full }}
  labels:
    {{- include "tributary.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ $name }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: {{ .kind }}
    name: {{ $full }}
  minReplicas: {{ $v.autoscaling.minReplicas }}
  maxReplicas: {{ $v.autoscaling.maxReplicas }}
  metrics:
    {{- with $v.autoscaling.targetCPUUtilizationPercentage }}
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ . }}
    {{- end }}
    {{- with $v.autoscaling.targetMemoryUtilizationPercentage }}
    - type: Resource
      resource:
        name: memory
        target:
          type: Utilization
          averageUtilization: {{ . }}
    {{- end }}
  {{- if .bounded }}
  behavior:
    # Every scale event rebalances the consumer group: scale down slowly.
    scaleDown:
      stabilizationWindowSeconds: 300
      policies:
        - type: Pods
          value: 1
          periodSeconds: 120
  {{- end }}
{{- end }}
{{- if $pdb }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $full }}
  labels:
    {{- include "tributary.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ $name }}
spec:
  maxUnavailable: {{ dig "pdb" "maxUnavailable" 1 $v }}
  selector:
    matchLabels:
      {{- $sel | nindent 6 }}
{{- end }}
{{- if and .metrics $v.serviceMonitor.enabled ($root.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor") }}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ $full }}
  labels:
    {{- include "tributary.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ $name }}
    {{- with $root.Values.serviceMonitorLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- $sel | nindent 6 }}
  endpoints:
    - port: {{ if .metricsPort }}metrics{{ else }}http{{ end }}
      path: /metrics
      interval: {{ $v.serviceMonitor.interval }}
{{- end }}
{{- end }}
