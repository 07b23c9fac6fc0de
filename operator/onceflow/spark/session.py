"""A SparkSession with Spark's Kafka connector and Onceflow's JVM sink writer on the
classpath, found without Ivy.

The image has both among Spark's own jars. Elsewhere the connector's jars come from
``ONCEFLOW_SPARK_JARS`` (a directory) or from ``scripts/spark-jars.sh``'s cache for the
installed pyspark version, and the writer's from ``ONCEFLOW_WRITER_JARS`` (a directory)
or from ``scripts/jvm-writer.sh``'s cache for this checkout's writer sources."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pyspark
from pyspark import __version__ as pyspark_version
from pyspark.sql import SparkSession

from onceflow.spark.jvm_writer import WRITER_JAR_GLOB

CACHE = Path(os.environ.get("ONCEFLOW_CACHE", Path.home() / ".cache" / "onceflow"))
CHECKOUT = Path(__file__).resolve().parents[3]
"""The repository around an editable install (the writer's sources are there)."""
WRITER_SOURCES = CHECKOUT / "jvm" / "onceflow-spark-kafka"
MARKER_CONTRACT = CHECKOUT / "tests" / "fixtures" / "sink_marker_contract.json"


def spark_own_jars() -> Path:
    return Path(pyspark.__file__).parent / "jars"


def kafka_connector_jars() -> list[str]:
    """Jars the session must add: none when Spark ships the connector itself."""
    if any(spark_own_jars().glob("spark-sql-kafka-*.jar")):
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


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def writer_sources_digest(sources: Path, contract: Path) -> str:
    """The digest ``scripts/jvm-writer.sh`` names its build by: ``sha256sum``'s lines
    for the pom and every source file (relative paths, byte order), then the contract
    fixture's (read from stdin, so named ``-``), hashed together."""
    files = [sources / "pom.xml", *(p for p in (sources / "src").rglob("*") if p.is_file())]
    named = sorted((p.relative_to(sources).as_posix(), p) for p in files)
    listing = "".join(f"{_sha256(path.read_bytes())}  {name}\n" for name, path in named)
    listing += f"{_sha256(contract.read_bytes())}  -\n"
    return _sha256(listing.encode())[:12]


def writer_cache() -> Path | None:
    """Where ``scripts/jvm-writer.sh`` puts the jar it builds from this checkout's
    sources for the installed pyspark (it may not be built yet); None without the
    sources (an installed package), where only the image or ONCEFLOW_WRITER_JARS have
    it. A jar built from other sources is never taken for this one."""
    if not (WRITER_SOURCES / "pom.xml").is_file() or not MARKER_CONTRACT.is_file():
        return None
    digest = writer_sources_digest(WRITER_SOURCES, MARKER_CONTRACT)
    return CACHE / "jvm-writer" / f"{pyspark_version}-{digest}" / "libs"


def writer_jars() -> list[str]:
    """The JVM sink writer's jar, if the session must add it: none when Spark has it
    among its own jars (the image); else those in ``ONCEFLOW_WRITER_JARS`` (a directory
    that must hold one); else the one ``make jvm-writer`` built from this checkout.
    Nothing found is no error here: only a driver writing through the JVM writer needs
    it, and it refuses to start without it (``jvm_writer.require_jvm_writer``)."""
    if any(spark_own_jars().glob(WRITER_JAR_GLOB)):
        return []
    configured = os.environ.get("ONCEFLOW_WRITER_JARS")
    if configured:
        jars = sorted(str(p) for p in Path(configured).glob(WRITER_JAR_GLOB))
        if not jars:
            raise FileNotFoundError(
                f"ONCEFLOW_WRITER_JARS={configured} holds no {WRITER_JAR_GLOB}: run "
                "`make jvm-writer` (it prints the directory) or unset it"
            )
        return jars
    cache = writer_cache()
    return sorted(str(p) for p in cache.glob(WRITER_JAR_GLOB)) if cache is not None else []


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
        .config("spark.jars", ",".join(kafka_connector_jars() + writer_jars()))
        .config("spark.speculation", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )


def driver_session(app_name: str) -> SparkSession:
    """Under spark-submit (the Spark operator), the submitted master and conf rule;
    run directly (``onceflow run``, tests), a local session with the connector's and
    the writer's jars."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return SparkSession.builder.appName(app_name).getOrCreate()
    return local_session(app_name)
