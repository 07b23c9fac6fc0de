"""SparkJobs under ``onceflow run``: one local driver per job.

The driver is the same ``onceflow spark-job`` a driver pod runs, in local mode. What
becomes of it is the SparkJob plan's (``logic.spark_plan``), as for the operator: the
state and input reset recorded first, then a change of the Kafka sink's partition
count or prefix stops the driver and fences the old producers' ids before the new
driver starts, and any other change of the planned job restarts it with the new
settings. The state lives in memory (the run's children end with it); the sink's
producers and the input reset in state files. A driver that dies is restarted from its
checkpoint by its child process's restart policy, as the Spark operator's
``restartPolicy: Always`` would.
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
from onceflow.logic.input_reset import with_input_reset
from onceflow.logic.resolve import IN_MANIFESTS, resolve_spark_job, transform_code_problem
from onceflow.logic.sink_handover import FenceSink, RecordSink, SinkProducers, StopDriver
from onceflow.logic.spark_plan import (
    BackOff,
    DriverSeen,
    Keep,
    RecordInputReset,
    Restart,
    SparkDesired,
    SparkObservation,
    SparkRecord,
    SparkRunning,
    SparkStep,
    Submit,
    next_spark_step,
)
from onceflow.logic.spark_state import (
    SPARK_STATE_CHANGES,
    FenceSinkIds,
    HeldStill,
    RecordState,
    RemoveDriver,
)
from onceflow.standalone.children import ChildProcess
from onceflow.standalone.state import workload_file, write_json_atomically

FENCE_RETRY_S = 5.0
# The longest walk of one tick: reset, state, stop, fence, record, start.
MAX_STEPS = 8


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

    @property
    def raises_isolation(self) -> bool:
        """The running driver reads uncommitted and the planned one reads committed: it
        must switch before any producer of the pipeline goes transactional."""
        return (
            self.running is not None
            and self.planned.settings.mode.reads_committed
            and not self.running.settings.mode.reads_committed
        )

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

    def _observed(self, now: float) -> SparkObservation:
        """The plan's view of the job: the planned job, this supervisor's memory and
        state files, and the driver process."""
        kafka, prefix = self.settings.sink.kafka, self.settings.transactional_id_prefix
        return SparkObservation(
            job=self.name,
            desired=SparkDesired(
                state=self.planned.state,
                spec=self.planned,
                producers=SinkProducers(prefix, kafka.partitions) if kafka else None,
                sink=self.settings.sink,
                topics=tuple(self.settings.topics),
                input_reset=self.planned.input_reset,
                available_now=self.settings.trigger.available_now,
            ),
            record=SparkRecord(
                state=self.state,
                stop_fenced=self.stop_fenced,
                producers=self._recorded_sink() if kafka else None,
                input_reset=self._recorded_reset(),
                fence_wait_s=max(0.0, self.next_fence_attempt - now),
            ),
            running=SparkRunning(
                driver=None if self.driver is None else DriverSeen(self.running),
                # A driver process is gone once stopped, with its executors (local
                # mode), and reads its settings as it starts.
                pods=False,
                other_submission=False,
                settings_written=True,
                previous_gone=True,
            ),
        )

    def reconcile(self, now: float) -> None:
        settings = self._settings_to_start(now)
        if settings is not None:
            self._start(settings)
        if self.driver is not None:
            line = self.driver.supervise(now)
            if line:
                self.say(f"{self.name}: {line}")
                pid = {"driver": self.driver.pid} if self.driver.pid else {}
                write_json_atomically(self._file("pids.json"), pid)

    def _settings_to_start(self, now: float) -> SparkJobSettings | None:
        """Walks the plan (``logic.spark_plan``) up to a driver's start: the settings to
        start it with, the sink's producers handed over and recorded; None when none
        starts now (the driver runs as planned, the job is held, fencing waits)."""
        # Bounded like the operator's pass: reset, state, stop, fence, start.
        for _ in range(MAX_STEPS):
            step = next_spark_step(self._observed(now))
            if isinstance(step, Submit):
                return self._submitted(step.sink)
            if not self._execute(step, now):
                return None
        self.say(f"{self.name}: no start after {MAX_STEPS} steps of its plan; looking again")
        return None

    def _execute(self, step: SparkStep, now: float) -> bool:
        """Runs one step; False when the walk ends here (nothing more to do now, or
        fencing failed)."""
        if isinstance(step, RecordInputReset):
            outcome = step.outcome
            write_json_atomically(self.reset_file, outcome.to_wire())
            self.say(f"{self.name}: input reset {outcome.id} {outcome.result}: {outcome.message}")
        elif isinstance(step, RecordState):
            self.state, self.stop_fenced = step.state, False
            self.say(f"{self.name}: {SPARK_STATE_CHANGES[step.state][1]}")
        elif isinstance(step, RemoveDriver):  # held: RecordState has said why
            self.stop()
        elif isinstance(step, (StopDriver, Restart)):
            self.say(f"{self.name}: settings changed; stopping the driver")
            self.stop()
        elif isinstance(step, FenceSinkIds):
            if not self._fence(step.ids, now, "held"):
                return False
            self.stop_fenced = True
            self.say(f"{self.name}: {self.state}; the checkpoint is kept")
        elif isinstance(step, RecordSink):
            self._record_sink(step.producers)
        elif isinstance(step, FenceSink):
            if not self._fence(step.ids, now, step.reason):
                return False
            self._record_sink(step.then)
        else:
            # What a process never gives rise to -- pods that outlive it, another
            # submitter, settings written apart from a start, a driver state -- and its
            # observation rules out.
            assert isinstance(step, (Keep, HeldStill, BackOff)), f"{step} under onceflow run"
            return False  # the driver runs as planned, the job is held, or fencing waits
        return True

    def _submitted(self, sink: SinkProducers | None) -> SparkJobSettings:
        """The settings a driver starts with: the sink's producers (the record is
        written again, naming the prefix a file from before prefixes lacked) and the
        input reset in force."""
        settings = self.settings
        if sink is not None:
            self._record_sink(sink)
            update = {"previous_transactional_id_prefix": sink.previous_prefix}
            settings = settings.model_copy(update=update)
        return with_input_reset(settings, self._recorded_reset())

    def _start(self, settings: SparkJobSettings) -> None:
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

    def _record_sink(self, producers: SinkProducers) -> None:
        write_json_atomically(
            self.sink_file,
            {
                "partitions": producers.partitions,
                "prefix": producers.prefix,
                "previousPrefix": producers.previous_prefix,
            },
        )

    def stop(self) -> None:
        if self.driver is not None:
            self.driver.stop()
        self.driver = None
        self.running = None
