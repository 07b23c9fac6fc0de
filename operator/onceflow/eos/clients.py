"""librdkafka client settings and error classification shared by every adapter."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata

# Codes meaning "another producer with this transactional.id took over".
_FENCED_CODES = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
}


ClientConfig = dict[str, str | int | float | bool]


def client_config(bootstrap: str, extra: Mapping[str, str] | None = None) -> ClientConfig:
    """Base settings plus the pipeline's auth/TLS keys (never logged).

    librdkafka's informational lines (syslog level 6) are noise in task logs; warnings
    and errors (fencing, coordinator moves) still come through."""
    return {"bootstrap.servers": bootstrap, "log_level": 4, **(extra or {})}


def admin_client(bootstrap: str, extra: Mapping[str, str] | None = None) -> AdminClient:
    """An admin client with the pipeline's settings. Steps that follow one another (a
    task's start, a sink's topics) share one: each new client costs its connections,
    about 50 ms against a local broker."""
    return AdminClient(client_config(bootstrap, extra))


def mounted_secret(directory: str | None) -> dict[str, str]:
    """A mounted Secret's files, one key per file (the Pipeline's ``kafka.authSecretRef``
    holds one librdkafka setting per key); empty when nothing is mounted."""
    if not directory:
        return {}
    return {
        path.name: path.read_text().strip()
        for path in Path(directory).iterdir()
        if path.is_file() and not path.name.startswith(".")
    }


def is_fenced(error: KafkaError) -> bool:
    return error.code() in _FENCED_CODES


def describe_access_error(error: KafkaError, what: str) -> str | None:
    """A fix for authorization failures, which otherwise read as opaque codes."""
    code = error.code()
    if code == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return (
            f"{what}: not authorized; grant the principal WRITE and DESCRIBE on "
            "TransactionalId resources with the pipeline's prefix (PREFIXED pattern)"
        )
    if code == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
        return f"{what}: not authorized; grant IDEMPOTENT_WRITE on the cluster (Kafka < 3.0)"
    if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        return f"{what}: not authorized; grant WRITE/READ/DESCRIBE on the topic"
    return None


# Failures of the connection rather than answers from the cluster: a metadata request
# lost with its connection (a process paused past librdkafka's connection setup
# timeout, a broker restarting) fails at once instead of waiting for the next one.
_CONNECTION_CODES = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT}


def cluster_metadata(
    client: AdminClient | Producer | Consumer, topic: str | None = None, timeout_s: float = 30
) -> ClusterMetadata:
    """``list_topics`` retried over lost connections until ``timeout_s``, which
    librdkafka does not do: one dropped socket would otherwise fail a task's start."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = max(0.1, deadline - time.monotonic())
        try:
            return client.list_topics(topic, timeout=left)
        except KafkaException as error:
            if error.args[0].code() not in _CONNECTION_CODES or time.monotonic() >= deadline:
                raise
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))


# A topic created a moment ago (by this client or a sibling task) can show no
# partitions in a broker's metadata yet.
METADATA_WAIT_S = 30.0


def visible_partitions(client: AdminClient, topic: str, timeout_s: float = METADATA_WAIT_S) -> int:
    """``topic``'s partition count once the metadata shows it (0 if it never does
    within ``timeout_s``): a task that reads a topic right after it or a sibling
    created it would otherwise find it unknown and fail its start."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = len(cluster_metadata(client, topic).topics[topic].partitions)
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


# How long the warm-up before init_transactions waits for a learned broker to answer.
WARM_UP_S = 2.0


def initialise_transactions(producer: Producer, timeout_s: float, topic: str | None = None) -> None:
    """``init_transactions`` once a broker known by its id has answered. librdkafka
    looks for the transaction coordinator only through such a broker; while only the
    bootstrap connection is up it finds none and retries on a 500 ms timer: half a
    second on every other init, and a sink's producers are initialised again whenever
    a partition moves to another Python worker. Metadata is asked until a learned
    broker answers (the first answer often comes over the bootstrap connection, a
    millisecond before the real one is up). ``topic`` narrows the request to a topic
    the caller writes anyway (none: all topics). The round trips are only a warm-up,
    bounded by WARM_UP_S: if they fail or no learned broker answers in time,
    init_transactions goes ahead and reports the real problem."""
    deadline = time.monotonic() + min(timeout_s, WARM_UP_S)
    while (left := deadline - time.monotonic()) > 0:
        try:
            if producer.list_topics(topic, timeout=left).orig_broker_id >= 0:
                break
        except KafkaException:
            pass  # a dropped bootstrap connection is this very race: ask again
        time.sleep(0.005)
    producer.init_transactions(timeout_s)
