#!/bin/bash
# The image's entry point. Spark on Kubernetes starts its pods with `driver …` or
# `executor` and the settings in environment variables (the contract of Spark's own
# images); anything else is an `onceflow` command (operator, task, spark-job, run).
set -euo pipefail

case "${1:-}" in
  driver)
    shift
    # The driver pod runs the application in client mode, bound to the pod's address
    # (which executors are told too); spark-submit in cluster mode would resubmit it.
    exec "$SPARK_HOME/bin/spark-submit" \
      --deploy-mode client \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:?set by Spark}" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS" \
      "$@"
    ;;
  executor)
    shift
    # Spark passes the executor's JVM options one per SPARK_JAVA_OPT_<n> variable, in
    # the order of <n>.
    java_opts=()
    while IFS= read -r name; do
      java_opts+=("${!name}")
    done < <(compgen -e | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n || true)
    exec java "${java_opts[@]}" \
      -Xms"${SPARK_EXECUTOR_MEMORY:?set by Spark}" -Xmx"$SPARK_EXECUTOR_MEMORY" \
      -cp "$SPARK_HOME/jars/*${SPARK_CLASSPATH:+:$SPARK_CLASSPATH}" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL:?set by Spark}" \
      --executor-id "${SPARK_EXECUTOR_ID:?set by Spark}" \
      --cores "${SPARK_EXECUTOR_CORES:?set by Spark}" \
      --app-id "${SPARK_APPLICATION_ID:?set by Spark}" \
      --hostname "${SPARK_EXECUTOR_POD_IP:?set by Spark}" \
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
      --podName "${SPARK_EXECUTOR_POD_NAME:?set by Spark}"
    ;;
  *)
    exec onceflow "$@"
    ;;
esac
