"""Creating the topics Onceflow keeps its own state in, and the ones it writes to.

Shared by the source offsets store (``eos.offsets``), the Kafka sink's marker store
(``eos.sink_markers``), the source task's output topic and the Spark sinks: each
creates its topic if missing, with its own settings, and leaves an existing one as it
is. One place decides the replication factor, so no caller falls back to the broker's
default.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from onceflow.eos.clients import admin_client, cluster_metadata, visible_partitions

# Connect's default for its internal topics; fewer when the cluster has fewer brokers
# (a development broker), never the broker default, which is often 1: one lost disk
# would lose every source's offsets (a full replay) or a sink's markers.
REPLICATION_FACTOR = 3


def ensure_topic(
    bootstrap: str,
    topic: str,
    *,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
    admin: AdminClient | None = None,
) -> int:
    """Creates ``topic`` unless it exists; an existing topic is left as it is. Returns
    its partition count once the metadata shows it, so what the caller does next (read
    it, describe it) never finds it unknown. ``admin``: a client the caller uses for
    its other steps too (each new one costs its connections: about 50 ms against a
    local broker)."""
    if admin is None:
        admin = admin_client(bootstrap, extra)
    brokers = len(cluster_metadata(admin).brokers)
    replicas = max(1, min(REPLICATION_FACTOR, brokers))
    spec = NewTopic(topic, partitions, replication_factor=replicas, config=dict(config or {}))
    try:
        admin.create_topics([spec])[topic].result(timeout=30)
    except KafkaException as error:
        if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    return visible_partitions(admin, topic)
