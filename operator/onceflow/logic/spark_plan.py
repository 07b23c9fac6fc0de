"""A SparkJob's lifecycle, written once: given what the job's record says, what its
spec asks and what runs, the one next step. The operator executes the steps against
the SparkJob's status, its driver object (a SparkApplication, or a spark-submit Job)
and its pods; ``onceflow run`` against its state files and a driver process (DESIGN
3.3, 3.4), as ``logic.protocol`` is executed for sources.

The invariants:
- no driver starts while another one could still run a batch on the job's
  checkpoint: a driver is replaced by removing it, confirming its pods gone (and those
  a deleted job left on the same checkpoint), and only then submitting;
- a driver writes the sink only with the producers the record names, and a new set is
  recorded only once every id of the old one is fenced (``logic.sink_handover``);
- a state (``spec.state``) and an input reset are recorded before the driver is
  touched (``logic.spark_state``, ``logic.input_reset``).
Whoever runs the plan (the operator, ``onceflow run``) and crashes after any step
finds the same record and repeats the remaining steps; each is idempotent. What a pass
learns without recording it (settings written, the previous driver gone) is looked at
again by the next pass.

Order: record a new input reset -> the state's steps (a job held still ends there)
-> stop the driver another ``spec.submitter`` made -> hand the sink over to a new set
of producers -> write the driver's settings -> restart a driver whose spec changed
(``logic.spark_changes``) -> wait until the previous driver is gone -> submit ->
restart a streaming driver that exited -> keep.
"""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.api.input_reset import InputReset, InputResetStatus
from onceflow.api.pipeline import WorkloadState
from onceflow.api.spark import Sink
from onceflow.logic.input_reset import input_reset_outcome
from onceflow.logic.sink_handover import (
    FenceSink,
    KeepSink,
    RecordSink,
    SinkProducers,
    StopDriver,
    sink_handover,
)
from onceflow.logic.spark_changes import SpecChange, classify_change
from onceflow.logic.spark_state import (
    FenceSinkIds,
    HeldStill,
    RecordState,
    RemoveDriver,
    Run,
    WaitPodsGone,
    spark_state_step,
)

COMPLETED = "COMPLETED"
"""A driver's state once its query ended (the Spark operator's word; the spark-submit
Job's is translated to it)."""


@dataclass(frozen=True)
class SparkDesired:
    """What the job's spec (and its Pipeline's) asks for."""

    state: WorkloadState
    """The job's spec.state combined with its Pipeline's."""
    spec: object
    """What a driver would be started from now (``logic.spark_changes``)."""
    producers: SinkProducers | None
    """The Kafka sink's producers; None for any other sink."""
    sink: Sink
    topics: tuple[str, ...]
    input_reset: InputReset | None = None
    available_now: bool = False
    """An ``availableNow`` run ends by itself once it drained its input."""


@dataclass(frozen=True)
class SparkRecord:
    """What the job's record says: its status, or ``onceflow run``'s state."""

    state: WorkloadState | None
    """None for a record from before states (running)."""
    stop_fenced: bool
    producers: SinkProducers | None
    """The sink's producers last recorded (None: none yet)."""
    input_reset: InputResetStatus | None = None
    fence_wait_s: float = 0.0
    """How long fencing must still wait after a failure (0: it may be tried now)."""


@dataclass(frozen=True)
class DriverSeen:
    """The job's driver: its object under the operator, its process under ``run``."""

    spec: object
    """What it was started from, compared with ``SparkDesired.spec``."""
    state: str | None = None
    """In the Spark operator's words (RUNNING, COMPLETED, ...); None where nothing says
    it (a process, whose exits its supervisor's restart policy handles)."""


@dataclass(frozen=True)
class SparkRunning:
    """What runs, and what the current pass has done already."""

    driver: DriverSeen | None
    pods: bool
    """Pods of the job are there (a removed driver's may still finish a batch)."""
    other_submission: bool
    """A driver object of the job made by the other ``spec.submitter``."""
    settings_written: bool
    """The driver's settings are where it reads them (the operator writes its
    ConfigMap once a pass: it cannot tell a stale one without reading it; a process
    is given its settings as it starts)."""
    previous_gone: bool
    """Confirmed in this pass: no pod of an earlier driver of the job, or of a deleted
    job on its checkpoint, is left (a stopped process is gone already)."""


@dataclass(frozen=True)
class SparkObservation:
    """What the plan is asked with, about the job named ``job``."""

    job: str
    desired: SparkDesired
    record: SparkRecord
    running: SparkRunning


@dataclass(frozen=True)
class RecordInputReset:
    """Persist what becomes of the spec's new input reset (refused or applied)."""

    outcome: InputResetStatus


@dataclass(frozen=True)
class BackOff:
    """Come back in ``delay_s``: fencing failed, and ``fence`` is tried again then."""

    delay_s: float
    fence: FenceSinkIds | FenceSink


