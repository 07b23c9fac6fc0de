"""Small helpers over confluent-kafka for tests: unique topics, draining a topic."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.testbed import script_value


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1)])
    futures[name].result(timeout=30)
    return name


def new_topic(bootstrap: str, prefix: str, partitions: int = 1) -> str:
    """Creates a fresh topic so tests never see each other's records."""
    return create_topic(bootstrap, f"{prefix}-{uuid.uuid4().hex[:8]}", partitions)


def consumer(bootstrap: str, isolation: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def drain(bootstrap: str, topic: str, isolation: str, quiet_s: float = 2.0) -> list[bytes]:
    """Values readable at ``isolation`` once no record arrived for ``quiet_s`` seconds."""
    c = consumer(bootstrap, isolation)
    c.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    last = time.monotonic()
    try:
        while time.monotonic() - last < quiet_s:
            msg = c.poll(0.2)
            if msg is None or msg.error():
                continue
            values.append(msg.value())
            last = time.monotonic()
    finally:
        c.close()
    return values


def java_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's Java producer picks for ``key``: murmur2 (seed
    0x9747b28c), made positive, modulo the partition count."""
    m = 0x5BD1E995
    h = (0x9747B28C ^ len(key)) & 0xFFFFFFFF
    whole = len(key) // 4 * 4
    for i in range(0, whole, 4):
        k = (int.from_bytes(key[i : i + 4], "little") * m) & 0xFFFFFFFF
        k = ((k ^ (k >> 24)) * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = key[whole:]
    for shift in range(len(tail) - 1, 0, -1):
        h ^= tail[shift] << (8 * shift)
    if tail:
        h = ((h ^ tail[0]) * m) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * m) & 0xFFFFFFFF
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


def zombie_in_a_transaction(bootstrap: str, transactional_id: str, topic: str) -> Producer:
    """A producer left mid-transaction (a record sent, nothing committed): what a
    paused or partitioned writer looks like. Its ``commit_transaction`` raises once the
    id was fenced."""
    zombie = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, b"late")
    zombie.flush(30)
    return zombie


def authenticated_listener() -> tuple[str, dict[str, str]]:
    """The broker's SASL-over-TLS listener on the node network and librdkafka settings
    for it (scripts/kafka.sh). Root makes the network, so there a missing listener is a
    failure; elsewhere the test is skipped."""
    try:
        bootstrap = script_value("scripts/kafka.sh", "node-bootstrap")
        settings: dict[str, str] = json.loads(
            Path(script_value("scripts/kafka.sh", "node-client")).read_text()
        )
    except RuntimeError as error:
        if os.geteuid() == 0:
            raise
        pytest.skip(f"the broker has no authenticated listener without root ({error})")
    return bootstrap, settings
