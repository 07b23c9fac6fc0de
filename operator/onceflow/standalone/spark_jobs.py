"""SparkJobs under ``onceflow run``: one local driver per job.

The driver is the same ``onceflow spark-job`` a driver pod runs, in local mode. It
restarts from its checkpoint when it dies (as the Spark operator's ``restartPolicy:
Always`` would), is restarted with new settings when the manifests change, and a
change of the Kafka sink's partition count or prefix fences the old producers' ids
before the new driver starts (``logic.sink_handover``), as the operator does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from onceflow.api import Pipeline
from onceflow.api.driver import SparkJobSettings
from onceflow.api.errors import Problem
from onceflow.api.input_reset import InputReset, InputResetStatus
from onceflow.api.pipeline import WorkloadState, effective_state
from onceflow.api.spark import SparkJob
from onceflow.eos.fencing import fence_transactional_ids
from onceflow.logic.input_reset import input_reset_outcome, with_input_reset
from onceflow.logic.resolve import IN_MANIFESTS, resolve_spark_job, transform_code_problem
from onceflow.logic.sink_handover import FenceSink, SinkProducers, StopDriver, sink_handover
from onceflow.logic.spark_state import (
    SPARK_STATE_CHANGES,
    FenceSinkIds,
    RecordState,
    RemoveDriver,
    Run,
    spark_state_step,
)
from onceflow.standalone.children import ChildProcess
from onceflow.standalone.state import workload_file, write_json_atomically

FENCE_RETRY_S = 5.0


@dataclass(frozen=True)
class PlannedSparkJob:
    settings: SparkJobSettings
    dsn: str | None = None
    """The Postgres sink's DSN, written (0600) to ``settings.postgres_dsn_file`` only
    when the driver starts: planning writes nothing."""
    transform_files: Mapping[str, str] | None = None
    """transform.configMap's files, written to ``settings.transform_dir`` likewise."""
    state: WorkloadState = WorkloadState.RUNNING
    """The job's spec.state combined with its Pipeline's."""
    input_reset: InputReset | None = field(default=None, compare=False)
    """Taken when the job is held (``logic.input_reset``): a new one is no reason to
    restart a running driver, whose settings it does not change until applied."""


def plan_spark_job(
    job: SparkJob,
    pipeline: Pipeline | None,
    source_topics: Mapping[str, str],
    secrets: Mapping[str, Mapping[str, str]],
    config_maps: Mapping[str, Mapping[str, str]],
    *,
    bootstrap_override: str | None,
    state_dir: Path,
) -> PlannedSparkJob | list[Problem]:
    """The driver's settings with local paths, or the problems (field and fix) that
    prevent them."""
    settings = resolve_spark_job(job, pipeline, source_topics, where=IN_MANIFESTS, secrets=secrets)
    code = job.spec.transform.config_map
    files = config_maps.get(code) if code else None
    missing_code = transform_code_problem(job, files, IN_MANIFESTS)
    if missing_code:
        return [*(settings if isinstance(settings, list) else []), missing_code]
    if isinstance(settings, list):
        return settings
    postgres = job.spec.sink.postgres
    dsn = secrets[postgres.secret_ref.name]["dsn"] if postgres else None
    namespace, name, here = job.metadata.namespace, job.metadata.name, state_dir.resolve()
    update: dict[str, object] = {
        "checkpoint_location": job.spec.checkpoint.path
        or str(workload_file(here, namespace, name, "checkpoint")),
        "postgres_dsn_file": None,
        # The drivers of one run share the machine: none takes a fixed /metrics port.
        "metrics_port": 0,
    }
    if files is not None:
        update["transform_dir"] = str(workload_file(here, namespace, name, "transform"))
    if bootstrap_override:
        update["bootstrap_servers"] = bootstrap_override
    if dsn is not None:
        update["postgres_dsn_file"] = str(workload_file(here, namespace, name, "dsn"))
    state = effective_state(pipeline.spec.state, job.spec.state) if pipeline else job.spec.state
    return PlannedSparkJob(
        settings.model_copy(update=update), dsn, files, state, job.spec.input_reset
    )


