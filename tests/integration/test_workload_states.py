"""spec.state on a cluster: a paused source holds still with its tasks up, a stopped one
has no task and its ids fenced (a zombie that outlived the stop writes nothing), and
the Pipeline's state combines with each workload's own. Real API server, real task
processes, real broker, audited."""

from __future__ import annotations

import re
import signal
import time
import uuid

import pytest

from onceflow.eos.consume import end_offsets
from tests.integration.test_operator import _delivered_exactly_once, pipeline, source
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.kafka import offsets_written
from tests.support.kubelet import LocalKubelet
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.k8s, pytest.mark.kafka]

SOURCES = "kafkasources"


def _reason(cluster: Cluster, plural: str, name: str) -> str:
    ready = cluster.condition(plural, name, "Ready")
    return str(ready.get("reason", "")) if ready.get("status") == "True" else ""


def _held_still(bootstrap: str, topic: str, seconds: float) -> bool:
    """Nothing reaches the topic, committed or not, for ``seconds``."""
    before = end_offsets(bootstrap, topic)
    time.sleep(seconds)
    return end_offsets(bootstrap, topic) == before


def test_pause_stop_and_resume_keep_every_record_exactly_once(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    cluster, _, kubelet = operator
    topic, limit = f"st-{uuid.uuid4().hex[:6]}", 5000
    counter = source(2, topic, limit)
    # Transactions 2 s long, records every 20 ms: a task stopped at any moment is almost
    # surely inside one (the log says so afterwards, or the test fails).
    counter["spec"] |= {"transactionBoundary": "interval", "transactionBoundaryIntervalMs": 2000}
    cluster.create("pipelines", pipeline(kafka_bootstrap, "enabled"))
    cluster.create(SOURCES, counter)
    wait_for(lambda: _reason(cluster, SOURCES, "counter") == "TasksRunning", 120, "running")
    wait_for(lambda: offsets_written(kafka_bootstrap, topic) > 200, 60, "the first records")
    generation = cluster.status(SOURCES, "counter")["generation"]
    pods = {p.metadata.name for p in cluster.pods("onceflow.io/source=counter")}

    # Paused: the same task processes stay up and write nothing.
    cluster.patch_spec(SOURCES, "counter", {"state": "paused"})
    wait_for(lambda: _reason(cluster, SOURCES, "counter") == "Paused", 60, "Ready: Paused")
    assert cluster.status(SOURCES, "counter")["state"] == "paused"
    time.sleep(6)  # each task asks every 5 s, between two transactions
    assert _held_still(kafka_bootstrap, topic, 4), "a paused source kept writing"
    assert {p.metadata.name for p in cluster.pods("onceflow.io/source=counter")} == pods
    assert all(kubelet.process(pod).poll() is None for pod in pods), "paused tasks stay up"
    written = offsets_written(kafka_bootstrap, topic)
    assert written < 6 * limit, "paused before the end: the test would prove nothing"

    # Running again, then the Pipeline stops everything while one task is a zombie on
    # a lost node: it must not write after the stop, and the stop must not wait for it.
    cluster.patch_spec(SOURCES, "counter", {"state": "running"})
    wait_for(lambda: offsets_written(kafka_bootstrap, topic) > written + 300, 60, "resumed")
    zombie_pod = f"counter-g{generation}-0"
    zombie = kubelet.process(zombie_pod)
    zombie.send_signal(signal.SIGSTOP)
    kubelet.lose(zombie_pod)
    cluster.patch_spec("pipelines", "orders", {"state": "stopped"})
    wait_for(lambda: _reason(cluster, SOURCES, "counter") == "Stopped", 90, "Ready: Stopped")
    status = cluster.status(SOURCES, "counter")
    assert (status["state"], status["stopFenced"], status["generation"]) == (
        "stopped",
        True,
        generation,
    ), "stopped in the same generation, its ids fenced"
    assert cluster.pods("onceflow.io/source=counter") == []
    reasons = [e.reason for e in cluster.events("counter")]
    assert "Fenced" in reasons[reasons.index("Stopping") :], reasons
    stopped_at = end_offsets(kafka_bootstrap, topic)
    zombie.send_signal(signal.SIGCONT)
    assert zombie.wait(60) == 0, kubelet.log_of(zombie_pod)
    assert re.search(
        r"(fenced|producer failed): the source is stopped", kubelet.log_of(zombie_pod)
    ), "the zombie was not stopped inside a transaction: the test proved nothing"
    assert end_offsets(kafka_bootstrap, topic) == stopped_at, "the zombie committed"
    assert _held_still(kafka_bootstrap, topic, 3), "something of a stopped source wrote"

    # The Pipeline runs again, but the source is paused on its own: it stays paused
    # (the stronger state wins), with its tasks up in the same generation.
    cluster.patch_spec(SOURCES, "counter", {"state": "paused"})
    cluster.patch_spec("pipelines", "orders", {"state": "running"})
    wait_for(lambda: _reason(cluster, SOURCES, "counter") == "Paused", 90, "Ready: Paused")
    assert cluster.status(SOURCES, "counter")["generation"] == generation
    wait_for(lambda: len(cluster.pods("onceflow.io/source=counter")) == 2, 60, "tasks up")
    time.sleep(6)
    assert _held_still(kafka_bootstrap, topic, 3), "a paused source wrote"

    cluster.patch_spec(SOURCES, "counter", {"state": "running"})
    _delivered_exactly_once(cluster, kafka_bootstrap, topic, limit, 240)
