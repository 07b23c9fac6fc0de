#!/usr/bin/env bash
# spark-jars.sh [kafka|s3a] — jars Spark needs beyond what pyspark ships, matching the
# installed pyspark, resolved through Maven and cached per version. Prints the directory.
#   kafka  Spark's Kafka connector (default; onceflow.spark.session puts it on spark.jars)
#   s3a    Hadoop's S3A filesystem for pyspark's Hadoop (the image puts it in $SPARK_HOME/jars)
source "$(dirname "$0")/lib.sh"
stdout_is_value
SET="${1:-kafka}"
PYTHON="${PYTHON:-$ONCEFLOW_ROOT/.venv/bin/python}"
SPARK_VERSION="${SPARK_VERSION:-$("$PYTHON" -c 'import pyspark; print(pyspark.__version__)')}"
case "$SET" in
  kafka)
    version="$SPARK_VERSION" property=spark.version
    marker="spark-sql-kafka-0-10_*-$SPARK_VERSION.jar" ;;
  s3a)
    # pyspark's own Hadoop, named by its hadoop-client-api jar: S3A must match it.
    version="$("$PYTHON" -c 'import pathlib, pyspark
jars = pathlib.Path(pyspark.__file__).parent / "jars"
print(next(jars.glob("hadoop-client-api-*.jar")).name[len("hadoop-client-api-"):-len(".jar")])')"
    property=hadoop.version marker="hadoop-aws-$version.jar" ;;
  *) echo "usage: $0 [kafka|s3a]" >&2; exit 2 ;;
esac
DIR="$ONCEFLOW_CACHE/spark-$SET/$version"
maven_libs "$ONCEFLOW_ROOT/scripts/maven/spark-$SET/pom.xml" "$DIR" "$marker" -D"$property=$version"
emit "$DIR/libs"
