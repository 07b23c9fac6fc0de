"""The end of a partition whose leader has stopped answering (found by the fault
campaign: 4 resets of a source's streams to their start in a 1,000-fault run). A
ListOffsets request to a leader that does not answer times out inside librdkafka,
which then hands back offset -1001 (OFFSET_INVALID) with no error. Taken as the end,
that made every read of the offsets topic empty: a task starting then found no
committed offsets and produced its streams again from the first record. The end
must be asked again (the controller soon moves the leadership) and never be a
negative number."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Producer

from onceflow.eos.consume import end_offsets
from onceflow.eos.offsets import read_offsets
from onceflow.eos.topics import ensure_topic
from tests.support.kafka_cluster import KafkaCluster

pytestmark = [pytest.mark.kafka_cluster, pytest.mark.alone]  # it pauses a shared broker

STREAMS, RECORDS = 4, 200


def _offsets_topic(bootstrap: str) -> str:
    """An offsets topic holding RECORDS offsets of STREAMS source partitions."""
    topic = f"ends-{uuid.uuid4().hex[:6]}"
    ensure_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for seq in range(RECORDS):
        key = ["owner", {"stream": f"s{seq % STREAMS}"}]
        producer.produce(topic, key=json.dumps(key).encode(), value=json.dumps({"seq": seq}))
    assert producer.flush(30) == 0
    return topic


def test_a_leader_that_stopped_answering_never_makes_a_partition_look_empty(
    kafka_cluster: KafkaCluster,
) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic = _offsets_topic(bootstrap)
    assert end_offsets(bootstrap, topic) == {0: RECORDS}
    leader = kafka_cluster.leader(topic, 0)
    kafka_cluster.pause(leader)  # asked now, it answers nothing: the request times out
    try:
        ends = end_offsets(bootstrap, topic, timeout_s=90)
        stored = read_offsets(bootstrap, topic, "owner", timeout_s=90)
    finally:
        kafka_cluster.resume(leader)
    assert ends == {0: RECORDS}, "the end of a partition whose leader moved"
    assert {json.loads(p)["stream"]: o["seq"] for p, o in stored.by_partition.items()} == {
        f"s{s}": RECORDS - STREAMS + s for s in range(STREAMS)
    }, "every stream's last committed offset, read while the leadership moved"
