"""Both ends of every partition of some topics: the last stable offset a
``read_committed`` consumer stops at, and the high watermark (logic/hanging_transactions.py
says what a gap between them that does not close means)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from confluent_kafka import IsolationLevel
from confluent_kafka.admin import ConfigResource

from onceflow.eos.clients import admin_client, cluster_metadata
from onceflow.eos.consume import end_offsets
from onceflow.logic.hanging_transactions import PartitionEnds

BROKER_DEFAULT_MAX_TIMEOUT_S = 900.0
"""Kafka's default ``transaction.max.timeout.ms``."""


def transaction_max_timeout_s(
    bootstrap: str, extra: Mapping[str, str] | None = None, timeout_s: float = 30
) -> float:
    """The longest ``transaction.timeout.ms`` a broker of the cluster grants any
    producer (``transaction.max.timeout.ms``): no transaction of a live producer stays
    open longer. Kafka's default when the broker does not say."""
    admin = admin_client(bootstrap, extra)
    brokers = sorted(cluster_metadata(admin, None, timeout_s).brokers)
    if not brokers:
        return BROKER_DEFAULT_MAX_TIMEOUT_S
    resource = ConfigResource(ConfigResource.Type.BROKER, str(brokers[0]))
    described = admin.describe_configs([resource], request_timeout=timeout_s)
    entry = described[resource].result(timeout_s).get("transaction.max.timeout.ms")
    if entry is None or entry.value is None:
        return BROKER_DEFAULT_MAX_TIMEOUT_S
    return int(entry.value) / 1000


def partition_ends(
    bootstrap: str,
    topics: Iterable[str],
    extra: Mapping[str, str] | None = None,
    timeout_s: float = 30,
) -> list[PartitionEnds]:
    """Each partition's LSO, then its high watermark: asked in that order, the high
    watermark is never below the LSO. A topic that does not exist (yet) is left out,
    found missing in the cluster's topic list: asking for it by name could have a
    broker with ``auto.create.topics.enable`` create it, with the broker's partition
    count, before the workload that owns it does."""
    admin = admin_client(bootstrap, extra)
    existing = set(cluster_metadata(admin, None, timeout_s).topics)
    found: list[PartitionEnds] = []
    for topic in sorted(set(topics) & existing):
        try:
            stable = end_offsets(
                bootstrap,
                topic,
                timeout_s=timeout_s,
                admin=admin,
                isolation=IsolationLevel.READ_COMMITTED,
            )
            high = end_offsets(bootstrap, topic, timeout_s=timeout_s, admin=admin)
        except LookupError:
            continue
        found += [
            PartitionEnds(topic, partition, stable[partition], high[partition])
            for partition in sorted(stable)
            if partition in high
        ]
    return found
