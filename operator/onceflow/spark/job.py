"""``onceflow spark-job``: builds and runs a SparkJob's streaming query.

Input is Spark's Kafka source with ``kafka.isolation.level`` set from the pipeline's
mode (read_committed from ``preparing`` on); each micro-batch is an offset range kept
in the checkpoint's offset log, so a restarted driver recomputes the same batch from
the same ranges (seed 001) and the sink sees the same rows again (seed 002).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onceflow.api.driver import SparkJobSettings
from onceflow.api.pipeline import ExactlyOnceMode
from onceflow.api.spark import KafkaDelivery
from onceflow.eos.clients import mounted_secret
from onceflow.eos.topics import ensure_topic
from onceflow.logic.java_kafka import java_kafka_settings
from onceflow.logic.sink_identity import SinkIdentity
from onceflow.model.spark_app import ISOLATION_CONF
from onceflow.spark.checkpoint_identity import CheckpointIdentity
from onceflow.spark.file_sink_log import refuse_output_of_another_query
from onceflow.spark.input_position import starting_options
from onceflow.spark.input_view import input_view
from onceflow.spark.jvm_writer import require_jvm_writer
from onceflow.spark.kafka_sink import (
    ExactlyOnceKafkaSink,
    check_kafka_columns,
    sink_target,
    with_output_partition,
)
from onceflow.spark.postgres_sink import ExactlyOncePostgresSink, PostgresTarget
from onceflow.spark.progress import flush, report_progress
from onceflow.spark.reset_checkpoint import prepare_checkpoint
from onceflow.spark.transform_code import transform_function

INPUT_VIEW = "input"
# What a SIGKILLed process reports; the drill's exit looks like one to supervisors.
CHAOS_EXIT_CODE = 137

BatchSink = Callable[[Any, int], None]


def exit_after_first_commit(sink: BatchSink, marker: str) -> BatchSink:
    """Drill for the narrowest window of seed 002: the sink has committed batch N but
    the checkpoint does not say so, so the restarted driver replays N and the sink must
    recognise it. Once per marker file, so the replay itself runs through."""

    def write_then_die(frame: Any, batch_id: int) -> None:
        sink(frame, batch_id)
        path = Path(marker)
        if not path.exists():
            path.write_text(str(batch_id))
            os._exit(CHAOS_EXIT_CODE)

    return write_then_die


def batch_sink(sink: BatchSink, settings: SparkJobSettings) -> BatchSink:
    if settings.chaos_exit_after_sink_commit:
        return exit_after_first_commit(sink, settings.chaos_exit_after_sink_commit)
    return sink


def read_input(
    spark: Any, settings: SparkJobSettings, continue_from_checkpoint: str | None = None
) -> Any:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.bootstrap_servers)
        .option("subscribe", ",".join(settings.topics))
        .options(**starting_options(spark, settings, continue_from_checkpoint))
        .option(
            "kafka.isolation.level",
            spark.conf.get(ISOLATION_CONF, settings.isolation_level),
        )
        .option("failOnDataLoss", "true")
        .option("includeHeaders", "true")
    )
    for key, value in java_kafka_options(settings).items():
        reader = reader.option(key, value)
    if settings.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(settings.max_offsets_per_trigger))
    return input_view(reader.load(), settings)


def apply_transform(spark: Any, frame: Any, settings: SparkJobSettings) -> Any:
    transform = settings.transform
    if transform.sql is not None:
        frame.createOrReplaceTempView(INPUT_VIEW)
        return spark.sql(transform.sql)
    return transform_function(spark, transform, settings.transform_dir)(frame)


def stream_writer(frame: Any, settings: SparkJobSettings, single_trigger: bool = False) -> Any:
    """The query's name, checkpoint and trigger: the same whichever sink follows.
    ``single_trigger``: one batch, then stop (after a restart, the batch in flight)."""
    writer = (
        frame.writeStream.queryName(settings.job)
        .option("checkpointLocation", settings.checkpoint_location)
        .outputMode(settings.output_mode.value)
    )
    if single_trigger:
        return writer.trigger(once=True)
    if settings.trigger.available_now:
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=settings.trigger.spark_interval)


def checkpoint_identity(
    spark: Any, settings: SparkJobSettings, partitions: int = 0
) -> CheckpointIdentity:
    """The sink's identity as the checkpoint records it, against this driver's."""
    current = SinkIdentity(
        settings.namespace, settings.job, settings.transactional_id_prefix, partitions
    )
    return CheckpointIdentity(
        spark, settings.checkpoint_location, current, settings.previous_transactional_id_prefix
    )


def start_query(
    spark: Any,
    settings: SparkJobSettings,
    single_trigger: bool = False,
    continue_from_checkpoint: str | None = None,
) -> Any:
    """Starts the query; the caller waits on it. ``continue_from_checkpoint``: see
    ``spark.reset_checkpoint.QueryStart``."""
    frame = read_input(spark, settings, continue_from_checkpoint)
    output = apply_transform(spark, frame, settings)
    sink = settings.sink
    if sink.kafka is not None:
        check_kafka_columns(output.dtypes)
    writer = stream_writer(output, settings, single_trigger)
    # The transactional sink is the `enabled` step's switch (DESIGN 3.3): before it, the
    # job writes through Spark's own sink, as every producer of the pipeline does.
    exactly_once = settings.mode is ExactlyOnceMode.ENABLED
    if (
        sink.kafka is not None
        and sink.kafka.delivery is KafkaDelivery.EXACTLY_ONCE
        and exactly_once
    ):
        if settings.kafka_sink_writer == "jvm":
            require_jvm_writer(spark)
        checkpoint = checkpoint_identity(spark, settings, sink.kafka.partitions)
        target = sink_target(
            settings.bootstrap_servers,
            settings.kafka_config,
            sink.kafka.topic,
            sink.kafka.partitions,
            settings.transactional_id_prefix,
            settings.job,
            settings.chaos_fail_sink_once,
            sink.kafka.transaction_timeout_ms,
            namespace=settings.namespace,
            earlier=checkpoint.in_flight,
        )
        kafka_sink = ExactlyOnceKafkaSink(target, checkpoint, settings.kafka_sink_writer)
        query = writer.foreachBatch(batch_sink(kafka_sink, settings)).start()
        kafka_sink.query.bind(str(query.id))
        return query
    if sink.kafka is not None:
        # Spark's built-in sink: at-least-once (delivery: atLeastOnce, or a pipeline not yet
        # enabled). Same topic, partition count and partition column as the
        # transactional sink, so keys stay on their partitions across the switch.
        ensure_topic(
            settings.bootstrap_servers,
            sink.kafka.topic,
            partitions=sink.kafka.partitions,
            extra=settings.kafka_config,
        )
        placed = with_output_partition(output, sink.kafka.partitions)
        return (
            stream_writer(placed, settings, single_trigger)
            .format("kafka")
            .option("kafka.bootstrap.servers", settings.bootstrap_servers)
            .options(**java_kafka_options(settings))
            .option("topic", sink.kafka.topic)
            .start()
        )
    if sink.files is not None:
        refuse_output_of_another_query(spark, settings.checkpoint_location, sink.files.path)
        return writer.format(sink.files.format).option("path", sink.files.path).start()
    assert sink.postgres is not None
    if not settings.postgres_dsn_file:
        raise ValueError("spec.sink.postgres: the job has no DSN (postgresDsnFile is unset)")
    checkpoint = checkpoint_identity(spark, settings)
    earlier = checkpoint.in_flight
    database = PostgresTarget(
        dsn=Path(settings.postgres_dsn_file).read_text().strip(),
        table=sink.postgres.table,
        key=tuple(sink.postgres.key),
        job=f"{settings.namespace}/{settings.job}",
        slices=sink.postgres.parallelism,
        earlier_job=earlier.qualified_job if earlier else None,
    )
    postgres_sink = ExactlyOncePostgresSink(database, checkpoint)
    query = writer.foreachBatch(batch_sink(postgres_sink, settings)).start()
    postgres_sink.query.bind(str(query.id))
    return query


def java_kafka_options(settings: SparkJobSettings) -> dict[str, str]:
    """The pipeline's client settings as Spark's Kafka options (``kafka.`` + the Java
    client's names)."""
    java = java_kafka_settings(settings.kafka_config, lambda path: Path(path).read_text())
    return {f"kafka.{key}": value for key, value in java.items()}


def run_job(settings: SparkJobSettings) -> int:
    from onceflow.spark.session import driver_session

    # The mounted Secret's settings join the plain ones, for the Python producers (as
    # they are) and Spark's reader and built-in sink (translated).
    mounted = mounted_secret(settings.kafka_config_dir)
    settings = settings.model_copy(update={"kafka_config": {**settings.kafka_config, **mounted}})
    spark = driver_session(f"onceflow-{settings.job}")
    annotator = report_progress(spark, settings.job, settings.metrics_port)
    start = prepare_checkpoint(
        spark, settings, lambda old: start_query(spark, old, single_trigger=True).awaitTermination()
    )
    query = start_query(
        spark, start.settings, continue_from_checkpoint=start.continue_from_checkpoint
    )
    query.awaitTermination()
    flush(annotator)  # a drained availableNow run's last batch
    return 0
