"""What a sink task knows before writing a partition: its last marker, read back from
the end of the marker partition (past the markers of partitions sharing it and past
aborted transactions), or kept with the producer that committed it."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from confluent_kafka import Producer

from onceflow.eos.clients import admin_client
from onceflow.eos.sink_markers import MARKER_CLIENTS, MARKER_WINDOW, committed_marker
from onceflow.eos.writer import Record, TxnState
from onceflow.logic.sink_markers import SinkMarker
from onceflow.model.spark_names import sink_transactional_id
from onceflow.spark.held_producers import HELD_PRODUCERS
from onceflow.spark.kafka_sink import (
    SinkTarget,
    prepare_topics,
    sink_target,
    write_partition,
)
from tests.support.kafka import create_topic, drain

pytestmark = pytest.mark.kafka

NEIGHBOUR_BATCHES = 300


def _prepared(target: SinkTarget) -> SinkTarget:
    return prepare_topics(target, admin_client(target.bootstrap, target.extra))


def test_the_last_marker_is_found_behind_many_others_and_aborted_ones(
    kafka_bootstrap: str,
) -> None:
    job = f"markers-{uuid.uuid4().hex[:6]}"
    target = sink_target(kafka_bootstrap, {}, f"{job}-out", 4, "of", job)
    create_topic(kafka_bootstrap, target.marker_topic, 2)  # partitions p and p + 2 share one
    target = prepare_topics(target, admin_client(target.bootstrap, target.extra))
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


def test_marker_clients_are_kept_between_reads_and_fetch_nothing_in_between(
    kafka_bootstrap: str,
) -> None:
    """A worker reads markers with one kept pair of clients, one read after the other,
    whichever partition it reads. Between reads its consumer holds no partition, so an
    idle worker fetches nothing."""
    job = f"kept-{uuid.uuid4().hex[:6]}"
    target = dataclasses.replace(
        _prepared(sink_target(kafka_bootstrap, {}, f"{job}-out", 2, "of", job)), query="q"
    )
    assert write_partition(target, 7, 1, _rows(7)) == 3
    assert committed_marker(target, 0) is None
    kept = MARKER_CLIENTS.take(kafka_bootstrap, target.marker_topic)
    assert kept is not None
    assert kept.consumer.assignment() == []
    MARKER_CLIENTS.keep(kept, kafka_bootstrap, target.marker_topic)
    found = committed_marker(target, 1)
    assert found is not None and found.batch == 7
    assert MARKER_CLIENTS.take(kafka_bootstrap, target.marker_topic) is kept


def _rows(batch: int) -> list[Record]:
    return [(b"k", f"{batch}-{n}".encode(), None) for n in range(3)]


def test_a_kept_producer_that_was_taken_over_is_dropped_before_it_writes(
    kafka_bootstrap: str,
) -> None:
    """Spark hands a partition's next batch to any Python worker: the producer a worker
    kept may have been fenced by another worker's since. Its write must fall back to a
    new producer, and a replay must still be skipped, with each batch's rows once."""
    job = f"held-{uuid.uuid4().hex[:6]}"
    target = dataclasses.replace(
        _prepared(sink_target(kafka_bootstrap, {}, f"{job}-out", 1, "of", job)), query="q"
    )
    tid = sink_transactional_id(target.prefix, job, 0)

    assert write_partition(target, 1, 0, _rows(1)) == 3
    worker_a = HELD_PRODUCERS.take(kafka_bootstrap, tid)  # batch 2 runs on another worker
    assert worker_a is not None and worker_a.marker is not None and worker_a.marker.batch == 1
    assert write_partition(target, 2, 0, _rows(2)) == 3  # a new producer: fences worker A's
    worker_b = HELD_PRODUCERS.take(kafka_bootstrap, tid)
    assert worker_b is not None

    HELD_PRODUCERS.keep(worker_a, kafka_bootstrap, tid)  # batch 3 lands on worker A again
    assert write_partition(target, 3, 0, _rows(3)) == 3
    assert worker_a.writer.state is TxnState.FENCED, "worker A's producer was not checked"
    # Batch 3 replayed on worker B, whose producer believes batch 2 is the last: fenced
    # too, and the new producer reads batch 3's marker and skips.
    HELD_PRODUCERS.keep(worker_b, kafka_bootstrap, tid)
    assert write_partition(target, 3, 0, _rows(3)) == 0
    # The producer now kept is used as it is for the next batch.
    kept = HELD_PRODUCERS.take(kafka_bootstrap, tid)
    assert kept is not None and kept.marker is not None and kept.marker.batch == 3
    HELD_PRODUCERS.keep(kept, kafka_bootstrap, tid)
    assert write_partition(target, 4, 0, _rows(4)) == 3
    assert HELD_PRODUCERS.take(kafka_bootstrap, tid) is not None
    assert kept.writer.state is TxnState.READY

    values = drain(kafka_bootstrap, target.topic, "read_committed")
    assert sorted(values) == sorted(f"{b}-{n}".encode() for b in (1, 2, 3, 4) for n in range(3))