@dataclass
class SparkJobSupervisor:
    """Keeps one job's driver running with the settings last planned."""

    planned: PlannedSparkJob
    state_dir: Path
    say: Callable[[str], None]
    driver: ChildProcess | None = None
    running: PlannedSparkJob | None = None
    next_fence_attempt: float = 0.0
    state: WorkloadState = WorkloadState.RUNNING
    """The state last taken: the run's children end with it, so it lives in memory."""
    stop_fenced: bool = False

    @property
    def settings(self) -> SparkJobSettings:
        return self.planned.settings

    @property
    def name(self) -> str:
        return self.settings.job

    def _file(self, what: str) -> Path:
        return workload_file(self.state_dir, self.settings.namespace, self.settings.job, what)

    @property
    def sink_file(self) -> Path:
        """The sink producers last started with: whose ids to fence on a change."""
        return self._file("sink.json")

    @property
    def reset_file(self) -> Path:
        """The input reset in force (its checkpoint): it outlives the run."""
        return self._file("input-reset.json")

    def _recorded_reset(self) -> InputResetStatus | None:
        if not self.reset_file.exists():
            return None
        return InputResetStatus.model_validate(json.loads(self.reset_file.read_text()))

    def _input_reset(self) -> None:
        """Records what becomes of a new spec.inputReset (``logic.input_reset``)."""
        outcome = input_reset_outcome(
            self.planned.input_reset,
            self._recorded_reset(),
            self.planned.state,
            self.state is WorkloadState.STOPPED and self.stop_fenced,
            self.settings.sink,
            self.settings.topics,
        )
        if outcome is not None:
            write_json_atomically(self.reset_file, outcome.to_wire())
            self.say(f"{self.name}: input reset {outcome.id} {outcome.result}: {outcome.message}")

    @property
    def raises_isolation(self) -> bool:
        """The running driver reads uncommitted and the planned one reads committed: it
        must switch before any producer of the pipeline goes transactional."""
        return (
            self.running is not None
            and self.planned.settings.mode.reads_committed
            and not self.running.settings.mode.reads_committed
        )

    def _held(self, now: float) -> bool:
        """Walks ``logic.spark_state``; True while the job is paused or stopped."""
        recorded = self._recorded_sink() if self.settings.sink.kafka else None
        while True:
            step = spark_state_step(
                self.planned.state,
                self.state,
                self.stop_fenced,
                driver=self.driver is not None,
                pods=False,  # a stopped driver process is gone
                sink_ids=recorded.ids(self.name) if recorded else (),
            )
            if isinstance(step, Run):
                return False
            if isinstance(step, RecordState):
                self.state, self.stop_fenced = step.state, False
                self.say(f"{self.name}: {SPARK_STATE_CHANGES[step.state][1]}")
            elif isinstance(step, RemoveDriver):
                self.stop()
            elif isinstance(step, FenceSinkIds):
                if now < self.next_fence_attempt or not self._fence(step.ids, now, "held"):
                    return True
                self.stop_fenced = True
                self.say(f"{self.name}: {self.state}; the checkpoint is kept")
            else:
                return True

    def _fence(self, ids: tuple[str, ...], now: float, why: str) -> bool:
        if not ids:
            return True
        report = fence_transactional_ids(
            self.settings.bootstrap_servers, list(ids), extra=self.settings.kafka_config
        )
        if not report.ok:
            self.next_fence_attempt = now + FENCE_RETRY_S
            self.say(f"{self.name}: {report.summary()}; retrying in {FENCE_RETRY_S:.0f}s")
            return False
        self.say(f"{self.name}: {why}: {report.summary()}")
        return True

    def reconcile(self, now: float) -> None:
        if self.driver is not None and self.running != self.planned:
            self.say(f"{self.name}: settings changed; stopping the driver")
            self.stop()
        self._input_reset()
        if self._held(now):
            return
        if self.driver is None:
            if now < self.next_fence_attempt:
                return
            settings = self._hand_over_sink(now)
            if settings is None:
                return
            settings = with_input_reset(settings, self._recorded_reset())
            path = self._file("settings.json")
            write_json_atomically(path, settings.to_wire())
            self._write_dsn()
            self._write_transform_files()
            self.driver = ChildProcess("driver", "spark-job", path, self._file("log"))
            self.running = self.planned
            self.say(
                f"{self.name}: Spark driver in mode {self.settings.mode} "
                f"(isolation {self.settings.isolation_level}), log {self.driver.log_path}"
            )
        line = self.driver.supervise(now)
        if line:
            self.say(f"{self.name}: {line}")
            pid = {"driver": self.driver.pid} if self.driver.pid else {}
            write_json_atomically(self._file("pids.json"), pid)

    def _write_dsn(self) -> None:
        dsn_file = self.settings.postgres_dsn_file
        if self.planned.dsn is None or dsn_file is None:
            return
        path = Path(dsn_file)
        path.touch(mode=0o600)
        path.write_text(self.planned.dsn)

    def _write_transform_files(self) -> None:
        directory = self.settings.transform_dir
        if self.planned.transform_files is None or directory is None:
            return
        Path(directory).mkdir(parents=True, exist_ok=True)
        for name, text in self.planned.transform_files.items():
            (Path(directory) / name).write_text(text)  # before the driver starts

    def _recorded_sink(self) -> SinkProducers | None:
        if not self.sink_file.exists():
            return None
        data = json.loads(self.sink_file.read_text())
        # A file from before prefixes were recorded: the prefix was the current one.
        return SinkProducers(
            data.get("prefix") or self.settings.transactional_id_prefix,
            int(data["partitions"]),
            data.get("previousPrefix"),
        )

    def _hand_over_sink(self, now: float) -> SparkJobSettings | None:
        """The settings to start the driver with once the sink's producers are handed
        over (``logic.sink_handover``; the driver is stopped already), or None while
        fencing the old ones fails."""
        kafka = self.settings.sink.kafka
        if kafka is None:
            return self.settings
        wanted = SinkProducers(self.settings.transactional_id_prefix, kafka.partitions)
        step = sink_handover(self._recorded_sink(), wanted, False, self.name)
        assert not isinstance(step, StopDriver), "the driver is stopped before a handover"
        if isinstance(step, FenceSink) and not self._fence(step.ids, now, step.reason):
            return None
        producers = step.then if isinstance(step, FenceSink) else step.producers
        write_json_atomically(
            self.sink_file,
            {
                "partitions": producers.partitions,
                "prefix": producers.prefix,
                "previousPrefix": producers.previous_prefix,
            },
        )
        return self.settings.model_copy(
            update={"previous_transactional_id_prefix": producers.previous_prefix}
        )

    def stop(self) -> None:
        if self.driver is not None:
            self.driver.stop()
        self.driver = None
        self.running = None
