"""The operator at the edges of a pipeline's life, on a real API server with real task
processes: a Pipeline deleted and applied again, a KafkaSource whose status is lost."""

from __future__ import annotations

import signal
import threading
import time
import uuid

import pytest
from kubernetes import watch

from tests.integration.test_operator import (
    STREAMS,
    _audit_clean,
    _finished,
    _settle_enabled,
    pipeline,
    source,
)
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.kafka import offsets_written
from tests.support.kubelet import LocalKubelet
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.k8s, pytest.mark.kafka]

LIMIT = 1000
"""Numbers per stream: a few seconds of writing left when each test's event happens
(the first seconds after Ready), which each test asserts; every record past that is
waiting, not testing."""


def _still_writing(bootstrap: str, topic: str) -> None:
    assert offsets_written(bootstrap, topic) < STREAMS * LIMIT, "the source finished first"


def _watch_source_modes(
    cluster: Cluster, seen: list[tuple[int, str]], stop: threading.Event
) -> None:
    while not stop.is_set():
        for event in watch.Watch().stream(
            cluster.custom.list_namespaced_custom_object,
            "onceflow.io",
            "v1alpha1",
            cluster.namespace,
            "kafkasources",
            timeout_seconds=5,
        ):
            status = event["object"].get("status") or {}
            if status.get("mode"):
                seen.append((int(status.get("generation") or 0), status["mode"]))
            if stop.is_set():
                return


def test_a_recreated_pipeline_resumes_where_its_workloads_are(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    """GitOps prune and re-sync: the Pipeline is deleted and applied again while its
    source runs `enabled`. Its new status must start from `enabled`, and the source
    must never be walked down to `disabled` (its generation stays)."""
    cluster, _, _ = operator
    topic = f"edge-{uuid.uuid4().hex[:6]}"
    limit = LIMIT
    _settle_enabled(cluster, kafka_bootstrap, topic, 2, limit)
    generation = cluster.status("kafkasources", "counter")["generation"]
    seen: list[tuple[int, str]] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_source_modes, args=(cluster, seen, stop), daemon=True)
    watcher.start()
    try:
        _still_writing(kafka_bootstrap, topic)
        cluster.delete("pipelines", "orders")
        wait_for(
            lambda: (
                not cluster.custom.list_namespaced_custom_object(
                    "onceflow.io", "v1alpha1", cluster.namespace, "pipelines"
                )["items"]
            ),
            30,
            "the Pipeline to be gone",
        )
        cluster.create("pipelines", pipeline(kafka_bootstrap, "enabled"))
        wait_for(
            lambda: cluster.condition("pipelines", "orders", "Ready").get("status") == "True",
            60,
            "the re-created pipeline Ready",
        )
        assert cluster.status("pipelines", "orders")["exactlyOnce"]["current"] == "enabled"
        wait_for(lambda: _finished(cluster, kafka_bootstrap, topic, limit), 180, "the limit")
    finally:
        stop.set()
        watcher.join(10)
    assert {mode for _, mode in seen} == {"enabled"}, seen
    assert cluster.status("kafkasources", "counter")["generation"] == generation
    _audit_clean(kafka_bootstrap, topic, limit)


