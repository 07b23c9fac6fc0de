"""Shared pieces of the benchmarks: an in-process task run and a fresh topic; a
source run by `onceflow run` in a process of its own; a Kafka Connect worker's REST
API; the steady-state rate of a count sampled over time."""

from __future__ import annotations

import contextlib
import copy
import cProfile
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from onceflow.api import ExactlyOnceMode, TransactionBoundary
from onceflow.api.connector import SourceConnector
from onceflow.api.task import FileAuthority, TaskSettings
from onceflow.connectors.sequence import SequenceConnector
from onceflow.logic.generations import GenerationRecord
from onceflow.runtime.authority import FileGenerationAuthority
from onceflow.runtime.task import TaskRunner
from onceflow.standalone.state import store_record

# The tests' support package, for the manifests a run of one source is given there too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.onceflow_run import pipeline_with_source

OFFSET_FLUSH_MS = 100


class TaskRun(NamedTuple):
    rate: float
    """Records per second from the task's start (its topics checked, offsets read,
    producer initialised) until ``records`` are durable: the raw loops compared with
    it start their clocks once their producer is ready too."""
    topic: str
    startup_s: float
    """From the runner's start until the task's: checking topics, reading offsets,
    initialising the producer, once per task start."""


def _starts_told(connector: SourceConnector, started: list[float]) -> SourceConnector:
    """``connector`` whose tasks append the time they start to ``started``."""

    class Told(connector.task_class):  # type: ignore[name-defined, misc]
        def start(self, context: Any) -> None:
            super().start(context)
            started.append(time.perf_counter())

    told = copy.copy(connector)
    told.task_class = Told
    return told


JSON_OVERHEAD = 30  # bytes of {"stream":"s0","seq":12345} around the padding


def run_source(
    bootstrap: str,
    mode: ExactlyOnceMode,
    records: int,
    record_bytes: int,
    batch: int,
    profile: cProfile.Profile | None = None,
    interval_ms: int | None = None,
) -> TaskRun:
    """Runs one sequence task in-process until ``records`` are durable.
    ``interval_ms``: commit on that interval instead of after every poll."""
    config = {
        "streams": 4,
        "limit": records // 4,
        "batchSize": batch,
        "padBytes": max(0, record_bytes - JSON_OVERHEAD),
        "assigned": ["s0", "s1", "s2", "s3"],
    }
    return run_task(
        bootstrap, mode, SequenceConnector(), "sequence", config, records, profile, interval_ms
    )


def run_task(
    bootstrap: str,
    mode: ExactlyOnceMode,
    connector: SourceConnector,
    connector_type: str,
    config: dict[str, Any],
    records: int,
    profile: cProfile.Profile | None = None,
    interval_ms: int | None = None,
) -> TaskRun:
    """Runs task 0 of ``connector`` in-process until ``records`` are durable.
    ``profile`` records the task's thread; ``interval_ms`` sets the interval transaction
    boundary (default: one transaction per poll)."""
    name = f"bench-{uuid.uuid4().hex[:8]}"
    state = Path(tempfile.mkdtemp()) / "state.json"
    store_record(state, GenerationRecord(1, 1, 1, mode, "bench", (), "", "bench"))
    settings = TaskSettings(
        source=name,
        task_id=0,
        generation=1,
        mode=mode,
        bootstrap_servers=bootstrap,
        topic=f"{name}.out",
        offsets_topic=f"{name}.offsets",
        transactional_id=f"{name}-0",
        connector_type=connector_type,
        connector_config=config,
        transaction_boundary=(
            TransactionBoundary.POLL if interval_ms is None else TransactionBoundary.INTERVAL
        ),
        **({} if interval_ms is None else {"transaction_interval_ms": interval_ms}),
        # Idempotent runs count records once their offsets are flushed: at the default
        # 1 s cadence a run of a second or two would mostly measure the wait for it.
        offset_flush_interval_ms=OFFSET_FLUSH_MS,
        authority=FileAuthority(path=str(state)),
    )
    stop = threading.Event()
    task_started: list[float] = []
    runner = TaskRunner(
        settings,
        _starts_told(connector, task_started),
        FileGenerationAuthority(str(state)),
        stop,
    )

    def work() -> None:
        if profile is None:
            runner.run()
        else:
            profile.runcall(runner.run)

    thread = threading.Thread(target=work)
    started = time.perf_counter()
    thread.start()
    while runner.metrics.records < records and thread.is_alive():
        stop.wait(0.01)
    ended = time.perf_counter()
    stop.set()
    thread.join()
    (task_start,) = task_started
    return TaskRun(
        runner.metrics.records / (ended - task_start), settings.topic, task_start - started
    )


def steady(samples: Sequence[tuple[float, int]], start: int, end: int) -> float:
    """Counts/s between 10 % and 90 % of the way from ``start`` to ``end``, from
    (time, count) ``samples`` in order: the steady state, so what starting costs (a
    JVM's warm-up, Python's imports, a connector's set-up) and a slow tail count for
    neither side."""
    low = next(s for s in samples if s[1] >= start + (end - start) * 0.1)
    high = next(s for s in samples if s[1] >= start + (end - start) * 0.9)
    if high[0] <= low[0]:
        raise ValueError(f"one sample spans 10-90 % of {start}..{end}: too few to time")
    return (high[1] - low[1]) / (high[0] - low[0])


class OnceflowRun:
    """An `onceflow run` of one KafkaSource: its process, and its manifest, which the
    run watches (``state`` edits ``spec.state`` as a user would)."""

    def __init__(self, process: subprocess.Popen[bytes], manifest: Path, docs: list[Any]) -> None:
        self.process, self.manifest, self.docs = process, manifest, docs

    def state(self, state: str) -> None:
        self.docs[1]["spec"]["state"] = state
        self.manifest.write_text(yaml.safe_dump_all(self.docs))


@contextlib.contextmanager
def onceflow_run(bootstrap: str, name: str, source: dict[str, Any]) -> Iterator[OnceflowRun]:
    """`onceflow run` of one KafkaSource ``name`` (``source``: its spec but the
    pipeline) in an exactly-once Pipeline of the same name, in a process of its own as
    a Connect worker is, until the block ends (SIGTERM, then its state is removed)."""
    manifests = pipeline_with_source(bootstrap, name, name, source)
    state = Path(tempfile.mkdtemp(prefix="onceflow-bench-"))
    (state / "source.yaml").write_text(yaml.safe_dump_all(manifests))
    run = subprocess.Popen(
        [
            *(sys.executable, "-m", "onceflow", "run", str(state / "source.yaml"), "--quiet"),
            *("--bootstrap", bootstrap, "--state-dir", str(state / "run")),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        yield OnceflowRun(run, state / "source.yaml", manifests)
    finally:
        run.send_signal(signal.SIGTERM)
        run.wait(60)
        shutil.rmtree(state, ignore_errors=True)


class ConnectRestError(RuntimeError):
    """A Connect worker's refusal, with its status and what it said (a config's
    problems, a connector it does not know)."""

    def __init__(self, method: str, url: str, status: int, said: str) -> None:
        super().__init__(f"{method} {url}: {status} {said}")
        self.status = status


def connect_rest(url: str, method: str = "GET", body: object | None = None) -> Any:
    """A Kafka Connect worker's REST call; its JSON answer (None when it has none)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            text = answer.read()
    except urllib.error.HTTPError as error:
        said = error.read().decode(errors="replace")
        raise ConnectRestError(method, url, error.code, said) from None
    return json.loads(text) if text else None
