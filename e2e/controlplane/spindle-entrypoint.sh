#!/bin/bash
# The entrypoint of Spindle's image (e2e/controlplane/spindle_image.py): one image runs the
# broker (`spindle-broker ...`), the operator (`spindle-operator ...`), any command, and Spark's
# driver and executors when Spark on Kubernetes starts the image with `driver` or `executor`.
# The two Spark cases follow Spark's own image entrypoint
# (resource-managers/kubernetes/docker/src/main/dockerfiles/spark/entrypoint.sh, Spark 4): the
# driver is spark-submit in client mode bound to the Pod's IP; an executor is the JVM running
# KubernetesExecutorBackend with what the driver put in its environment.
set -euo pipefail

spark_java_opts() {
    # SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ...: the executor's JVM options, in order.
    local var
    for var in $(compgen -v SPARK_JAVA_OPT_ | sort -t_ -k4 -n); do
        printf '%s\0' "${!var}"
    done
}

case "${1:-}" in
    driver)
        shift
        exec "$SPARK_HOME/bin/spark-submit" \
            --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:?}" \
            --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS}" \
            --deploy-mode client "$@"
        ;;
    executor)
        shift
        mapfile -d '' java_opts < <(spark_java_opts)
        exec "$JAVA_HOME/bin/java" "${java_opts[@]}" \
            -Xms"${SPARK_EXECUTOR_MEMORY:?}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
            -cp "${SPARK_CLASSPATH:-$SPARK_HOME/jars/*}:$SPARK_HOME/jars/*" \
            org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
            --driver-url "${SPARK_DRIVER_URL:?}" \
            --executor-id "${SPARK_EXECUTOR_ID:?}" \
            --cores "${SPARK_EXECUTOR_CORES:?}" \
            --app-id "${SPARK_APPLICATION_ID:?}" \
            --hostname "${SPARK_EXECUTOR_POD_IP:?}" \
            --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
            --podName "${SPARK_EXECUTOR_POD_NAME:-}"
        ;;
    "")
        echo "spindle image: give a command (spindle-broker, spindle-operator, driver, executor, ...)" >&2
        exit 2
        ;;
    *)
        exec "$@"
        ;;
esac
