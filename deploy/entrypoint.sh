#!/usr/bin/env bash
# The hts image's entrypoint (installed as /usr/local/bin/hts-entrypoint).
#
#   serve [flags]        the daemon: `hts serve [flags]` (the image's default command)
#   request|run|...      any other `hts` command
#   executor             a Spark-on-Kubernetes executor: the daemon's Spark driver starts executor
#                        pods from this same image with the argument `executor` and describes the
#                        executor in SPARK_* environment variables
#   anything else        run as given (a shell for debugging, say)
#
# It also works outside a container, given `hts` on PATH (and Java for `executor`).
set -euo pipefail

spark_home() {
  if [[ -n "${SPARK_HOME:-}" ]]; then
    printf '%s\n' "$SPARK_HOME"
  else
    python3 -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))'
  fi
}

# Spark passes executor JVM options as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in that order.
executor_java_opts() {
  local name
  for name in $(compgen -e | grep '^SPARK_JAVA_OPT_[0-9]*$' | sort -t_ -k4 -n); do
    printf '%s\n' "${!name}"
  done
}

run_executor() {
  local var
  for var in SPARK_DRIVER_URL SPARK_EXECUTOR_ID SPARK_EXECUTOR_CORES SPARK_APPLICATION_ID \
    SPARK_EXECUTOR_POD_IP SPARK_EXECUTOR_MEMORY; do
    if [[ -z "${!var:-}" ]]; then
      echo "hts-entrypoint: executor: $var is not set (the Spark driver sets it on executor pods)" >&2
      exit 2
    fi
  done
  local home java classpath
  home="$(spark_home)"
  java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
  classpath="${SPARK_CONF_DIR:-$home/conf}:$home/jars/*${SPARK_EXTRA_CLASSPATH:+:$SPARK_EXTRA_CLASSPATH}"
  local -a opts=()
  mapfile -t opts < <(executor_java_opts)
  # PYSPARK_PYTHON (the image's interpreter, where hts is installed) reaches the Python workers.
  export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$(command -v python3)}"
  exec "$java" "${opts[@]}" "-Xms$SPARK_EXECUTOR_MEMORY" "-Xmx$SPARK_EXECUTOR_MEMORY" -cp "$classpath" \
    org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
    --driver-url "$SPARK_DRIVER_URL" \
    --executor-id "$SPARK_EXECUTOR_ID" \
    --cores "$SPARK_EXECUTOR_CORES" \
    --app-id "$SPARK_APPLICATION_ID" \
    --hostname "$SPARK_EXECUTOR_POD_IP" \
    --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
    --podName "${SPARK_EXECUTOR_POD_NAME:-$(hostname)}"
}

command="${1:-serve}"
[[ $# -gt 0 ]] && shift
case "$command" in
  serve | request | schedule | execute | run | read | write | timeline | quickstart)
    exec hts "$command" "$@"
    ;;
  executor)
    run_executor
    ;;
  *)
    exec "$command" "$@"
    ;;
esac
