"""A SparkJob's spec.state as steps: recorded first, then the driver, its pods, the
sink's ids; a crash after any step repeats what is left and never skips ahead."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from onceflow.api.pipeline import WorkloadState
from onceflow.logic.spark_state import (
    FenceSinkIds,
    HeldStill,
    RecordState,
    RemoveDriver,
    Run,
    SparkStateStep,
    WaitPodsGone,
    spark_state_step,
)

RUNNING, PAUSED, STOPPED = WorkloadState.RUNNING, WorkloadState.PAUSED, WorkloadState.STOPPED
IDS = ("p/sink/job/0", "p/sink/job/1")


@pytest.mark.parametrize(
    ("desired", "recorded", "fenced", "driver", "pods", "expected"),
    [
        (STOPPED, RUNNING, False, True, True, RecordState(STOPPED)),
        (STOPPED, None, False, True, True, RecordState(STOPPED)),  # a status from before
        (STOPPED, STOPPED, False, True, True, RemoveDriver()),
        (STOPPED, STOPPED, False, False, True, WaitPodsGone()),
        (STOPPED, STOPPED, False, False, False, FenceSinkIds(IDS)),
        (STOPPED, STOPPED, True, False, False, HeldStill()),
        (PAUSED, STOPPED, True, False, False, RecordState(PAUSED)),
        (PAUSED, PAUSED, False, False, False, FenceSinkIds(IDS)),
        (RUNNING, STOPPED, True, False, False, RecordState(RUNNING)),
        (RUNNING, RUNNING, False, True, True, Run()),
        (RUNNING, None, False, True, True, Run()),
    ],
)
def test_each_situation_has_one_next_step(
    desired: WorkloadState,
    recorded: WorkloadState | None,
    fenced: bool,
    driver: bool,
    pods: bool,
    expected: object,
) -> None:
    step = spark_state_step(desired, recorded, fenced, driver=driver, pods=pods, sink_ids=IDS)
    assert step == expected


@dataclass
class Job:
    """A job's driver, its pods and the sink's producers, as the steps see them."""

    state: WorkloadState | None = RUNNING
    fenced: bool = False
    driver: bool = True
    pods: int = 2
    live_producers: set[str] = field(default_factory=lambda: set(IDS))

    def walk(
        self,
        desired: WorkloadState,
        crash_at: int | None,
        next_step: Callable[..., SparkStateStep] = spark_state_step,
    ) -> list[str]:
        taken: list[str] = []
        for count in range(20):
            step = next_step(
                desired, self.state, self.fenced, driver=self.driver, pods=self.pods > 0,
                sink_ids=IDS,
            )  # fmt: skip
            taken.append(type(step).__name__)
            if isinstance(step, (HeldStill, Run)):
                return taken
            if isinstance(step, RecordState):
                if count == crash_at:
                    continue  # the write never landed: recorded again
                self.state, self.fenced = step.state, False
            elif isinstance(step, RemoveDriver):
                self.driver = False
            elif isinstance(step, WaitPodsGone):
                # Pod objects go; a process on a lost node may not: only fencing ends
                # its producers.
                self.pods -= 1
            else:
                assert isinstance(step, FenceSinkIds)
                self.live_producers -= set(step.ids)
                if count == crash_at:
                    continue  # fenced, but "stop fenced" never recorded: fenced again
                self.fenced = True
            if desired is not RUNNING and self.fenced:
                assert not self.live_producers, "held while a producer could still write"
        raise AssertionError("no end")


def _skipping_the_fence(*args: Any, **fields: Any) -> SparkStateStep:
    step = spark_state_step(*args, **fields)
    return HeldStill() if isinstance(step, FenceSinkIds) else step


def test_the_walk_catches_a_hold_that_skips_the_fencing() -> None:
    """The walk can fail: steps that hold once the pods are gone, without fencing,
    leave producers a lost node's executor could still use."""
    job = Job()
    assert job.walk(STOPPED, None, _skipping_the_fence)[-1] == "HeldStill"
    assert job.live_producers == set(IDS), "the held job's check would fail"


@pytest.mark.parametrize("crash_at", [None, 0, 1, 2, 3, 4])
@pytest.mark.parametrize("held", [PAUSED, STOPPED])
def test_a_job_held_still_has_no_driver_no_pods_and_no_producer_left(
    held: WorkloadState, crash_at: int | None
) -> None:
    job = Job()
    steps = job.walk(held, crash_at)
    assert steps[0] == "RecordState" and steps[-1] == "HeldStill"
    assert (job.driver, job.pods, job.live_producers) == (False, 0, set())
    resumed = job.walk(RUNNING, crash_at)  # a crash loses the first RecordState's write
    assert resumed[-1] == "Run" and set(resumed[:-1]) == {"RecordState"}, resumed
    assert job.state is RUNNING
