"""Onceflow's exactly-once Kafka sink for Structured Streaming (``foreachBatch``).

Spark's own Kafka sink is at-least-once: a micro-batch replayed after a driver crash
is written again. Here every output partition is written by its own transactional
producer (``<prefix>-<job>-sink-<partition>``) together with a marker recording the
batch id, in one transaction. A task attempt first initialises (fencing any earlier
attempt of the same partition), then reads that partition's marker read_committed to
the end: a batch already committed there is skipped. Rows go to partitions by Kafka's
own murmur2 of the key, so a replay puts every row where the first attempt did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from onceflow.eos.clients import client_config
from onceflow.eos.consume import read_to_end
from onceflow.eos.offsets import ensure_topic
from onceflow.eos.writer import TransactionalWriter
from onceflow.logic.partitioning import partition_for
from onceflow.model.spark_names import sink_marker_topic, sink_transactional_id

MARKER_TOPIC_CONFIG = {"cleanup.policy": "compact"}


@dataclass(frozen=True)
class SinkTarget:
    """Everything an executor needs; small and picklable."""

    bootstrap: str
    extra: Mapping[str, str]
    topic: str
    partitions: int
    marker_topic: str
    prefix: str
    job: str
    fail_once_flag: str | None = None
    """Chaos drill: see SparkJobSettings.chaos_fail_sink_once."""


class SinkTopicError(ValueError):
    """The output topic exists with another partition count: partitioning would move."""


def prepare_topics(target: SinkTarget) -> None:
    """Creates the output and marker topics, or checks an existing output topic."""
    for topic, config in ((target.topic, {}), (target.marker_topic, MARKER_TOPIC_CONFIG)):
        ensure_topic(
            target.bootstrap,
            topic,
            partitions=target.partitions,
            config=config,
            extra=target.extra,
        )
        metadata = AdminClient(client_config(target.bootstrap, target.extra)).list_topics(
            topic, timeout=30
        )
        found = len(metadata.topics[topic].partitions)
        if found != target.partitions:
            raise SinkTopicError(
                f"spec.sink.kafka.partitions: topic {topic!r} has {found} partitions, not "
                f"{target.partitions}; use a new topic or set partitions: {found}"
            )


def committed_batch(target: SinkTarget, partition: int) -> int | None:
    """The last batch id committed to ``partition`` (None if none yet)."""
    last = None
    for message in read_to_end(
        target.bootstrap, target.marker_topic, extra=target.extra, partitions=[partition]
    ):
        last = int(message.value() or b"-1")
    return last


def write_partition(
    target: SinkTarget, batch_id: int, partition: int, rows: Iterable[tuple[bytes | None, bytes]]
) -> int:
    """Writes one output partition of one batch exactly once; returns rows written."""
    writer = TransactionalWriter(
        target.bootstrap,
        sink_transactional_id(target.prefix, target.job, partition),
        extra=target.extra,
    )
    try:
        writer.initialize()
        done = committed_batch(target, partition)
        if done is not None and done >= batch_id:
            return 0  # a replay of a batch this partition already committed
        writer.begin()
        written = 0
        for key, value in rows:
            writer.send(target.topic, key, value, partition=partition)
            written += 1
            if target.fail_once_flag and written == 10:
                _fail_once(target.fail_once_flag, partition, batch_id)
        marker = str(batch_id).encode()
        writer.send(target.marker_topic, str(partition).encode(), marker, partition=partition)
        writer.commit()
        return written
    finally:
        writer.close()


class InjectedSinkFailureError(RuntimeError):
    """Raised by a chaos drill, never in normal operation."""


def _fail_once(flag: str, partition: int, batch_id: int) -> None:
    try:
        with open(flag, "x") as marker:  # exclusive create: exactly one task fails
            marker.write(f"partition {partition} batch {batch_id}\n")
    except FileExistsError:
        return
    raise InjectedSinkFailureError(
        f"chaos drill: failing partition {partition} of batch {batch_id}"
    )


def keyed_partition(row: Any, partitions: int) -> tuple[int, tuple[bytes | None, bytes]]:
    key = _bytes(row["key"]) if "key" in row.asDict() else None
    value = _bytes(row["value"])
    return partition_for(key if key is not None else value, partitions), (key, value)


def _bytes(value: Any) -> bytes:
    if value is None or isinstance(value, bytes | bytearray):
        return bytes(value) if value is not None else b""
    return str(value).encode()


class ExactlyOnceKafkaSink:
    """The ``foreachBatch`` function: shuffles rows into their output partitions and
    writes each partition in one transaction with its batch marker."""

    def __init__(self, target: SinkTarget) -> None:
        self.target = target
        prepare_topics(target)

    def __call__(self, frame: Any, batch_id: int) -> None:
        from pyspark import TaskContext

        target = self.target
        pairs = frame.rdd.map(lambda row: keyed_partition(row, target.partitions))
        exact = pairs.partitionBy(target.partitions, lambda p: p)

        def write(items: Iterable[tuple[int, tuple[bytes | None, bytes]]]) -> None:
            context = TaskContext.get()
            assert context is not None
            write_partition(target, batch_id, context.partitionId(), (kv for _, kv in items))

        try:
            exact.foreachPartition(write)
        except KafkaException as error:  # surfaced on the driver: fail the batch, keep state
            raise RuntimeError(f"exactly-once Kafka sink failed in batch {batch_id}") from error


def sink_target(
    bootstrap: str,
    extra: Mapping[str, str],
    topic: str,
    partitions: int,
    prefix: str,
    job: str,
    fail_once_flag: str | None = None,
) -> SinkTarget:
    return SinkTarget(
        bootstrap,
        dict(extra),
        topic,
        partitions,
        sink_marker_topic(prefix, job),
        prefix,
        job,
        fail_once_flag,
    )
