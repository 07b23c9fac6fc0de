"""The two writers of the exactly-once Kafka sink read each other's markers: a batch
(or a partition of one) that one committed is skipped by the other, whichever wrote
first, and the markers the JVM writer commits are the ones the Python reader finds.
That is what lets a job switch writers at a driver restart with a batch in flight
(tests/e2e/test_spark_sink_upgrade.py runs it through real drivers)."""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from onceflow.api.spark import KafkaSinkWriter
from onceflow.eos.consume import read_to_end
from onceflow.eos.sink_markers import committed_marker
from onceflow.logic.sink_markers import SinkMarker
from onceflow.spark.kafka_sink import (
    PARTITION_COLUMN,
    ExactlyOnceKafkaSink,
    shuffled_to_output_partitions,
    sink_target,
    write_shuffled,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

PARTITIONS = 3
KEYS = 30
ROWS = 300
QUERY = "cross-read-query"
BOTH_WAYS = [
    pytest.param("python", "jvm", id="python-then-jvm"),
    pytest.param("jvm", "python", id="jvm-then-python"),
]


def _batch(spark: SparkSession, batch: int) -> Any:
    """A batch's rows: ROWS values over KEYS keys, every value naming its batch."""
    rows = [(f"k{n % KEYS}", f"{batch}-{n}") for n in range(ROWS)]
    return spark.createDataFrame(rows, "key string, value string")


def _sink(bootstrap: str, topic: str, writer: KafkaSinkWriter) -> ExactlyOnceKafkaSink:
    """A driver's sink of the job writing ``topic``, bound to the one query both drivers
    of a checkpoint run."""
    sink = ExactlyOnceKafkaSink(
        sink_target(bootstrap, {}, topic, PARTITIONS, "cross", topic), writer=writer
    )
    sink.query.bind(QUERY)
    return sink


def _written(bootstrap: str, topic: str) -> tuple[Counter[str], set[int]]:
    """The values the output holds (read_committed) and the partitions holding them."""
    values: Counter[str] = Counter()
    partitions = set()
    for message in read_to_end(bootstrap, topic):
        values[message.value().decode()] += 1
        partitions.add(message.partition())
    return values, partitions


@pytest.mark.parametrize(("first", "second"), BOTH_WAYS)
def test_what_one_writer_committed_the_other_skips(
    spark: SparkSession, kafka_bootstrap: str, first: KafkaSinkWriter, second: KafkaSinkWriter
) -> None:
    topic = f"cross-{first}-{uuid.uuid4().hex[:6]}"
    one, other = _sink(kafka_bootstrap, topic, first), _sink(kafka_bootstrap, topic, second)

    one(_batch(spark, 0), 0)
    other(_batch(spark, 0), 0)  # the batch replayed by the other writer: nothing again
    other(_batch(spark, 1), 1)
    one(_batch(spark, 1), 1)  # and back
    # Batch 2 left in flight by the first writer: one partition's task committed, the
    # driver died. The other writer finishes it and does not write that partition again.
    target = dataclasses.replace(one.target, query=QUERY)
    shuffled = shuffled_to_output_partitions(_batch(spark, 2), PARTITIONS)
    write_shuffled(shuffled.where(f"{PARTITION_COLUMN} = 0"), target, 2, first)
    partial, _ = _written(kafka_bootstrap, topic)
    assert 0 < sum(n for value, n in partial.items() if value.startswith("2-")) < ROWS
    other(_batch(spark, 2), 2)

    values, partitions = _written(kafka_bootstrap, topic)
    expected = Counter(f"{batch}-{n}" for batch in range(3) for n in range(ROWS))
    assert values == expected, (
        f"{sum((values - expected).values())} rows twice, "
        f"{sum((expected - values).values())} missing"
    )
    assert partitions == set(range(PARTITIONS)), "every partition was written"
    last = SinkMarker(batch=2, query=QUERY, layout=target.layout)
    assert [committed_marker(target, p) for p in range(PARTITIONS)] == [last] * PARTITIONS