def test_a_lost_source_status_stops_the_old_pods_before_the_new_incarnation_runs(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    """The status is wiped (a restore without status) while generation-1 pods run: the
    new record is generation 1 again, of a new incarnation. The old pods must be told
    apart, stopped, and every stream still read exactly once."""
    cluster, _, _ = operator
    topic = f"edge-{uuid.uuid4().hex[:6]}"
    limit = LIMIT
    _settle_enabled(cluster, kafka_bootstrap, topic, 2, limit)
    # A second generation runs when the status is lost (a new Pipeline starts at its
    # target, so the first generation is already enabled): the new incarnation's pods
    # (generation 1) are then named apart from the old ones, as on a cluster whose
    # source has lived a while. The stand-in kubelet tells pods apart by name.
    cluster.patch_spec("kafkasources", "counter", {"connector": {"config": {"pollIntervalMs": 25}}})
    wait_for(
        lambda: (
            cluster.status("kafkasources", "counter").get("generation") == 2
            and cluster.condition("kafkasources", "counter", "Ready").get("status") == "True"
        ),
        90,
        "a second generation running",
    )
    before = cluster.status("kafkasources", "counter")
    old_pods = {p.metadata.name: p.metadata.uid for p in cluster.pods("onceflow.io/source=counter")}
    obj = cluster.get("kafkasources", "counter")
    _still_writing(kafka_bootstrap, topic)
    obj["status"] = {}
    cluster.custom.replace_namespaced_custom_object_status(
        "onceflow.io", "v1alpha1", cluster.namespace, "kafkasources", "counter", obj
    )
    wait_for(
        lambda: (
            (cluster.status("kafkasources", "counter").get("incarnation") or "")
            not in ("", before["incarnation"])
            and cluster.condition("kafkasources", "counter", "Ready").get("status") == "True"
        ),
        90,
        "a new incarnation running",
    )
    pods = cluster.pods("onceflow.io/source=counter")
    assert pods and all(old_pods.get(p.metadata.name) != p.metadata.uid for p in pods)
    wait_for(lambda: _finished(cluster, kafka_bootstrap, topic, limit), 180, "the limit")
    _audit_clean(kafka_bootstrap, topic, limit)


def test_an_image_edit_rolls_the_pods_within_their_generation(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    """spec.image is not part of the task configuration, so no new generation: but the
    pods must be replaced (not wait for their next death), and nothing duplicated."""
    cluster, _, _ = operator
    topic = f"edge-{uuid.uuid4().hex[:6]}"
    limit = LIMIT
    _settle_enabled(cluster, kafka_bootstrap, topic, 2, limit)
    generation = cluster.status("kafkasources", "counter")["generation"]
    before = {p.metadata.uid for p in cluster.pods("onceflow.io/source=counter")}
    _still_writing(kafka_bootstrap, topic)
    cluster.patch_spec("kafkasources", "counter", {"image": "onceflow:next"})

    def rolled() -> bool:
        pods = cluster.pods("onceflow.io/source=counter")
        return len(pods) == 2 and all(
            p.metadata.uid not in before and p.spec.containers[0].image == "onceflow:next"
            for p in pods
        )

    wait_for(rolled, 120, "both pods replaced with the new image")
    assert cluster.status("kafkasources", "counter")["generation"] == generation
    wait_for(lambda: _finished(cluster, kafka_bootstrap, topic, limit), 180, "the limit")
    _audit_clean(kafka_bootstrap, topic, limit)


def test_an_at_least_once_generation_starts_only_after_its_predecessor_flushed(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    """`disabled` -> `preparing` while the old tasks are slow to stop (paused): their
    records are acknowledged but their offsets not yet flushed, and nothing can fence an
    idempotent producer. The new generation must wait until the old pods are gone, so
    it resumes from their final offsets instead of writing those records again."""
    cluster, _, kubelet = operator
    topic = f"edge-{uuid.uuid4().hex[:6]}"
    limit = LIMIT
    cluster.create("pipelines", pipeline(kafka_bootstrap, "disabled"))
    cluster.create("kafkasources", source(2, topic, limit))
    wait_for(
        lambda: cluster.condition("kafkasources", "counter", "Ready").get("status") == "True",
        120,
        "the source Ready in disabled",
    )
    wait_for(lambda: offsets_written(kafka_bootstrap, topic) > 0, 60, "a first record")
    old = [p.metadata.name for p in cluster.pods("onceflow.io/source=counter")]
    for name in old:
        kubelet.process(name).send_signal(signal.SIGSTOP)
    _still_writing(kafka_bootstrap, topic)
    try:
        cluster.patch_spec("pipelines", "orders", {"exactlyOnce": "preparing"})
        wait_for(
            lambda: (
                cluster.condition("kafkasources", "counter", "Progressing").get("reason")
                == "WaitingForPredecessors"
            ),
            60,
            "the new generation to wait for the paused tasks",
        )
        waiting = cluster.condition("kafkasources", "counter", "Progressing")
        assert all(name in waiting["message"] for name in old), waiting
        # What must not happen has no event to wait for: the paused tasks stay paused
        # for a while, long enough for a successor to start and read the offsets.
        time.sleep(5)
        started = [p.metadata.name for p in cluster.pods("onceflow.io/source=counter")]
        assert sorted(started) == sorted(old), "a successor started next to paused tasks"
    finally:
        for name in old:  # within the grace period: their final flush still happens
            kubelet.process(name).send_signal(signal.SIGCONT)
    wait_for(
        lambda: (
            cluster.condition("pipelines", "orders", "Ready").get("status") == "True"
            and cluster.status("kafkasources", "counter").get("mode") == "preparing"
        ),
        120,
        "the source Ready in preparing",
    )
    wait_for(lambda: _finished(cluster, kafka_bootstrap, topic, limit), 180, "the limit")
    _audit_clean(kafka_bootstrap, topic, limit)
