"""``onceflow run`` and its tasks in a network namespace of their own, against the
three-broker cluster: cut off from every broker for longer than the transaction
timeout (the coordinator aborts the open transaction while the task cannot hear it),
then on a slow, lossy link. Each fault is asserted to have struck (packets dropped by
it, a transaction aborted by the broker); the topic, read committed from
outside the namespace, holds every stream's numbers once each, in order."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from tests.integration.test_broker_faults import exact, source_manifests
from tests.support.kafka import aborted_records, offsets_written
from tests.support.kafka_cluster import KafkaCluster
from tests.support.netns import network_namespace
from tests.support.onceflow_run import start_run, stop_run
from tests.support.testbed import script_value
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.kafka_cluster, pytest.mark.alone]  # namespaces, shared brokers

TRANSACTION_TIMEOUT_MS = 10_000


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_a_partitioned_then_lossy_source_loses_and_repeats_nothing(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    outside = kafka_cluster.bootstrap
    inside = script_value("scripts/kafka-cluster.sh", "netns-bootstrap")
    name = f"nf-{uuid.uuid4().hex[:6]}"
    topic = f"{name}.counts"
    manifest, state, log = tmp_path / "pipeline.yaml", tmp_path / "state", tmp_path / "run.log"
    manifest.write_text(
        source_manifests(inside, name, tasks=1, transactionTimeoutMs=TRANSACTION_TIMEOUT_MS)
    )
    with network_namespace(0) as namespace:
        run = start_run(manifest, state, log, launcher=namespace.command())
        try:
            wait_for(lambda: offsets_written(outside, topic) > 200, 120, "the first records")

            # Cut off inside a transaction, past its timeout: the broker aborts it while
            # the task can reach nobody (so only the coordinator can have closed it).
            assert aborted_records(outside, topic) == 0
            kafka_cluster.await_open_transaction(topic, 0)
            namespace.partition()
            wait_for(
                lambda: not kafka_cluster.open_transaction_on(topic, 0),
                3 * TRANSACTION_TIMEOUT_MS / 1000,
                "the coordinator to abort the cut-off transaction",
            )
            cut = namespace.dropped()
            namespace.heal()
            assert cut > 0, "the partition cut no traffic: the test proved nothing"
            assert aborted_records(outside, topic) > 0, "closed, but not by an abort"

            # A slow, lossy link for a while.
            namespace.degrade(rate_kbit=256, loss_pct=10)
            time.sleep(20)
            lost = namespace.dropped()
            namespace.restore_link()
            assert lost > 0, "the lossy link dropped nothing: the test proved nothing"

            wait_for(lambda: exact(outside, topic), 300, "every record, once, in order")
        finally:
            stop_run(run)
