"""A partition's last sink marker, read back from the end of its marker partition, is
the one a read from offset 0 finds: past the markers of partitions sharing it, past
aborted transactions, and when none was ever committed."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from confluent_kafka import Producer

from onceflow.logic.sink_markers import SinkMarker
from onceflow.model.spark_names import sink_transactional_id
from onceflow.spark.kafka_sink import (
    MARKER_WINDOW,
    committed_marker,
    prepare_topics,
    sink_target,
    write_partition,
)
from tests.support.kafka import create_topic

pytestmark = pytest.mark.kafka

NEIGHBOUR_BATCHES = 300


def test_the_last_marker_is_found_behind_many_others_and_aborted_ones(
    kafka_bootstrap: str,
) -> None:
    job = f"markers-{uuid.uuid4().hex[:6]}"
    target = sink_target(kafka_bootstrap, {}, f"{job}-out", 4, "of", job)
    create_topic(kafka_bootstrap, target.marker_topic, 2)  # partitions p and p + 2 share one
    target = prepare_topics(target)
    assert target.marker_partitions == 2
    target = dataclasses.replace(target, query="q1")

    assert write_partition(target, 1, 0, []) == 0  # partition 0's one committed marker
    # Partition 2 shares marker partition 0 and commits many batches after it: each a
    # marker and a commit record, so partition 0's marker ends far behind the window.
    neighbour = Producer(
        {"bootstrap.servers": kafka_bootstrap, "transactional.id": f"{job}-neighbour"}
    )
    neighbour.init_transactions(30)
    key_of = {p: sink_transactional_id(target.prefix, job, p).encode() for p in (0, 2)}
    for batch in range(1, NEIGHBOUR_BATCHES + 1):
        neighbour.begin_transaction()
        marker = SinkMarker(batch=batch, query="q1", layout=target.layout)
        neighbour.produce(target.marker_topic, marker.encode(), key_of[2], partition=0)
        neighbour.commit_transaction(30)
    # A marker of partition 0 in an aborted transaction is not a committed one.
    neighbour.begin_transaction()
    aborted = SinkMarker(batch=99, query="q1", layout=target.layout)
    neighbour.produce(target.marker_topic, aborted.encode(), key_of[0], partition=0)
    neighbour.flush(30)
    neighbour.abort_transaction(30)
    assert 2 * NEIGHBOUR_BATCHES > 4 * MARKER_WINDOW, "the search must widen twice"

    found = committed_marker(target, 0)
    assert found is not None and (found.batch, found.query) == (1, "q1")
    last = committed_marker(target, 2)
    assert last is not None and last.batch == NEIGHBOUR_BATCHES
    assert committed_marker(target, 1) is None  # marker partition 1 is empty
    assert write_partition(target, 4, 3, []) == 0
    assert committed_marker(target, 1) is None  # partition 3's marker is not 1's
    three = committed_marker(target, 3)
    assert three is not None and three.batch == 4
