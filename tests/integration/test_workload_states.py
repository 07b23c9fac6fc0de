"""spec.state on a cluster: a paused source holds still with its tasks up, a stopped one
has no task and its ids fenced (a zombie that outlived the stop writes nothing), and
the Pipeline's state combines with each workload's own. Real API server, real task
processes, real broker, audited."""

from __future__ import annotations

import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml

from onceflow.eos.audit_reader import read_sequences
from onceflow.eos.consume import end_offsets
from tests.integration.test_operator import _delivered_exactly_once, pipeline, source
from tests.support.cli import onceflow
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
    # The zombie must have resumed itself (a task looks every 5 s): one still holding
    # would only find the stop between transactions, and the test would prove nothing.
    # (A log without "resumed" yet is no answer: its commits are from before the pause.)
    wait_for(
        lambda: '"committed"' in kubelet.log_of(zombie_pod).partition('"resumed"')[2],
        60,
        "the zombie's task committing again after the pause",
    )
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


def _offsets(kubeconfig: str, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
    return onceflow(
        "offsets", *args, "--source", "counter", "-n", namespace, "--kubeconfig", kubeconfig
    )


def _sequences(bootstrap: str, topic: str) -> dict[str, list[int]]:
    pairs, _ = read_sequences(bootstrap, topic, key_field="stream", seq_field="seq")
    found: dict[str, list[int]] = {}
    for stream, seq in pairs:
        found.setdefault(stream, []).append(seq)
    return found


def test_offsets_listed_and_altered_through_the_cli_replay_exactly_what_was_asked(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet],
    kafka_bootstrap: str,
    kubeconfig: str,
    tmp_path: Path,
) -> None:
    cluster, _, _ = operator
    topic, limit = f"so-{uuid.uuid4().hex[:6]}", 3000
    cluster.create("pipelines", pipeline(kafka_bootstrap, "enabled"))
    cluster.create(SOURCES, source(2, topic, limit))
    wait_for(lambda: offsets_written(kafka_bootstrap, topic) > 1500, 120, "the first records")

    # Asked of a running source: the CLI refuses, and so does the operator for good.
    early = _offsets(kubeconfig, cluster.namespace, "reset", "--id", "early")
    assert early.returncode == 1 and "is not stopped" in early.stderr, early
    cluster.patch_spec(SOURCES, "counter", {"offsetsChange": {"id": "sneaky", "reset": True}})
    wait_for(
        lambda: (
            (cluster.status(SOURCES, "counter").get("offsetsChange") or {}).get("id") == "sneaky"
        ),
        60,
        "the refusal",
    )
    refused = cluster.status(SOURCES, "counter")["offsetsChange"]
    assert (
        refused["result"] == "Refused"
        and "only while the source is stopped" in (refused["message"])
    )

    cluster.patch_spec(SOURCES, "counter", {"state": "stopped"})
    wait_for(lambda: _reason(cluster, SOURCES, "counter") == "Stopped", 90, "Ready: Stopped")
    listed = _offsets(kubeconfig, cluster.namespace, "list")
    assert listed.returncode == 0, listed.stderr
    at_stop = {e["partition"]["stream"]: e["offset"]["seq"] for e in yaml.safe_load(listed.stdout)}
    assert len(at_stop) == 6 and at_stop["s3"] > 50, at_stop
    wanted = tmp_path / "offsets.yaml"
    wanted.write_text(yaml.safe_dump([{"partition": {"stream": "s3"}, "offset": {"seq": 50}}]))
    altered = _offsets(
        kubeconfig, cluster.namespace, "alter", "--id", "back-50", "--offsets", str(wanted)
    )
    assert altered.returncode == 0 and "back-50: Applied" in altered.stdout, altered
    relisted = yaml.safe_load(_offsets(kubeconfig, cluster.namespace, "list").stdout)
    assert {e["partition"]["stream"]: e["offset"]["seq"] for e in relisted} == {
        **at_stop,
        "s3": 50,
    }

    cluster.patch_spec(SOURCES, "counter", {"state": "running"})
    wait_for(
        lambda: _all_reached(_sequences(kafka_bootstrap, topic), limit),
        240,
        "every stream at the end",
        interval_s=3,
    )
    seqs = _sequences(kafka_bootstrap, topic)
    assert seqs["s3"] == [*range(1, at_stop["s3"] + 1), *range(51, limit + 1)]
    for stream in ("s0", "s1", "s2", "s4", "s5"):
        assert seqs[stream] == list(range(1, limit + 1)), stream
    events = [e.reason for e in cluster.events("counter")]
    assert events.count("OffsetsChanged") == 1 and "OffsetsChangeRefused" in events


def _all_reached(seqs: dict[str, list[int]], limit: int) -> bool:
    return len(seqs) == 6 and all(s[-1] == limit for s in seqs.values())
