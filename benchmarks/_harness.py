"""Shared pieces of the benchmarks: an in-process task run and a fresh topic."""

from __future__ import annotations

import copy
import cProfile
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, NamedTuple

from onceflow.api import ExactlyOnceMode, TransactionBoundary
from onceflow.api.connector import SourceConnector
from onceflow.api.task import FileAuthority, TaskSettings
from onceflow.connectors.sequence import SequenceConnector
from onceflow.logic.generations import GenerationRecord
from onceflow.runtime.authority import FileGenerationAuthority
from onceflow.runtime.task import TaskRunner
from onceflow.standalone.state import store_record

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
