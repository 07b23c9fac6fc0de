#!/usr/bin/env bash
# spark-jars.sh — Spark's Kafka connector jars matching the installed pyspark, cached
# per version. Prints the directory; onceflow.spark.session puts its jars on spark.jars.
source "$(dirname "$0")/lib.sh"
stdout_is_value
PYTHON="${PYTHON:-$ONCEFLOW_ROOT/.venv/bin/python}"
SPARK_VERSION="${SPARK_VERSION:-$("$PYTHON" -c 'import pyspark; print(pyspark.__version__)')}"
LIBS="$ONCEFLOW_CACHE/spark-kafka/$SPARK_VERSION/libs"
if ! compgen -G "$LIBS/spark-sql-kafka-0-10_*-$SPARK_VERSION.jar" >/dev/null; then
  log "resolving spark-sql-kafka-0-10 $SPARK_VERSION from Maven Central"
  maven -f "$ONCEFLOW_ROOT/scripts/maven/spark-kafka/pom.xml" package \
    -Dspark.version="$SPARK_VERSION" -Dbuild.dir="$ONCEFLOW_CACHE/spark-kafka/$SPARK_VERSION/build" \
    -Dlibs.dir="$LIBS.partial"
  rm -rf "$LIBS" && mv "$LIBS.partial" "$LIBS"
fi
emit "$LIBS"
