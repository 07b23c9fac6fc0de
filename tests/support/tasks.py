"""Run real ``onceflow task`` processes for tests, planned by the production code path
(manifests -> connector task configs -> DesiredTasks -> TaskSettings)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onceflow.api import KafkaSource, Pipeline
from onceflow.api.task import FileAuthority, TaskSettings
from onceflow.connectors.registry import load_connector
from onceflow.eos.offsets import read_offsets
from onceflow.logic.generations import GenerationRecord
from onceflow.logic.resolve import resolve_source
from onceflow.model.tasks import DesiredTasks
from onceflow.standalone.state import store_record
from tests.support.testbed import ROOT


def plan(
    bootstrap: str,
    *,
    mode: str = "enabled",
    tasks_max: int = 3,
    connector: str = "sequence",
    config: dict[str, Any] | None = None,
    boundary: str = "poll",
    interval_ms: int | None = None,
    name: str | None = None,
    support: str | None = None,
) -> DesiredTasks:
    """A Pipeline + KafkaSource with fresh topic names, planned like the operator does."""
    name = name or f"src-{uuid.uuid4().hex[:6]}"
    pipeline = Pipeline.model_validate(
        {
            "metadata": {"name": f"p-{name}"},
            "spec": {"kafka": {"bootstrapServers": bootstrap}, "exactlyOnce": mode},
        }
    )
    spec: dict[str, Any] = {
        "pipeline": f"p-{name}",
        "topic": f"{name}.out",
        "tasksMax": tasks_max,
        "transactionBoundary": boundary,
        "connector": {"type": connector, "config": config or {}},
    }
    if interval_ms is not None:
        spec["transactionBoundaryIntervalMs"] = interval_ms
    if support is not None:
        spec["exactlyOnceSupport"] = support
    source = KafkaSource.model_validate({"metadata": {"name": name}, "spec": spec})
    desired = resolve_source(source, pipeline, load_connector, where="in the test")
    assert not isinstance(desired, list), desired
    return desired


@dataclass
class TaskProcess:
    """One ``python -m onceflow task`` child with its settings file and log."""

    settings: TaskSettings
    workdir: Path
    process: subprocess.Popen[str] | None = None
    progress: list[dict[str, Any]] = field(default_factory=list)
    log_start: int = 0
    """Where the latest run's part of the log begins."""

    @property
    def log_path(self) -> Path:
        return self.workdir / f"g{self.settings.generation}-task{self.settings.task_id}.log"

    def start(self) -> TaskProcess:
        path = self.workdir / f"g{self.settings.generation}-task{self.settings.task_id}.json"
        path.write_text(json.dumps(self.settings.to_wire()))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.process = subprocess.Popen(
            [sys.executable, "-m", "onceflow", "task", "--config", str(path)],
            stdout=subprocess.PIPE,
            stderr=self.log_path.open("a"),
            text=True,
            cwd=ROOT,
            env=env,
        )
        return self

    def log_of_this_run(self) -> str:
        """What the process last started wrote (the log file is shared by its runs)."""
        with self.log_path.open("rb") as log:
            log.seek(self.log_start)
            return log.read().decode(errors="replace")

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.wait(30)

    def terminate(self, timeout_s: float = 30) -> int:
        self.signal(signal.SIGTERM)
        return self.wait(timeout_s)

    def wait(self, timeout_s: float) -> int:
        assert self.process is not None
        code = self.process.wait(timeout_s)
        if self.process.stdout:
            self.progress.extend(
                json.loads(line) for line in self.process.stdout.read().splitlines() if line
            )
        return code

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def write_generation(path: Path, generation: int, task_count: int, mode: str) -> None:
    """What the supervisor records before a generation's tasks start."""
    from onceflow.api import ExactlyOnceMode

    store_record(
        path,
        GenerationRecord(
            generation,
            generation,
            task_count,
            ExactlyOnceMode(mode),
            fingerprint="test",
            ids=(),
            offsets_topic="",
            incarnation="test",
        ),
    )


def generation_settings(
    desired: DesiredTasks, generation: int, authority_path: Path
) -> list[TaskSettings]:
    return desired.settings(generation, FileAuthority(path=str(authority_path)))


def stored_offsets(desired: DesiredTasks) -> dict[bytes, dict[str, Any]]:
    """``{source partition: its last committed source offset}`` from the offsets store."""
    settings = desired.settings(1, FileAuthority(path="-"))[0]
    try:
        stored = read_offsets(
            settings.bootstrap_servers,
            settings.offsets_topic,
            settings.offsets_owner,
            legacy_owner=settings.source,
        )
    except LookupError:  # no task has created the offsets topic yet
        return {}
    return {key: dict(value) for key, value in stored.by_partition.items()}


def committed_offsets(desired: DesiredTasks) -> dict[str, int]:
    """``{stream: last committed seq}`` of a sequence source."""
    return {
        json.loads(key)["stream"]: int(value["seq"])
        for key, value in stored_offsets(desired).items()
    }


def only_task(desired: DesiredTasks, workdir: Path) -> TaskSettings:
    """Settings of the single task of generation 1, with its authority file written."""
    authority = workdir / "state.json"
    write_generation(authority, 1, desired.task_count, desired.mode.value)
    (settings,) = generation_settings(desired, 1, authority)
    return settings
