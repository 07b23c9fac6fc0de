"""The operator at scale on the local test bed (real API server, real broker).

Hundreds of KafkaSources across namespaces, each with its own pods: what the
operator costs while nothing changes (CPU share of one core, RSS), and how long a
burst of concurrent spec changes takes from apply to the new generation fenced and
its pods created. Pods are given a Running status by a status-only kubelet (no task
processes: 1,500 of them would measure the machine, not the operator).

Measured as a curve (``--curve 100,500,1000,2000``): one operator over a growing set of
sources, at each size its idle cost, the latency of 50 concurrent changes, and how long
a restarted operator takes to re-list and look at every source again.

Goals: idle CPU < 5 % of a core, RSS < 500 MB and growing at most linearly, change
p99 < 10 s, at 2,000 sources.

Usage: make kafka-up k8s-up && .venv/bin/python benchmarks/operator_scale.py \
    --plot docs/images/operator-scale.png
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client, config  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402
from kubernetes.watch.watch import iter_resp_lines  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from tests.support.cluster import (  # noqa: E402
    GROUP,
    VERSION,
    Cluster,
    OperatorProcess,
    install_crds,
    new_namespace,
)

from onceflow.logic.requeue import RequeuePolicy  # noqa: E402
from onceflow.model.objects import LABEL_GENERATION, LABEL_SOURCE  # noqa: E402

TASKS = 3


def _clean(api: client.ApiClient, namespaces: list[str]) -> None:
    """Removes what the run made: the test bed has no controllers to collect a deleted
    namespace's pods, and a later run would list them."""
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    for namespace in namespaces:
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        for plural in ("kafkasources", "pipelines"):
            listing = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)
            for item in listing["items"]:
                name = item["metadata"]["name"]
                unfinalized = {"metadata": {"finalizers": None}}
                custom.patch_namespaced_custom_object(
                    GROUP, VERSION, namespace, plural, name, unfinalized
                )
                custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
        core.delete_namespace(namespace)


Handler = Callable[[dict[str, Any]], None]


class Watch:
    """Calls ``handle`` with every object of a cluster-wide listing, then with each
    object a watch from there reports added or modified, on its own thread (raw JSON:
    the client's models for 1,500 pods take seconds). ``list_all`` is a client's
    cluster-wide list call."""

    def __init__(self, list_all: Callable[..., Any], handle: Handler, selector: str = "") -> None:
        self.list_all, self.handle, self.selector = list_all, handle, selector
        self._stop = threading.Event()
        self.listed = threading.Event()  # the first listing was handled
        self._thread = threading.Thread(target=self._loop, daemon=True, name="watch")

    def start(self) -> Watch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)

    def _loop(self) -> None:
        version = ""
        while not self._stop.is_set():
            try:
                if not version:  # (re)start: what happened while not watching
                    version = self._sync()
                version = self._follow(version)
            except ApiException as error:
                if error.status == 410:  # the watch fell too far behind: list again
                    version = ""
                else:  # a hiccup: the next round observes
                    self._stop.wait(0.2)
            except Exception as error:  # a broken stream: go on from the last version
                print(f"watch: {error!r}; watching again", file=sys.stderr)
                self._stop.wait(0.2)

    def _sync(self) -> str:
        listing = json.loads(
            self.list_all(label_selector=self.selector, _preload_content=False).data
        )
        for item in listing["items"]:
            self.handle(item)
        self.listed.set()
        return str(listing["metadata"]["resourceVersion"])

    def _follow(self, version: str) -> str:
        """Events from ``version`` for up to 5 s; returns where it got."""
        response = self.list_all(
            label_selector=self.selector,
            watch=True,
            resource_version=version,
            timeout_seconds=5,
            _preload_content=False,
        )
        try:
            for line in iter_resp_lines(response):
                if not line:
                    continue
                event = json.loads(line)
                item = event["object"]
                if event["type"] == "ERROR":
                    raise ApiException(status=item.get("code", 500), reason=item.get("message"))
                version = item["metadata"]["resourceVersion"]
                if event["type"] in ("ADDED", "MODIFIED"):
                    self.handle(item)
                if self._stop.is_set():
                    break
        finally:
            response.release_conn()
        return version