@dataclass(frozen=True)
class SwitchSubmitter:
    """Delete the driver object the other ``spec.submitter`` made, and come back once
    it is gone: only one submitter's driver may exist."""


@dataclass(frozen=True)
class _SinkSettled:
    """A step once the sink is settled: ``sink`` are the producers the driver runs
    with (None: no Kafka sink). The record names them from then on (one from before
    prefixes were recorded too, so that a later rename is seen), and no fencing waits
    any more (a handover given up, its change reverted, leaves no backoff)."""

    sink: SinkProducers | None


@dataclass(frozen=True)
class WriteSettings(_SinkSettled):
    """Write the driver's settings (with ``sink``'s previous prefix) where it reads
    them, before anything starts or replaces a driver."""


@dataclass(frozen=True)
class Restart(_SinkSettled):
    """Remove the driver, whose spec changed (``SpecChange.RESTART``), and come back:
    its successor is submitted once it is gone."""


@dataclass(frozen=True)
class WaitPreviousDriver(_SinkSettled):
    """Delete what is left of earlier drivers on the checkpoint, and wait until it is
    gone; once nothing is, the driver may be submitted."""


@dataclass(frozen=True)
class Submit(_SinkSettled):
    """Start the driver with ``sink``'s producers."""


@dataclass(frozen=True)
class DriverExited(_SinkSettled):
    """The streaming driver's query ended (a stop from outside, taken as done by its
    submitter): remove it, and come back to start it again from its checkpoint."""


@dataclass(frozen=True)
class Keep(_SinkSettled):
    """Nothing to do: the driver runs (or starts) as the spec asks."""


SettlingStep = (
    RecordInputReset
    | RecordState
    | RemoveDriver
    | WaitPodsGone
    | FenceSinkIds
    | HeldStill
    | BackOff
    | SwitchSubmitter
    | RecordSink
    | StopDriver
    | FenceSink
)
"""The steps before the sink is settled: the record, the state, the sink handover."""

DriverStep = WriteSettings | Restart | WaitPreviousDriver | Submit | DriverExited | Keep
"""The steps once the sink is settled: the driver's settings, then the driver kept,
replaced or started."""

SparkStep = SettlingStep | DriverStep


def next_spark_step(observed: SparkObservation) -> SparkStep:
    """The one next step, in the module's order."""
    desired, record, running = observed.desired, observed.record, observed.running
    reset = input_reset_outcome(
        desired.input_reset,
        record.input_reset,
        desired.state,
        record.state is WorkloadState.STOPPED and record.stop_fenced,
        desired.sink,
        list(desired.topics),
    )
    if reset is not None:
        return RecordInputReset(reset)
    held = spark_state_step(
        desired.state,
        record.state,
        record.stop_fenced,
        driver=running.driver is not None,
        pods=running.pods,
        sink_ids=_recorded_ids(observed),
    )
    if isinstance(held, FenceSinkIds) and held.ids and record.fence_wait_s:
        return BackOff(record.fence_wait_s, held)
    if not isinstance(held, Run):
        return held
    if running.driver is None and running.other_submission:
        return SwitchSubmitter()
    change = classify_change(
        record.producers,
        desired.producers,
        running.driver.spec if running.driver else None,
        desired.spec,
        driver_runs=running.driver is not None,
    )
    if change is SpecChange.HAND_OVER:
        return _hand_over(observed)
    return _drive(observed, change)


def _recorded_ids(observed: SparkObservation) -> tuple[str, ...]:
    """The ids a stop fences: the recorded producers' while the sink is Kafka's."""
    recorded = observed.record.producers
    if recorded is None or observed.desired.producers is None:
        return ()
    return recorded.ids(observed.job)


def _hand_over(observed: SparkObservation) -> RecordSink | StopDriver | FenceSink | BackOff:
    record, desired = observed.record, observed.desired
    assert desired.producers is not None, "only a Kafka sink is handed over"
    step = sink_handover(
        record.producers, desired.producers, observed.running.driver is not None, observed.job
    )
    assert not isinstance(step, KeepSink), "a change of sink identity is not kept"
    if isinstance(step, FenceSink) and record.fence_wait_s:
        return BackOff(record.fence_wait_s, step)
    return step


def _drive(observed: SparkObservation, change: SpecChange) -> DriverStep:
    """The sink is settled: the driver is kept, replaced, or started."""
    running = observed.running
    # Settled, a Kafka sink's recorded producers are the wanted set.
    sink = observed.record.producers if observed.desired.producers else None
    if not running.settings_written:
        return WriteSettings(sink)
    if change is SpecChange.RESTART:
        return Restart(sink)
    if running.driver is None:
        return Submit(sink) if running.previous_gone else WaitPreviousDriver(sink)
    if running.driver.state == COMPLETED and not observed.desired.available_now:
        return DriverExited(sink)
    return Keep(sink)
