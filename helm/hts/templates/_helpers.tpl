{{/*
Names and labels.
*/}}
{{- define "hts.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hts.fullname" -}}
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

{{- define "hts.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels every object carries. */}}
{{- define "hts.commonLabels" -}}
helm.sh/chart: {{ include "hts.chart" . }}
app.kubernetes.io/name: {{ include "hts.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hts
{{- end }}

{{/* Labels of the daemon's objects (Deployment, pods, Service, ...). */}}
{{- define "hts.labels" -}}
{{ include "hts.commonLabels" . }}
app.kubernetes.io/component: daemon
{{- end }}

{{/* The daemon pods' selector; Spark executor pods (component spark-executor) never match it. */}}
{{- define "hts.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hts.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: daemon
{{- end }}

{{- define "hts.executorSelectorLabels" -}}
app.kubernetes.io/name: {{ include "hts.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: spark-executor
{{- end }}

{{- define "hts.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "hts.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "hts.executorServiceAccountName" -}}
{{- default (include "hts.serviceAccountName" .) .Values.spark.k8s.executor.serviceAccountName }}
{{- end }}

{{- define "hts.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
API tokens: the Secret and its keys. The config names the files tokens/read and tokens/admin,
relative to the config file (/etc/hts/hts.yaml), where the projected volume puts the keys.
*/}}
{{- define "hts.tokenSecretName" -}}
{{- default (printf "%s-tokens" (include "hts.fullname" .)) .Values.api.tokens.existingSecret }}
{{- end }}

{{- define "hts.tokenKey.read" -}}
{{- if .Values.api.tokens.existingSecret }}{{ .Values.api.tokens.existingSecretKeys.read }}{{ else }}read{{ end }}
{{- end }}

{{- define "hts.tokenKey.admin" -}}
{{- if .Values.api.tokens.existingSecret }}{{ .Values.api.tokens.existingSecretKeys.admin }}{{ else }}admin{{ end }}
{{- end }}

{{- define "hts.configDir" -}}/etc/hts{{- end }}
{{- define "hts.stateDir" -}}/var/lib/hts{{- end }}
{{- define "hts.executorTemplatePath" -}}/etc/hts/executor-pod-template.yaml{{- end }}

{{/*
Locks: Apache Hudi's provider classes and keys.
*/}}
{{- define "hts.lockProviderClass" -}}
{{- $p := .Values.lock.provider -}}
{{- if eq $p "zookeeper" -}}org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider
{{- else if eq $p "dynamodb" -}}org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider
{{- else -}}org.apache.hudi.client.transaction.lock.InProcessLockProvider
{{- end -}}
{{- end }}

{{/* hoodie.write.lock.* keys, as a YAML map of strings. */}}
{{- define "hts.lockOptions" -}}
{{- $l := .Values.lock -}}
{{- $o := dict -}}
{{- range $k, $v := $l.options }}
{{- $_ := set $o $k (toString $v) }}
{{- end }}
{{- $_ := set $o "hoodie.write.lock.provider" (include "hts.lockProviderClass" .) }}
{{- if not (kindIs "invalid" $l.waitTimeMs) }}
{{- $_ := set $o "hoodie.write.lock.wait_time_ms" (printf "%d" (int64 $l.waitTimeMs)) }}
{{- end }}
{{- if eq $l.provider "zookeeper" }}
{{- $z := $l.zookeeper }}
{{- $_ := set $o "hoodie.write.lock.zookeeper.url" $z.url }}
{{- $_ := set $o "hoodie.write.lock.zookeeper.port" (printf "%d" (int64 $z.port)) }}
{{- $_ := set $o "hoodie.write.lock.zookeeper.base_path" $z.basePath }}
{{- with $z.lockKey }}{{ $_ := set $o "hoodie.write.lock.zookeeper.lock_key" . }}{{ end }}
{{- if not (kindIs "invalid" $z.sessionTimeoutMs) }}
{{- $_ := set $o "hoodie.write.lock.zookeeper.session_timeout_ms" (printf "%d" (int64 $z.sessionTimeoutMs)) }}
{{- end }}
{{- if not (kindIs "invalid" $z.connectionTimeoutMs) }}
{{- $_ := set $o "hoodie.write.lock.zookeeper.connection_timeout_ms" (printf "%d" (int64 $z.connectionTimeoutMs)) }}
{{- end }}
{{- else if eq $l.provider "dynamodb" }}
{{- $d := $l.dynamodb }}
{{- $_ := set $o "hoodie.write.lock.dynamodb.table" $d.table }}
{{- with $d.partitionKey }}{{ $_ := set $o "hoodie.write.lock.dynamodb.partition_key" . }}{{ end }}
{{- with (default $.Values.aws.region $d.region) }}{{ $_ := set $o "hoodie.write.lock.dynamodb.region" . }}{{ end }}
{{- with $d.endpointUrl }}{{ $_ := set $o "hoodie.write.lock.dynamodb.endpoint_url" . }}{{ end }}
{{- with $d.billingMode }}{{ $_ := set $o "hoodie.write.lock.dynamodb.billing_mode" . }}{{ end }}
{{- end }}
{{- toYaml $o }}
{{- end }}

{{/* The ZooKeeper connect string for leader election (empty when there is none). */}}
{{- define "hts.electionZookeeper" -}}
{{- if .Values.ha.zookeeperUrl }}{{ .Values.ha.zookeeperUrl }}
{{- else if eq .Values.lock.provider "zookeeper" }}{{ .Values.lock.zookeeper.url }}
{{- end }}
{{- end }}

{{/*
Spark.
*/}}
{{- define "hts.sparkMaster" -}}
{{- $s := .Values.spark -}}
{{- if eq $s.mode "local" }}{{ printf "local[%v]" $s.local.threads }}
{{- else if eq $s.mode "standalone" }}{{ $s.standalone.master }}
{{- else if eq $s.mode "k8s" }}{{ printf "k8s://%s" $s.k8s.apiServer }}
{{- else if eq $s.mode "connect" }}{{ $s.connect.url }}
{{- else }}in-process
{{- end }}
{{- end }}

{{/* Whether executors connect back to the driver in the daemon pod. */}}
{{- define "hts.sparkDriverPorts" -}}
{{- if or (eq .Values.spark.mode "k8s") (eq .Values.spark.mode "standalone") }}true{{ end }}
{{- end }}

{{/* spark.* settings, as a YAML map of strings; ${...} are expanded by the daemon. */}}
{{- define "hts.sparkConf" -}}
{{- $s := .Values.spark -}}
{{- $c := dict -}}
{{- if include "hts.sparkDriverPorts" . }}
{{- $_ := set $c "spark.driver.host" "${POD_IP}" }}
{{- $_ := set $c "spark.driver.bindAddress" "0.0.0.0" }}
{{- $_ := set $c "spark.driver.port" (printf "%d" (int64 $s.driver.port)) }}
{{- $_ := set $c "spark.blockManager.port" (printf "%d" (int64 $s.driver.blockManagerPort)) }}
{{- $_ := set $c "spark.driver.blockManager.port" (printf "%d" (int64 $s.driver.blockManagerPort)) }}
{{- end }}
{{- if eq $s.mode "k8s" }}
{{- $e := $s.k8s.executor }}
{{- $_ := set $c "spark.kubernetes.namespace" "${POD_NAMESPACE}" }}
{{- $_ := set $c "spark.kubernetes.driver.pod.name" "${POD_NAME}" }}
{{- $_ := set $c "spark.kubernetes.container.image" (include "hts.image" .) }}
{{- $_ := set $c "spark.kubernetes.container.image.pullPolicy" .Values.image.pullPolicy }}
{{- if .Values.imagePullSecrets }}
{{- $names := list }}
{{- range .Values.imagePullSecrets }}{{ $names = append $names .name }}{{ end }}
{{- $_ := set $c "spark.kubernetes.container.image.pullSecrets" (join "," $names) }}
{{- end }}
{{- $_ := set $c "spark.kubernetes.authenticate.executor.serviceAccountName" (include "hts.executorServiceAccountName" .) }}
{{- $_ := set $c "spark.kubernetes.executor.podTemplateFile" (include "hts.executorTemplatePath" .) }}
{{- $_ := set $c "spark.kubernetes.executor.podTemplateContainerName" "executor" }}
{{- $_ := set $c "spark.executor.instances" (printf "%d" (int64 $e.instances)) }}
{{- $_ := set $c "spark.executor.cores" (printf "%d" (int64 $e.cores)) }}
{{- $_ := set $c "spark.executor.memory" (toString $e.memory) }}
{{- with $e.memoryOverhead }}{{ $_ := set $c "spark.executor.memoryOverhead" (toString .) }}{{ end }}
{{- with $e.requestCores }}{{ $_ := set $c "spark.kubernetes.executor.request.cores" (toString .) }}{{ end }}
{{- with $e.limitCores }}{{ $_ := set $c "spark.kubernetes.executor.limit.cores" (toString .) }}{{ end }}
{{- end }}
{{- range $k, $v := $s.conf }}
{{- $_ := set $c $k (toString $v) }}
{{- end }}
{{- toYaml $c }}
{{- end }}

{{/*
The daemon's settings file (hts.yaml): .Values.config as it is, plus what the chart manages.
*/}}
{{- define "hts.configYaml" -}}
{{- $c := deepCopy .Values.config -}}
{{- $defaults := get $c "defaults" | default dict -}}
{{- $options := get $defaults "options" | default dict -}}
{{- $options = mergeOverwrite $options (include "hts.lockOptions" . | fromYaml) -}}
{{- $_ := set $defaults "options" $options -}}
{{- $_ := set $c "defaults" $defaults -}}
{{- $tokens := list
      (dict "name" "read" "scope" "read" "token_file" "tokens/read")
      (dict "name" "admin" "scope" "admin" "token_file" "tokens/admin") -}}
{{- $_ := set $c "api" (dict "host" .Values.api.host "port" (int .Values.api.port) "tokens" $tokens "metrics_require_token" .Values.api.metricsRequireToken) -}}
{{- $_ := set $c "spark" (dict "master" (include "hts.sparkMaster" .) "conf" (include "hts.sparkConf" . | fromYaml)) -}}
{{- $ha := dict "leader_election" .Values.ha.leaderElection "election_path" .Values.ha.electionPath -}}
{{- with .Values.ha.zookeeperUrl }}{{ $_ := set $ha "zookeeper_url" . }}{{ end -}}
{{- $_ := set $c "ha" $ha -}}
{{- $_ := set $c "state_dir" (include "hts.stateDir" .) -}}
{{- toYaml $c }}
{{- end }}

{{/* Environment variables the daemon and the executors get for AWS. */}}
{{- define "hts.awsEnv" -}}
{{- with .Values.aws.region }}
- name: AWS_REGION
  value: {{ . | quote }}
{{- end }}
{{- with .Values.aws.existingSecret }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.aws.secretKeys.accessKeyId }}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.aws.secretKeys.secretAccessKey }}
- name: AWS_SESSION_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.aws.secretKeys.sessionToken }}
      optional: true
{{- end }}
{{- end }}

{{/* The tables' PersistentVolumeClaim name (empty without one). */}}
{{- define "hts.tablesClaim" -}}
{{- with .Values.persistence.tables }}
{{- if .enabled }}{{ default (printf "%s-tables" (include "hts.fullname" $)) .existingClaim }}{{ end }}
{{- end }}
{{- end }}

{{/*
The executor pods' template (spark.kubernetes.executor.podTemplateFile): labels for the
NetworkPolicy, a restricted securityContext, writable /tmp and working directory, the tables.
*/}}
{{- define "hts.executorPodTemplate" -}}
{{- $e := .Values.spark.k8s.executor -}}
apiVersion: v1
kind: Pod
metadata:
  labels:
    {{- include "hts.executorSelectorLabels" . | nindent 4 }}
    app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
    app.kubernetes.io/part-of: hts
spec:
  automountServiceAccountToken: false
  enableServiceLinks: false
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  {{- with $e.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $e.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: executor
      workingDir: {{ include "hts.stateDir" . }}
      securityContext:
        {{- toYaml (merge (dict "readOnlyRootFilesystem" $e.readOnlyRootFilesystem) (omit .Values.securityContext "readOnlyRootFilesystem")) | nindent 8 }}
      {{- with (include "hts.awsEnv" .) }}
      env:
        {{- . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        - name: work
          mountPath: {{ include "hts.stateDir" . }}
        {{- if include "hts.tablesClaim" . }}
        - name: tables
          mountPath: {{ .Values.persistence.tables.mountPath }}
        {{- end }}
  volumes:
    - name: tmp
      emptyDir:
        sizeLimit: {{ .Values.tmp.sizeLimit }}
    - name: work
      emptyDir:
        sizeLimit: {{ .Values.state.sizeLimit }}
    {{- with (include "hts.tablesClaim" .) }}
    - name: tables
      persistentVolumeClaim:
        claimName: {{ . }}
    {{- end }}
{{- end }}

{{/*
Refuse values that cannot work; included by every template that depends on them.
*/}}
{{- define "hts.validate" -}}
{{- $replicas := int .Values.replicaCount -}}
{{- if and (gt $replicas 1) (eq .Values.lock.provider "in-process") -}}
{{- fail (printf "replicaCount=%d with lock.provider=in-process: Hudi's in-process lock only excludes work inside one daemon, so two replicas could run the same table service at once. Set lock.provider=zookeeper (with lock.zookeeper.url) or lock.provider=dynamodb (with lock.dynamodb.table), or replicaCount=1." $replicas) -}}
{{- end -}}
{{- if hasKey (get (.Values.config.defaults | default dict) "options" | default dict) "hoodie.write.lock.provider" -}}
{{- fail "config.defaults.options sets hoodie.write.lock.provider: choose the lock with lock.provider (in-process, zookeeper or dynamodb) and its lock.* values instead" -}}
{{- end -}}
{{- range $i, $t := (.Values.config.tables | default dict).static -}}
{{- $p := get ($t.options | default dict) "hoodie.write.lock.provider" -}}
{{- if and (gt $replicas 1) $p (contains "InProcessLockProvider" $p) -}}
{{- fail (printf "replicaCount=%d but config.tables.static[%d] (%s) sets hoodie.write.lock.provider=%s: the in-process lock needs replicaCount=1" $replicas $i $t.path $p) -}}
{{- end -}}
{{- end -}}
{{- if and (eq .Values.lock.provider "zookeeper") (not .Values.lock.zookeeper.url) -}}
{{- fail "lock.provider=zookeeper needs lock.zookeeper.url (a connect string like zk-0.zk:2181,zk-1.zk:2181)" -}}
{{- end -}}
{{- if and (eq .Values.lock.provider "zookeeper") (not .Values.lock.zookeeper.basePath) -}}
{{- fail "lock.provider=zookeeper needs lock.zookeeper.basePath (a znode path like /hudi/locks)" -}}
{{- end -}}
{{- if and (eq .Values.lock.provider "dynamodb") (not .Values.lock.dynamodb.table) -}}
{{- fail "lock.provider=dynamodb needs lock.dynamodb.table (the DynamoDB table that holds the locks)" -}}
{{- end -}}
{{- if and .Values.ha.leaderElection (not (include "hts.electionZookeeper" .)) -}}
{{- fail "ha.leaderElection=true needs ZooKeeper: set ha.zookeeperUrl, or lock.provider=zookeeper with lock.zookeeper.url" -}}
{{- end -}}
{{- if has .Values.api.host (list "127.0.0.1" "::1" "localhost") -}}
{{- fail (printf "api.host=%s is a loopback address: the kubelet's probes, the Service and Prometheus reach the pod IP; use 0.0.0.0 (the API is protected by the tokens of api.tokens)" .Values.api.host) -}}
{{- end -}}
{{- if and (not .Values.api.tokens.existingSecret) (ne (empty .Values.api.tokens.read) (empty .Values.api.tokens.admin)) -}}
{{- fail "api.tokens: give both read and admin, or neither (both are then generated)" -}}
{{- end -}}
{{- end }}
