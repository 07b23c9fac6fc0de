"""The operator on a real API server with real task processes and a real broker."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import watch

from onceflow.eos.audit_reader import read_sequences
from onceflow.logic.audit import audit_sequences
from tests.support.cluster import Cluster, OperatorProcess, running_operator
from tests.support.kubelet import LocalKubelet
from tests.support.tasks import wait_for

pytestmark = [pytest.mark.k8s, pytest.mark.kafka]

STREAMS, LIMIT = 6, 1500


def pipeline(bootstrap: str, mode: str, **kafka: Any) -> dict[str, Any]:
    return {
        "kind": "Pipeline",
        "metadata": {"name": "orders"},
        "spec": {"kafka": {"bootstrapServers": bootstrap, **kafka}, "exactlyOnce": mode},
    }


def source(tasks: int, topic: str, limit: int = LIMIT) -> dict[str, Any]:
    return {
        "kind": "KafkaSource",
        "metadata": {"name": "counter"},
        "spec": {
            "pipeline": "orders",
            "topic": topic,
            "tasksMax": tasks,
            "exactlyOnceSupport": "required",
            "connector": {
                "type": "sequence",
                "config": {
                    "streams": STREAMS,
                    "limit": limit,
                    "batchSize": 10,
                    "pollIntervalMs": 20,
                },
            },
        },
    }


@pytest.fixture
def operator(
    kubeconfig: str, kafka_bootstrap: str, tmp_path: Path
) -> Iterator[tuple[Cluster, OperatorProcess, LocalKubelet]]:
    with running_operator(kubeconfig, tmp_path, "op") as running:
        yield running


def _finished(cluster: Cluster, bootstrap: str, topic: str, limit: int) -> bool:
    pairs, _ = read_sequences(bootstrap, topic, key_field="stream", seq_field="seq", timeout_s=30)
    return len({(k, s) for k, s in pairs}) >= STREAMS * limit


def _audit_clean(bootstrap: str, topic: str, limit: int) -> None:
    pairs, unparsable = read_sequences(bootstrap, topic, key_field="stream", seq_field="seq")
    report = audit_sequences(
        pairs,
        expect=limit,
        expected_keys=[f"s{i}" for i in range(STREAMS)],
        unparsable=unparsable,
    )
    assert report.ok, report


def test_rollout_walks_through_preparing_and_delivers_exactly_once(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    cluster, _, _ = operator
    topic = f"op-{uuid.uuid4().hex[:6]}"
    modes_seen: list[str] = []

    def record_modes() -> None:
        for event in watch.Watch().stream(
            cluster.custom.list_namespaced_custom_object,
            "onceflow.io",
            "v1alpha1",
            cluster.namespace,
            "pipelines",
            timeout_seconds=120,
        ):
            current = ((event["object"].get("status") or {}).get("exactlyOnce") or {}).get(
                "current"
            )
            if current and (not modes_seen or modes_seen[-1] != current):
                modes_seen.append(current)
            if current == "enabled":
                return

    watcher = threading.Thread(target=record_modes, daemon=True)
    watcher.start()
    cluster.create("pipelines", pipeline(kafka_bootstrap, "enabled"))
    cluster.create("kafkasources", source(3, topic))

    wait_for(
        lambda: cluster.condition("pipelines", "orders", "Ready").get("status") == "True",
        120,
        "the pipeline to reach enabled and be Ready",
    )
    watcher.join(10)
    assert modes_seen == ["disabled", "preparing", "enabled"]
    status = cluster.status("kafkasources", "counter")
    assert status["mode"] == "enabled"
    assert status["generation"] == status["fencedGeneration"] == 3
    assert status["readyTasks"] == 3
    pods = cluster.pods("onceflow.io/source=counter")
    assert sorted(p.metadata.name for p in pods) == [f"counter-g3-{i}" for i in range(3)]

    wait_for(
        lambda: _finished(cluster, kafka_bootstrap, topic, LIMIT),
        180,
        "every stream to reach the limit",
        interval_s=2,
    )
    _audit_clean(kafka_bootstrap, topic, LIMIT)
