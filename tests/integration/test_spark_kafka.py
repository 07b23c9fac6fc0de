"""PySpark runs with the real Kafka connector and honours kafka.isolation.level."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Producer

from onceflow.eos.clients import admin_client
from onceflow.eos.consume import read_to_end
from onceflow.spark.kafka_sink import (
    ExactlyOnceKafkaSink,
    prepare_topics,
    sink_target,
    with_output_partition,
)
from tests.support.kafka import new_topic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def _write_committed_and_aborted(bootstrap: str, topic: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"spark-{uuid.uuid4().hex}"})
    p.init_transactions(30)
    for value, commit in [(b"c1", True), (b"a1", False), (b"c2", True)]:
        p.begin_transaction()
        p.produce(topic, value)
        p.flush(30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)


def _stream_values(spark: SparkSession, bootstrap: str, topic: str, isolation: str) -> list[str]:
    frame = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", isolation)
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
    )
    sink = f"smoke_{uuid.uuid4().hex[:8]}"
    query = frame.writeStream.format("memory").queryName(sink).trigger(availableNow=True).start()
    query.awaitTermination(120)
    assert query.exception() is None
    return sorted(r.value for r in spark.sql(f"SELECT value FROM {sink}").collect())


def test_streaming_read_committed_skips_aborted_transactions(
    spark: SparkSession, kafka_bootstrap: str
) -> None:
    topic = new_topic(kafka_bootstrap, "smoke-spark")
    _write_committed_and_aborted(kafka_bootstrap, topic)

    assert _stream_values(spark, kafka_bootstrap, topic, "read_committed") == ["c1", "c2"]
    # The same query reading uncommitted data shows the aborted record leaking.
    assert _stream_values(spark, kafka_bootstrap, topic, "read_uncommitted") == ["a1", "c1", "c2"]


def _placement(bootstrap: str, topic: str) -> dict[str, set[int]]:
    placed: dict[str, set[int]] = {}
    for message in read_to_end(bootstrap, topic):
        placed.setdefault((message.key() or b"").decode(), set()).add(message.partition())
    return placed


def test_both_kafka_sinks_put_every_key_on_the_same_partition(
    spark: SparkSession, kafka_bootstrap: str
) -> None:
    """Before `enabled` a job writes through Spark's own sink, after it through the
    transactional one: a key must not move partitions at the switch."""
    rows = [(f"k{i % 50}", f"v{i}") for i in range(500)]
    frame = spark.createDataFrame(rows, "key string, value string")
    builtin = new_topic(kafka_bootstrap, "place-builtin", partitions=4)
    (
        with_output_partition(frame, 4)
        .write.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topic", builtin)
        .save()
    )
    exact = f"place-exact-{uuid.uuid4().hex[:6]}"
    sink = ExactlyOnceKafkaSink(sink_target(kafka_bootstrap, {}, exact, 4, "test", exact))
    sink.query.bind("placement-test")
    sink(frame, 0)

    by_builtin, by_exact = _placement(kafka_bootstrap, builtin), _placement(kafka_bootstrap, exact)
    assert len(by_exact) == 50
    assert all(len(partitions) == 1 for partitions in by_exact.values())
    assert by_exact == by_builtin
    assert len(set().union(*by_exact.values())) == 4, "50 keys spread over every partition"


def test_fresh_sink_topics_report_their_partitions(kafka_bootstrap: str) -> None:
    """A topic created a moment ago can show no partitions in the metadata; preparing a
    sink must wait for them (about one fresh topic in ten showed none here)."""
    for _ in range(10):
        name = f"fresh-{uuid.uuid4().hex[:6]}"
        target = sink_target(kafka_bootstrap, {}, name, 3, "test", name)
        target = prepare_topics(target, admin_client(target.bootstrap, target.extra))
        assert target.marker_partitions == 3
