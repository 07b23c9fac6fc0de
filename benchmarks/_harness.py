"""Shared pieces of the benchmarks: an in-process task run and a fresh topic."""

from __future__ import annotations

import cProfile
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from onceflow.api import ExactlyOnceMode, TransactionBoundary
from onceflow.api.connector import SourceConnector
from onceflow.api.task import FileAuthority, TaskSettings
from onceflow.connectors.sequence import SequenceConnector
from onceflow.logic.generations import GenerationRecord
from onceflow.runtime.authority import FileGenerationAuthority
from onceflow.runtime.task import TaskRunner
from onceflow.standalone.state import store_record

OFFSET_FLUSH_MS = 100
JSON_OVERHEAD = 30  # bytes of {"stream":"s0","seq":12345} around the padding


def run_source(
    bootstrap: str,
    mode: ExactlyOnceMode,
    records: int,
    record_bytes: int,
    batch: int,
    profile: cProfile.Profile | None = None,
    interval_ms: int | None = None,
) -> tuple[float, str]:
    """Runs one sequence task in-process until ``records`` are durable; returns
    (records per second, topic). ``interval_ms``: commit on that interval instead of
    after every poll."""
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
) -> tuple[float, str]:
    """Runs task 0 of ``connector`` in-process until ``records`` are durable; returns
    (records per second, topic). ``profile`` records the task's thread; ``interval_ms``
    sets the interval transaction boundary (default: one transaction per poll)."""
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
    runner = TaskRunner(settings, connector, FileGenerationAuthority(str(state)), stop)

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
    elapsed = time.perf_counter() - started
    stop.set()
    thread.join()
    return runner.metrics.records / elapsed, settings.topic