class StatusOnlyKubelet:
    """Binds every source pod, reports it Running and ready at once, and finishes a
    graceful deletion at once: the operator sees a node's pod life cycle without the
    processes. Driven by a watch, as a kubelet is: listing 1,500 pods five times a
    second took a core from the two the operator and the API server share."""

    def __init__(self, kubeconfig: str, namespaces: list[str]) -> None:
        self.core = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
        self.namespaces = set(namespaces)
        self.watch = Watch(self.core.list_pod_for_all_namespaces, self._handle, LABEL_SOURCE)

    def start(self) -> StatusOnlyKubelet:
        self.watch.start()
        return self

    def stop(self) -> None:
        self.watch.stop()

    def _handle(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        if meta["namespace"] not in self.namespaces:
            return
        try:
            if meta.get("deletionTimestamp"):
                self.core.delete_namespaced_pod(
                    meta["name"], meta["namespace"], grace_period_seconds=0
                )
            elif (pod.get("status") or {}).get("phase") != "Running":
                self._run(meta["namespace"], meta["name"], pod["spec"]["containers"][0])
        except ApiException as error:
            if error.status != 404:  # gone meanwhile: nothing left to do for it
                raise

    def _run(self, namespace: str, name: str, container: dict[str, Any]) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {
            "phase": "Running",
            "startTime": now,
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
            ],
        }
        self.core.patch_namespaced_pod_status(name, namespace, {"status": status})


def _pipeline(bootstrap: str) -> dict[str, Any]:
    return {
        "kind": "Pipeline",
        "metadata": {"name": "scale"},
        "spec": {"kafka": {"bootstrapServers": bootstrap}, "exactlyOnce": "enabled"},
    }


def _source(name: str) -> dict[str, Any]:
    return {
        "kind": "KafkaSource",
        "metadata": {"name": name},
        "spec": {
            "pipeline": "scale",
            "topic": f"scale-{name}",
            "tasksMax": TASKS,
            "connector": {"type": "sequence", "config": {"streams": TASKS}},
        },
    }


def _sources(custom: client.CustomObjectsApi, namespaces: list[str]) -> list[dict[str, Any]]:
    return [
        item
        for namespace in namespaces
        for item in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "kafkasources")[
            "items"
        ]
    ]


def _ready(status: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def _settled(source: dict[str, Any]) -> bool:
    status = source.get("status") or {}
    return (
        _ready(status)
        and status.get("mode") == "enabled"
        and status.get("fencedGeneration") == status.get("generation")
    )


def _rolled_out(custom: client.CustomObjectsApi, namespaces: list[str]) -> bool:
    """Every namespace's Pipeline has reached `enabled`: until then its sources are
    fenced again at each step, however Ready they look in between."""
    for namespace in namespaces:
        status = (
            custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, "pipelines", "scale"
            ).get("status")
            or {}
        )
        if (status.get("exactlyOnce") or {}).get("current") != "enabled" or not _ready(status):
            return False
    return True


def _wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> float:
    started = time.perf_counter()
    while not predicate():
        if time.perf_counter() - started > timeout_s:
            raise TimeoutError(f"{what}: not within {timeout_s:.0f}s")
        time.sleep(0.5)
    return time.perf_counter() - started


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / 100.0


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _change_latency(
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
    namespaces: list[str],
    targets: list[tuple[str, str]],
    operator_pid: int,
    poll_interval_ms: int,
) -> tuple[list[float], list[float], float]:
    """Applies a new connector setting (``poll_interval_ms``, different in each round so
    a source changed before changes again) to every target at once; returns per change the
    seconds to its new generation fenced and to that generation's pods created, as
    watches report them (polling lists of 500 sources and 1,500 pods loaded the two
    cores the operator runs on and made the figures a second coarse), and the
    operator's CPU share of a core meanwhile."""
    before = {
        (s["metadata"]["namespace"], s["metadata"]["name"]): (s.get("status") or {}).get(
            "generation", 0
        )
        for s in _sources(custom, namespaces)
    }
    started: dict[tuple[str, str], float] = {}
    fenced: dict[tuple[str, str], float] = {}
    created: dict[tuple[str, str], float] = {}
    new_pods: dict[tuple[str, str], set[str]] = {}
    done = threading.Event()

    def source_seen(source: dict[str, Any]) -> None:
        key = (source["metadata"]["namespace"], source["metadata"]["name"])
        generation = (source.get("status") or {}).get("fencedGeneration") or 0
        if key in started and key not in fenced and generation > before[key]:
            fenced[key] = time.perf_counter() - started[key]

    def pod_seen(pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        key = (meta["namespace"], meta["labels"].get(LABEL_SOURCE, ""))
        if key not in started or key in created:
            return
        if meta["labels"].get(LABEL_GENERATION) == str(before[key] + 1):
            new_pods.setdefault(key, set()).add(meta["name"])
            if len(new_pods[key]) == TASKS:
                created[key] = time.perf_counter() - started[key]
                if len(created) == len(targets):
                    done.set()

    def apply(target: tuple[str, str]) -> None:
        namespace, name = target
        started[target] = time.perf_counter()
        spec = {"connector": {"config": {"streams": TASKS, "pollIntervalMs": poll_interval_ms}}}
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, "kafkasources", name, {"spec": spec}
        )

    watches = [
        Watch(partial(custom.list_cluster_custom_object, GROUP, VERSION, "kafkasources"),
              source_seen).start(),
        Watch(core.list_pod_for_all_namespaces, pod_seen, LABEL_SOURCE).start(),
    ]  # fmt: skip
    try:
        for watch in watches:  # what is listed is from before: later events are the changes'
            if not watch.listed.wait(60):
                raise TimeoutError("a watch did not list within 60 s")
        cpu_before, wall_before = _cpu_seconds(operator_pid), time.perf_counter()
        with ThreadPoolExecutor(len(targets)) as pool:
            list(pool.map(apply, targets))
        done.wait(300)
        cpu = (_cpu_seconds(operator_pid) - cpu_before) / (time.perf_counter() - wall_before)
    finally:
        for watch in watches:
            watch.stop()
    if len(created) < len(targets):
        raise TimeoutError(f"only {len(created)}/{len(targets)} changes reached new pods")
    return list(fenced.values()), list(created.values()), cpu


