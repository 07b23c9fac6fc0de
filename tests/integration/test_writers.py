"""The writers against the real broker: where keyed records land, and what a failed
transaction or a bad client setting looks like to the caller."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from onceflow.eos.consume import end_offsets
from onceflow.eos.fencing import fence_transactional_ids
from onceflow.eos.writer import IdempotentWriter, TransactionAbortedError, TransactionalWriter
from onceflow.model.names import task_transactional_id
from onceflow.model.spark_names import sink_transactional_id
from tests.support.kafka import consumer, drain, java_partition, new_topic

pytestmark = pytest.mark.kafka

KEYS = [f"customer-{i}".encode() for i in range(40)]


def _partitions_of_keys(bootstrap: str, topic: str, partitions: int) -> dict[bytes, int]:
    reader: Consumer = consumer(bootstrap, "read_committed")
    reader.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    found: dict[bytes, int] = {}
    try:
        while len(found) < len(KEYS):
            message = reader.poll(10)
            assert message is not None, f"only {len(found)} of {len(KEYS)} keys arrived"
            key, partition = message.key(), message.partition()
            if message.error() is None and key is not None and partition is not None:
                found[key] = partition
    finally:
        reader.close()
    return found


@pytest.mark.parametrize("transactional", [True, False])
def test_keys_land_where_javas_producer_puts_them(
    kafka_bootstrap: str, transactional: bool
) -> None:
    topic = new_topic(kafka_bootstrap, "partitioner", partitions=6)
    if transactional:
        writer = TransactionalWriter(kafka_bootstrap, f"partitioner-{uuid.uuid4().hex[:6]}")
        writer.initialize(topic=topic)
        writer.begin()
        for key in KEYS:
            writer.send(topic, key, b"v")
        writer.commit()
    else:
        idempotent = IdempotentWriter(kafka_bootstrap)
        for key in KEYS:
            idempotent.send(topic, key, b"v")
        idempotent.flush_offsets(topic, "owner", {})
    found = _partitions_of_keys(kafka_bootstrap, topic, 6)
    assert found == {key: java_partition(key, 6) for key in KEYS}


def test_a_record_the_broker_refuses_aborts_the_transaction_and_names_it(
    kafka_bootstrap: str,
) -> None:
    """The refused record puts the transaction in an abortable state: the next
    produce gets a named error (the task logs it and exits for a clean restart, no
    traceback), and the transaction is aborted, not left to the timeout."""
    topic = f"small-records-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    created = admin.create_topics([NewTopic(topic, 1, 1, config={"max.message.bytes": "2000"})])
    created[topic].result(30)
    writer = TransactionalWriter(kafka_bootstrap, f"abortable-{uuid.uuid4().hex[:6]}")
    writer.initialize(topic=topic)
    writer.begin()
    writer.send(topic, b"k", b"x" * 5000)
    writer.producer.flush(10)
    with pytest.raises(TransactionAbortedError, match="transaction aborted after produce"):
        writer.send(topic, b"k", b"small")
    writer.close()
    assert drain(kafka_bootstrap, topic, "read_uncommitted", quiet_s=1.0) == [], (
        "nothing of the transaction was written"
    )
    assert end_offsets(kafka_bootstrap, topic) == {0: 1}, "only the abort marker"


def test_fencing_with_a_bad_client_setting_reports_instead_of_raising(
    kafka_bootstrap: str,
) -> None:
    report = fence_transactional_ids(
        kafka_bootstrap,
        ["bad-config-0", "bad-config-1"],
        extra={"security.protocol": "sasl_plaintext", "sasl.mechanism": "NOPE"},
        timeout_s=3,
    )
    assert not report.ok
    assert len(report.failures) == 2
    assert "authSecretRef" in report.summary()


def test_a_source_task_and_a_sink_partition_of_lookalike_names_never_fence_each_other(
    kafka_bootstrap: str,
) -> None:
    """Source `x-sink` task 0 and job `x`'s sink partition 0 in one pipeline once got
    the same transactional id: each start fenced the other. Both commit now."""
    prefix = f"lookalike-{uuid.uuid4().hex[:6]}"
    topic = new_topic(kafka_bootstrap, "lookalike")
    writers = [
        TransactionalWriter(kafka_bootstrap, task_transactional_id(prefix, "x-sink", 0)),
        TransactionalWriter(kafka_bootstrap, sink_transactional_id(prefix, "x", 0)),
    ]
    for writer in writers:
        writer.initialize(topic=topic)
        writer.begin()
        writer.send(topic, b"k", writer.transactional_id.encode())
    for writer in writers:
        writer.commit()
        writer.close()
    assert sorted(drain(kafka_bootstrap, topic, "read_committed", 1.0)) == sorted(
        w.transactional_id.encode() for w in writers
    )
