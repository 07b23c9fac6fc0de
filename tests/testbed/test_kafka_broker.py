"""The broker is a real Kafka: transactions, fencing and read_committed behave as KIP-98 says."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition

from tests.support.kafka import consumer, drain, new_topic

pytestmark = pytest.mark.kafka


def _txn_producer(bootstrap: str, tid: str) -> Producer:
    p = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 30000}
    )
    p.init_transactions(30)
    return p


def test_read_committed_sees_only_committed_batches(kafka_bootstrap: str) -> None:
    topic = new_topic(kafka_bootstrap, "smoke-commit")
    p = _txn_producer(kafka_bootstrap, f"smoke-{uuid.uuid4().hex}")
    p.begin_transaction()
    p.produce(topic, b"committed")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"aborted")
    p.flush(30)
    p.abort_transaction(30)

    assert drain(kafka_bootstrap, topic, "read_committed") == [b"committed"]
    assert drain(kafka_bootstrap, topic, "read_uncommitted") == [b"committed", b"aborted"]


def test_second_init_with_same_transactional_id_fences_the_first(kafka_bootstrap: str) -> None:
    topic = new_topic(kafka_bootstrap, "smoke-fence")
    tid = f"smoke-{uuid.uuid4().hex}"
    zombie = _txn_producer(kafka_bootstrap, tid)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie")
    zombie.flush(30)

    successor = _txn_producer(kafka_bootstrap, tid)
    with pytest.raises(KafkaException) as failure:
        zombie.commit_transaction(30)
    assert failure.value.args[0].fatal() or "fenced" in str(failure.value).lower()

    successor.begin_transaction()
    successor.produce(topic, b"successor")
    successor.commit_transaction(30)
    assert drain(kafka_bootstrap, topic, "read_committed") == [b"successor"]


def test_open_transaction_holds_read_committed_at_last_stable_offset(
    kafka_bootstrap: str,
) -> None:
    topic = new_topic(kafka_bootstrap, "smoke-lso")
    p = _txn_producer(kafka_bootstrap, f"smoke-{uuid.uuid4().hex}")
    p.begin_transaction()
    p.produce(topic, b"pending")
    p.flush(30)

    c = consumer(kafka_bootstrap, "read_committed")
    c.assign([TopicPartition(topic, 0, 0)])
    try:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            assert msg is None or msg.error(), "read past an open transaction"
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
        assert high == 0, "high watermark seen by read_committed must stop at the LSO"

        p.commit_transaction(30)
        deadline = time.monotonic() + 15
        got = None
        while got is None and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                got = msg.value()
        assert got == b"pending", "commit did not release the record within 15 s"
    finally:
        c.close()