@dataclass(frozen=True)
class Point:
    """The operator's figures at one number of sources."""

    sources: int
    settle_s: float
    idle_cpu: float
    """Share of one core while nothing changes."""
    rss_mb: float
    fenced_p99_s: float
    created_p50_s: float
    created_p99_s: float
    restart_s: float
    """From a restarted operator's start to every source passed and found settled."""


def _settled_passes(metrics_url: str) -> float:
    """KafkaSource passes that ended settled, as the operator's /metrics counts them (0
    while it does not answer yet)."""
    try:
        with urllib.request.urlopen(metrics_url, timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return 0.0
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "onceflow_operator_reconciles_total"
        and sample.labels.get("kind") == "KafkaSource"
        and sample.labels.get("outcome") == "settled"
    )


class Bench:
    """One operator over a growing set of sources, measured at each size."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        install_crds(args.kubeconfig)
        workdir = Path(tempfile.mkdtemp(prefix="onceflow-scale-"))
        self.namespaces = [new_namespace(args.kubeconfig, "scale") for _ in range(args.namespaces)]
        watched = [flag for namespace in self.namespaces[1:] for flag in ("--namespace", namespace)]
        self.metrics_url = f"http://127.0.0.1:{args.metrics_port}/metrics"
        self.operator = OperatorProcess(
            args.kubeconfig,
            self.namespaces[0],
            workdir / "operator.log",
            ("--standalone", "--metrics-port", str(args.metrics_port), *watched),
        )
        self.kubelet = StatusOnlyKubelet(args.kubeconfig, self.namespaces)
        self.api = config.new_client_from_config(config_file=args.kubeconfig)
        self.custom, self.core = client.CustomObjectsApi(self.api), client.CoreV1Api(self.api)
        self.clusters = [Cluster(args.kubeconfig, namespace) for namespace in self.namespaces]
        self.created = 0
        self.rounds = 0

    @property
    def pid(self) -> int:
        assert self.operator.process is not None
        return self.operator.process.pid

    def start(self) -> None:
        self.kubelet.start()
        self.operator.start()
        for cluster in self.clusters:
            cluster.create("pipelines", _pipeline(self.args.bootstrap))

    def stop(self) -> None:
        self.operator.stop()
        self.kubelet.stop()
        _clean(self.api, self.namespaces)

    def grow(self, sources: int) -> float:
        """Creates sources up to ``sources``; seconds until all are settled."""
        for i in range(self.created, sources):
            self.clusters[i % len(self.clusters)].create("kafkasources", _source(f"s{i}"))
        self.created = max(self.created, sources)
        return _wait(
            lambda: (
                sum(_settled(s) for s in _sources(self.custom, self.namespaces)) == sources
                and _rolled_out(self.custom, self.namespaces)
            ),
            3600,
            f"{sources} sources ready and every pipeline enabled",
        )

    def idle(self) -> tuple[float, float]:
        """(CPU share of a core, RSS MB) while nothing changes, over at least one whole
        resync period (stretched with the number of objects by the resync budget), so
        every object's resync pass is in the window: a shorter one can miss them all
        (60 s read 0.2 % at 2,000 sources where a whole period read 10 %)."""
        objects = self.created + len(self.namespaces)  # and a Pipeline in each
        window = max(self.args.idle_s, 1.1 * RequeuePolicy().resync_period_s(objects))
        time.sleep(10)  # let the last status writes and their echoes pass
        cpu_before, wall_before = _cpu_seconds(self.pid), time.perf_counter()
        time.sleep(window)
        cpu = (_cpu_seconds(self.pid) - cpu_before) / (time.perf_counter() - wall_before)
        return cpu, _rss_mb(self.pid)

    def changes(self) -> tuple[list[float], list[float], float]:
        count = self.args.changes
        step = max(1, self.created // count)
        targets = [
            (self.namespaces[i % len(self.namespaces)], f"s{i}")
            for i in range(0, step * count, step)
        ]
        self.rounds += 1
        return _change_latency(
            self.custom, self.core, self.namespaces, targets, self.pid, 50 + self.rounds
        )

    def restart(self) -> float:
        """Seconds from a new operator's start (the old one stopped) until every source
        has had a pass that found it settled: the re-list and the first look at all."""
        self.operator.stop()
        started = time.perf_counter()
        self.operator.start()
        _wait(
            lambda: _settled_passes(self.metrics_url) >= self.created,
            1800,
            f"the restarted operator to pass {self.created} sources",
        )
        return time.perf_counter() - started

    def point(self, sources: int) -> Point:
        settle = self.grow(sources)
        cpu, rss = self.idle()
        fenced, created, _ = self.changes()
        restart = self.restart()
        return Point(
            sources,
            round(settle, 1),
            round(cpu, 4),
            round(rss, 1),
            round(_percentile(fenced, 0.99), 2),
            round(statistics.median(created), 2),
            round(_percentile(created, 0.99), 2),
            round(restart, 1),
        )


def draw(points: list[Point], path: Path) -> None:
    """The curve: each figure against the number of sources, its goal dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sources = [p.sources for p in points]
    panels = [
        ("idle CPU, % of a core", [100 * p.idle_cpu for p in points], 5.0),
        ("RSS, MB", [p.rss_mb for p in points], 500.0),
        ("apply -> pods p99, s (50 changes)", [p.created_p99_s for p in points], 10.0),
        ("restart -> all passed, s", [p.restart_s for p in points], None),
    ]
    figure, axes = plt.subplots(1, len(panels), figsize=(16, 3.4))
    for ax, (title, values, goal) in zip(axes, panels, strict=True):
        ax.plot(sources, values, marker="o")
        if goal is not None:
            ax.axhline(goal, linestyle="--", color="grey", linewidth=1)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(f"KafkaSources ({TASKS} tasks each)")
        ax.set_ylim(bottom=0)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", default=str(ROOT / ".onceflow" / "kubeconfig"))
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument(
        "--curve", default="100,500,1000,2000", help="numbers of sources, measured in turn"
    )
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--changes", type=int, default=50)
    # Longer when the operator's resync period is (Bench.idle).
    parser.add_argument("--idle-s", type=float, default=130.0)
    parser.add_argument("--metrics-port", type=int, default=19404)
    parser.add_argument("--plot", type=Path, help="where to draw the curve (PNG)")
    args = parser.parse_args()
    sizes = sorted(int(n) for n in args.curve.split(","))
    bench = Bench(args)
    points: list[Point] = []
    try:
        bench.start()
        for sources in sizes:
            point = bench.point(sources)
            points.append(point)
            print(
                f"{point.sources} sources x {TASKS} tasks: settled {point.settle_s:.0f}s after "
                f"the last create; idle CPU {100 * point.idle_cpu:.1f}% of a core (goal < 5%), "
                f"RSS {point.rss_mb:.0f} MB (goal < 500 MB); {args.changes} concurrent changes: "
                f"apply -> fenced p99 {point.fenced_p99_s:.2f}s, apply -> pods p50 "
                f"{point.created_p50_s:.2f}s p99 {point.created_p99_s:.2f}s (goal < 10 s); "
                f"restarted operator: every source passed after {point.restart_s:.0f}s",
                flush=True,
            )
    finally:
        bench.stop()
    if len(points) > 1:
        first, last = points[0], points[-1]
        growth = (last.rss_mb - first.rss_mb) / (last.sources - first.sources)
        print(
            f"RSS grows {growth * 1000:.0f} KB a source between {first.sources} and "
            f"{last.sources} (linear would keep it; {first.rss_mb / first.sources * 1000:.0f} "
            f"KB a source at {first.sources})"
        )
    print(json.dumps([asdict(p) for p in points]))
    if args.plot is not None and points:
        draw(points, args.plot)
        print(f"curve: {args.plot}")


if __name__ == "__main__":
    main()
