"""Operator latency on the local test bed (real API server, real broker, tasks run as
local processes by the tests' kubelet stand-in).

1. apply -> new generation fenced and every pod running, over N tasksMax changes
   (p50/p99; target p99 <= 10 s);
2. time for the operator to plan, fence-record and create pods for 100 KafkaSources.

Usage: make kafka-up k8s-up && .venv/bin/python benchmarks/operator_latency.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.cluster import Cluster, OperatorProcess, install_crds, new_namespace  # noqa: E402
from tests.support.kubelet import LocalKubelet  # noqa: E402


def _pipeline(bootstrap: str) -> dict[str, object]:
    return {
        "kind": "Pipeline",
        "metadata": {"name": "bench"},
        "spec": {"kafka": {"bootstrapServers": bootstrap}, "exactlyOnce": "disabled"},
    }


def _source(name: str, tasks: int) -> dict[str, object]:
    return {
        "kind": "KafkaSource",
        "metadata": {"name": name},
        "spec": {
            "pipeline": "bench",
            "topic": f"bench-{name}",
            "tasksMax": tasks,
            "connector": {"type": "sequence", "config": {"streams": 3, "pollIntervalMs": 100}},
        },
    }


def _wait(predicate: object, timeout_s: float) -> float:
    started = time.perf_counter()
    while not predicate():  # type: ignore[operator]
        if time.perf_counter() - started > timeout_s:
            raise TimeoutError("benchmark step did not finish")
        time.sleep(0.05)
    return time.perf_counter() - started


def generation_latency(kubeconfig: str, bootstrap: str, changes: int, workdir: Path) -> list[float]:
    namespace = new_namespace(kubeconfig, "bench")
    cluster = Cluster(kubeconfig, namespace)
    kubelet = LocalKubelet(kubeconfig, namespace, workdir / "kubelet").start()
    operator = OperatorProcess(kubeconfig, namespace, workdir / "operator.log").start()
    try:
        cluster.create("pipelines", _pipeline(bootstrap))
        cluster.create("kafkasources", _source("s", 2))

        def settled(tasks: int) -> bool:
            status = cluster.status("kafkasources", "s")
            return (
                status.get("fencedGeneration") == status.get("generation")
                and status.get("taskCount") == tasks
                and status.get("readyTasks") == tasks
            )

        _wait(lambda: settled(2), 60)
        samples = []
        for i in range(changes):
            tasks = 3 if i % 2 == 0 else 2
            started = time.perf_counter()
            cluster.patch_spec("kafkasources", "s", {"tasksMax": tasks})
            _wait(lambda tasks=tasks: settled(tasks), 60)
            samples.append(time.perf_counter() - started)
        return samples
    finally:
        operator.stop()
        kubelet.stop()


def many_sources(kubeconfig: str, bootstrap: str, count: int, workdir: Path) -> float:
    namespace = new_namespace(kubeconfig, "bench100")
    cluster = Cluster(kubeconfig, namespace)
    operator = OperatorProcess(kubeconfig, namespace, workdir / "operator100.log").start()
    try:
        cluster.create("pipelines", _pipeline(bootstrap))
        started = time.perf_counter()
        for i in range(count):
            cluster.create("kafkasources", _source(f"s{i}", 1))

        def all_planned() -> bool:
            items = cluster.custom.list_namespaced_custom_object(
                "onceflow.io", "v1alpha1", namespace, "kafkasources"
            )["items"]
            fenced = sum(1 for o in items if (o.get("status") or {}).get("fencedGeneration") == 1)
            return fenced == count and len(cluster.pods()) == count

        _wait(all_planned, 300)
        return time.perf_counter() - started
    finally:
        operator.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", default=str(ROOT / ".onceflow" / "kubeconfig"))
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--sources", type=int, default=100)
    args = parser.parse_args()
    install_crds(args.kubeconfig)
    workdir = Path(tempfile.mkdtemp(prefix="onceflow-bench-"))
    samples = sorted(generation_latency(args.kubeconfig, args.bootstrap, args.changes, workdir))
    p99 = samples[min(len(samples) - 1, round(0.99 * (len(samples) - 1)))]
    print(
        f"tasksMax change -> fenced + all pods running, {len(samples)} changes: "
        f"p50 {statistics.median(samples):.2f}s, p99 {p99:.2f}s, max {samples[-1]:.2f}s "
        f"(target p99 <= 10 s)"
    )
    elapsed = many_sources(args.kubeconfig, args.bootstrap, args.sources, workdir)
    print(
        f"{args.sources} KafkaSources created -> all planned, fenced and pods created: "
        f"{elapsed:.1f}s ({args.sources / elapsed:.1f} sources/s)"
    )


if __name__ == "__main__":
    main()
