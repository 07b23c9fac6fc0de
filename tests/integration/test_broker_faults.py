"""A transactional source on a three-broker cluster (RF 3, min ISR 2) through the faults
one broker never shows: the leader of a partition killed while a transaction is open
on it, the transaction coordinator of a task's id killed, and a leader paused past the
replica lag time (it still believes it leads while the others move on). Each fault is
asserted to have landed where it was aimed; the topic, read committed, holds every
stream's numbers once each, in order."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from onceflow.eos.audit_reader import read_sequences
from onceflow.logic.audit import audit_sequences
from tests.e2e.test_standalone_run import _manifests
from tests.support.kafka import offsets_written
from tests.support.kafka_cluster import KafkaCluster, coordinator_partition
from tests.support.onceflow_run import start_run, stop_run
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.kafka_cluster, pytest.mark.alone]  # it kills shared brokers

STREAMS, LIMIT = 4, 8000  # about 80 s of records: every fault meets the source running
DOWN_S = 8  # long enough for leadership and coordination to move


def source_manifests(bootstrap: str, name: str, tasks: int = 2, **spec: Any) -> str:
    """A sequence source of STREAMS streams of LIMIT records, in transactions 2 s long:
    a fault struck at a random moment meets one open."""
    documents = list(yaml.safe_load_all(_manifests(bootstrap, name, tasks_max=tasks)))
    source: dict[str, Any] = documents[1]["spec"]
    source["connector"]["config"] |= {"streams": STREAMS, "limit": LIMIT, "pollIntervalMs": 50}
    source |= {"transactionBoundary": "interval", "transactionBoundaryIntervalMs": 2000, **spec}
    return yaml.safe_dump_all(documents)


def exact(bootstrap: str, topic: str) -> bool:
    """Every stream's numbers 1..LIMIT once each, in order, read committed."""
    if offsets_written(bootstrap, topic) < STREAMS * LIMIT:
        return False
    pairs, unparsable = read_sequences(bootstrap, topic, key_field="stream", seq_field="seq")
    return audit_sequences(pairs, expect=LIMIT, key_count=STREAMS, unparsable=unparsable).ok


def test_leader_and_coordinator_kills_and_a_paused_leader_lose_and_repeat_nothing(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    bootstrap, name = kafka_cluster.bootstrap, f"bf-{uuid.uuid4().hex[:6]}"
    topic = f"{name}.counts"
    manifest, state, log = tmp_path / "pipeline.yaml", tmp_path / "state", tmp_path / "run.log"
    # One task: a transaction open on the topic is then its id's, whose coordinator
    # is the one killed.
    manifest.write_text(source_manifests(bootstrap, name, tasks=1))
    run = start_run(manifest, state, log)
    try:
        wait_for(lambda: offsets_written(bootstrap, topic) > 200, 120, "the first records")
        record = json.loads((state / "default.counter.json").read_text())
        transactional_id = record["transactionalIds"][0]

        # The leader of the partition, killed while a transaction is open on it.
        leader = kafka_cluster.leader(topic, 0)
        kafka_cluster.await_open_transaction(topic, 0)
        kafka_cluster.kill(leader)
        kafka_cluster.await_taken_over(leader, topic, 0)
        time.sleep(DOWN_S)
        kafka_cluster.start(leader)
        kafka_cluster.await_fully_replicated(topic)

        # The coordinator of the task's transactional id, killed with one open.
        coordinator = kafka_cluster.coordinator(transactional_id)
        kafka_cluster.await_open_transaction(topic, 0)
        kafka_cluster.kill(coordinator)
        log_partition = coordinator_partition(
            transactional_id, kafka_cluster.partitions("__transaction_state")
        )
        kafka_cluster.await_taken_over(coordinator, "__transaction_state", log_partition)
        time.sleep(DOWN_S)
        kafka_cluster.start(coordinator)
        kafka_cluster.await_fully_replicated(topic)

        # A leader paused past replica.lag.time.max.ms: still leading, to itself, while
        # the others move on without it.
        paused = kafka_cluster.leader(topic, 0)
        kafka_cluster.await_open_transaction(topic, 0)
        kafka_cluster.pause(paused)
        kafka_cluster.await_taken_over(paused, topic, 0)
        kafka_cluster.resume(paused)

        wait_for(lambda: exact(bootstrap, topic), 300, "every record, once, in order")
    finally:
        stop_run(run)
    pairs, unparsable = read_sequences(bootstrap, topic, key_field="stream", seq_field="seq")
    report = audit_sequences(pairs, expect=LIMIT, key_count=STREAMS, unparsable=unparsable)
    assert report.ok, report
