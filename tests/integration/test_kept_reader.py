"""A consumer kept between reads (a Spark worker's marker reader) against the real
broker: each read yields exactly its own span, whatever the previous read left."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from onceflow.eos.consume import read_to_end, span_reader
from tests.support.kafka import new_topic

pytestmark = pytest.mark.kafka

RECORDS = 10
ROUNDS = 30


def test_a_kept_consumer_reads_an_earlier_span_right_after_a_later_one(
    kafka_bootstrap: str,
) -> None:
    """A marker search reads a window at the end, then the one before it at once: the
    kept consumer's position of the first window lingers a moment after it let go of
    the partition, and must not end the second read before it read anything."""
    topic = new_topic(kafka_bootstrap, "kept")
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for n in range(RECORDS):
        producer.produce(topic, str(n).encode(), partition=0)
    assert producer.flush(30) == 0
    reader = span_reader(kafka_bootstrap, {}, "read_committed", topic)
    try:
        for _ in range(ROUNDS):
            later = [
                m.value()
                for m in read_to_end(kafka_bootstrap, topic, span={0: (5, 10)}, consumer=reader)
            ]
            earlier = [
                m.value()
                for m in read_to_end(kafka_bootstrap, topic, span={0: (0, 5)}, consumer=reader)
            ]
            assert later == [str(n).encode() for n in range(5, 10)]
            assert earlier == [str(n).encode() for n in range(5)]
        assert reader.assignment() == [], "a kept consumer holds nothing between reads"
    finally:
        reader.close()
