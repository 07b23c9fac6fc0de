"""The JVM writer of the exactly-once Kafka sink: the executor half of ``kafka_sink``
as a Spark data source (``jvm/onceflow-spark-kafka``, ``format("onceflow-kafka")``).

The driver half stays in Python (``kafka_sink.ExactlyOnceKafkaSink``: topics, fencing
of an earlier identity, where a batch started, the checkpoint's claim, the query id);
only the write of the shuffled batch goes to the JVM, so no row crosses into Python.
The writer uses the Python writer's transactional ids, markers and replay rules, and
a job may switch writers at any driver restart.

``jvm_options`` is the one Python definition of the write options: the Java side
(``SinkTarget.parse``) refuses an option it does not know and a ``kafka.*`` setting it
owns, and both sides are tested against the same vectors
(tests/fixtures/sink_marker_contract.json, ``options``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onceflow.logic.java_kafka import java_kafka_settings
from onceflow.model.spark_names import sink_transactional_id_stem

if TYPE_CHECKING:
    from onceflow.spark.kafka_sink import SinkTarget

PROVIDER = "onceflow-kafka"
"""The writer's short name (``ExactlyOnceKafkaProvider.shortName``)."""
PROVIDER_CLASS = "io.onceflow.spark.kafka.ExactlyOnceKafkaProvider"
WRITER_JAR_GLOB = "onceflow-spark-kafka-*.jar"
"""The jar holding it, as ``scripts/jvm-writer.sh`` and the image name it."""
CONTRACT = 1
"""The options contract (``SinkTarget.CONTRACT``): driver and jar refuse each other
unless they speak the same."""
HOW_TO_GET_IT = (
    "the image has it among Spark's jars; elsewhere build it with `make jvm-writer` (or "
    "set ONCEFLOW_WRITER_JARS to the directory holding it), or set kafkaSinkWriter: python "
    "(spec.kafkaSinkWriter of the SparkJob) to write through the Python writer"
)


class JvmWriterMissingError(RuntimeError):
    """The driver's JVM cannot load the JVM writer."""


def _read_text(path: str) -> str:
    return Path(path).read_text()


def jvm_options(
    target: SinkTarget, batch_id: int, read_file: Callable[[str], str] = _read_text
) -> dict[str, str]:
    """The write options of one batch: the resolved target's names and counts (the
    writer only appends the partition to the id stem) and the pipeline's client
    settings in the Java client's words, as Spark's reader and built-in sink get them.
    ``read_file``: a PEM file's text (see ``logic.java_kafka``)."""
    client = java_kafka_settings(target.extra, read_file)
    options = {
        "contract": str(CONTRACT),
        "kafka.bootstrap.servers": target.bootstrap,
        **{f"kafka.{name}": value for name, value in client.items()},
        "topic": target.topic,
        "partitions": str(target.partitions),
        "markerTopic": target.marker_topic,
        "markerPartitions": str(target.marker_partitions),
        "transactionalIdStem": sink_transactional_id_stem(target.prefix, target.job),
        "query": target.query,
        "batch": str(batch_id),
        "transactionTimeoutMs": str(target.transaction_timeout_ms),
    }
    if target.fail_once_flag:
        options["failOnceFlag"] = target.fail_once_flag
    return options


def write_in_jvm(grouped: Any, target: SinkTarget, batch_id: int) -> None:
    """Writes a batch shuffled to its output partitions
    (``kafka_sink.shuffled_to_output_partitions``) through the JVM writer: one
    transaction per output partition, its marker first, a batch this query already
    committed there skipped. Raises the JVM's error as Py4J brings it
    (``jvm_write_errors``)."""
    grouped.write.format(PROVIDER).mode("append").options(**jvm_options(target, batch_id)).save()


def jvm_write_errors() -> tuple[type[BaseException], ...]:
    """What a failed write raises on the driver: a Java exception Py4J returns, or the
    PySpark exception it was converted to."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import CapturedException

    return (Py4JJavaError, CapturedException)


def require_jvm_writer(spark: Any) -> None:
    """Refuses to start a driver whose JVM cannot load the writer, before anything is
    written, rather than failing its first batch. Looked up through the context class
    loader, where Spark puts the jars of ``spark.jars`` and looks data sources up."""
    jvm = spark.sparkContext._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    try:
        jvm.java.lang.Class.forName(PROVIDER_CLASS, False, loader)
    except jvm_write_errors() as error:
        raise JvmWriterMissingError(
            f"the exactly-once Kafka sink's JVM writer ({PROVIDER_CLASS}, jar "
            f"{WRITER_JAR_GLOB}) is not on the driver's classpath: {HOW_TO_GET_IT}"
        ) from error
