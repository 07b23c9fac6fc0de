"""A SparkJob's ``spec.state`` as steps, written once for the operator and ``onceflow
run``: recorded before anything is removed, then the driver removed, its pods
confirmed gone, the Kafka sink's transactional ids fenced, and "stop fenced" recorded.

A Structured Streaming query cannot hold still the way a source task can (its driver
plans the next batch the moment the last one ends), so ``paused`` and ``stopped`` both
end the driver and keep the checkpoint, as the Flink operator's ``suspended`` does; the
difference is only what status says and which changes are allowed while held (a reset
of the input position needs ``stopped``). ``running`` again submits the driver, which
resumes from its checkpoint with the recorded sink producers.
"""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.api.pipeline import WorkloadState


@dataclass(frozen=True)
class RecordState:
    state: WorkloadState


@dataclass(frozen=True)
class RemoveDriver:
    """Delete the driver object (the application or the Job)."""


@dataclass(frozen=True)
class WaitPodsGone:
    """The driver's and executors' pods are still there: they may finish a batch."""


@dataclass(frozen=True)
class FenceSinkIds:
    """Fence these (the Kafka sink's recorded ids), then record "stop fenced"."""

    ids: tuple[str, ...]


@dataclass(frozen=True)
class HeldStill:
    """Paused or stopped, and nothing of the job can write."""


@dataclass(frozen=True)
class Run:
    """Running: the usual pass (submit, restart, hand over) goes on."""


SparkStateStep = RecordState | RemoveDriver | WaitPodsGone | FenceSinkIds | HeldStill | Run


def spark_state_step(
    desired: WorkloadState,
    recorded: WorkloadState | None,
    stop_fenced: bool,
    *,
    driver: bool,
    pods: bool,
    sink_ids: tuple[str, ...],
) -> SparkStateStep:
    """``recorded``: None for a status from before states (running). ``sink_ids``: the
    exactly-once Kafka sink's recorded ids, () for any other sink."""
    if (recorded or WorkloadState.RUNNING) is not desired:
        return RecordState(desired)
    if desired is WorkloadState.RUNNING:
        return Run()
    if driver:
        return RemoveDriver()
    if pods:
        return WaitPodsGone()
    if not stop_fenced:
        return FenceSinkIds(sink_ids)
    return HeldStill()


SPARK_STATE_CHANGES: dict[WorkloadState, tuple[str, str]] = {
    WorkloadState.RUNNING: ("Resuming", "running again: the driver resumes from its checkpoint"),
    WorkloadState.PAUSED: ("Pausing", "paused: the driver ends, the checkpoint stays"),
    WorkloadState.STOPPED: ("Stopping", "stopping: the driver ends, the checkpoint stays"),
}
"""The reason and message of a recorded state change, before it took hold."""
