"""Names of what a Spark job's exactly-once Kafka sink owns."""

from __future__ import annotations


def sink_transactional_id(prefix: str, job: str, partition: int) -> str:
    """One stable id per output partition: a retried or zombie task attempt for the same
    partition is fenced by the next attempt's initialisation."""
    return f"{prefix}-{job}-sink-{partition}"


def sink_transactional_ids(prefix: str, job: str, partitions: int) -> list[str]:
    return [sink_transactional_id(prefix, job, p) for p in range(partitions)]


def sink_marker_topic(prefix: str, job: str) -> str:
    """Compacted topic, one partition per output partition: the last batch id each
    output partition committed, written in the same transaction as its records."""
    return f"{prefix}-{job}-sink-markers"
