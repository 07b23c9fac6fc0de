"""A SparkSession with Spark's Kafka connector on the classpath, found without Ivy.

The image has the connector among Spark's own jars. Elsewhere the jars come from
``ONCEFLOW_SPARK_JARS`` (a directory) or from ``scripts/spark-jars.sh``'s cache for the
installed pyspark version."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyspark
from pyspark import __version__ as pyspark_version
from pyspark.sql import SparkSession

CACHE = Path(os.environ.get("ONCEFLOW_CACHE", Path.home() / ".cache" / "onceflow"))


def kafka_connector_jars() -> list[str]:
    """Jars the session must add: none when Spark ships the connector itself."""
    if any((Path(pyspark.__file__).parent / "jars").glob("spark-sql-kafka-*.jar")):
        return []
    configured = os.environ.get("ONCEFLOW_SPARK_JARS")
    directory = Path(configured) if configured else CACHE / "spark-kafka" / pyspark_version / "libs"
    jars = sorted(str(p) for p in directory.glob("*.jar"))
    if not any("spark-sql-kafka" in j for j in jars):
        raise FileNotFoundError(
            f"no spark-sql-kafka jar in {directory}: run `make spark-jars` "
            "or set ONCEFLOW_SPARK_JARS"
        )
    return jars


def local_session(app_name: str, master: str = "local[2,4]") -> SparkSession:
    """Local mode for `onceflow run` and tests: 2 cores, up to 4 attempts per task (as
    spark.task.maxFailures on a cluster); speculation stays off (a speculative copy of
    a sink task would be one more writer to fence)."""
    # Python workers must run this interpreter, which has onceflow installed; PySpark
    # reads the variable (not spark.pyspark.python) when it starts them.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.jars", ",".join(kafka_connector_jars()))
        .config("spark.speculation", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )


def driver_session(app_name: str) -> SparkSession:
    """Under spark-submit (the Spark operator), the submitted master and conf rule;
    run directly (``onceflow run``, tests), a local session with the connector jars."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return SparkSession.builder.appName(app_name).getOrCreate()
    return local_session(app_name)
