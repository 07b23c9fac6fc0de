"""Names of what a Spark job's exactly-once Kafka sink owns."""

from __future__ import annotations

from onceflow.model.names import SINK_PARTITION, producer_id, producer_id_stem


def sink_transactional_id(prefix: str, job: str, partition: int) -> str:
    """One stable id per output partition: a retried or zombie task attempt for the same
    partition is fenced by the next attempt's initialisation."""
    return producer_id(prefix, SINK_PARTITION, job, partition)


def sink_transactional_id_stem(prefix: str, job: str) -> str:
    return producer_id_stem(prefix, SINK_PARTITION, job)


def sink_transactional_ids(prefix: str, job: str, partitions: int) -> list[str]:
    return [sink_transactional_id(prefix, job, p) for p in range(partitions)]


def sink_marker_topic(prefix: str, job: str) -> str:
    """Compacted topic, one partition per output partition: the last batch each output
    partition committed, written in the same transaction as its records. Marker keys
    are the partition's transactional id, so two jobs whose topic names meet cannot
    read each other's markers."""
    return f"{prefix}-{job}-sink-markers"
