#!/usr/bin/env bash
# jvm-writer.sh — Onceflow's JVM exactly-once writer for the Spark Kafka sink
# (jvm/onceflow-spark-kafka), built against the installed pyspark's Spark and cached per
# Spark version and digest of its sources and the marker contract fixture. Prints the
# directory holding the jar. The build runs the writer's tests, the marker contract among
# them, so a jar that disagrees with the Python writer's markers is never built. Spark, its
# Kafka connector and Jackson are the runtime's: the jar holds Onceflow's classes only.
#   jvm-writer.sh       builds the jar unless cached; prints its directory
#   jvm-writer.sh dir   prints that directory, building nothing
# onceflow.spark.session.writer_jars finds the jar by the same digest (its unit test
# compares the two), so sort in byte order whatever the locale.
source "$(dirname "$0")/lib.sh"
stdout_is_value
PYTHON="${PYTHON:-$ONCEFLOW_ROOT/.venv/bin/python}"
SPARK_VERSION="${SPARK_VERSION:-$("$PYTHON" -c 'import pyspark; print(pyspark.__version__)')}"
SOURCE="$ONCEFLOW_ROOT/jvm/onceflow-spark-kafka"
FIXTURE="$ONCEFLOW_ROOT/tests/fixtures/sink_marker_contract.json"
DIGEST="$( { (cd "$SOURCE" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum); sha256sum <"$FIXTURE"; } \
  | sha256sum | cut -c1-12)"
DIR="$ONCEFLOW_CACHE/jvm-writer/$SPARK_VERSION-$DIGEST"
if [[ "${1:-}" == dir ]]; then emit "$DIR/libs"; exit 0; fi
maven_libs "$SOURCE/pom.xml" "$DIR" "onceflow-spark-kafka-1.jar" \
  -Dspark.version="$SPARK_VERSION" -Dcontract.fixture="$FIXTURE"
emit "$DIR/libs"
