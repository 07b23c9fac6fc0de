"""librdkafka client settings and error classification shared by every adapter."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException, Producer

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


def initialise_transactions(producer: Producer, timeout_s: float, topic: str | None = None) -> None:
    """``init_transactions`` after a metadata round trip. Without it librdkafka sends
    FindCoordinator on the bootstrap connection it is about to replace by the broker's
    real identity, loses the answer, and retries on a 500 ms timer: half a second on
    many inits, and sinks and fencing init once per id per batch. ``topic`` narrows the
    metadata request to a topic the caller writes anyway (none: all topics). The round
    trip is only a warm-up: if it fails, init_transactions reports the real problem."""
    with contextlib.suppress(KafkaException):
        producer.list_topics(topic, timeout=timeout_s)
    producer.init_transactions(timeout_s)
