"""The conditions every kind's status gets through the one writer: the generation they
were computed from, the blocked triple, and the progress deadline applied alike."""

from __future__ import annotations

from typing import cast

from onceflow.api.source import KafkaSourceStatus
from onceflow.api.status import ConditionStatus, ConditionType
from onceflow.control.kube import KubeClient
from onceflow.control.status_writer import BLOCKED, StatusWriter

OBJ = {"metadata": {"name": "s", "namespace": "n", "generation": 4}, "status": {}}


def _writer(deadline_s: float | None = None) -> StatusWriter[KafkaSourceStatus]:
    # Reading and setting conditions never reach the API: no client is needed.
    return StatusWriter(cast(KubeClient, None), "kafkasources", KafkaSourceStatus, deadline_s)


def _by_type(status: KafkaSourceStatus) -> dict[ConditionType, tuple[ConditionStatus, str, str]]:
    return {c.type: (c.status, c.reason, c.message) for c in status.conditions}


def test_blocked_is_degraded_with_its_reason_on_every_condition() -> None:
    writer = _writer()
    status = writer.blocked(OBJ, writer.read(OBJ), "InvalidSpec", "spec.topic: missing")
    assert status.observed_generation == 4
    assert _by_type(status) == {
        ConditionType.READY: (ConditionStatus.FALSE, "InvalidSpec", "spec.topic: missing"),
        ConditionType.PROGRESSING: (ConditionStatus.FALSE, "InvalidSpec", BLOCKED),
        ConditionType.DEGRADED: (ConditionStatus.TRUE, "InvalidSpec", "spec.topic: missing"),
    }
    assert {c.observed_generation for c in status.conditions} == {4}


def test_progressing_past_the_deadline_turns_degraded() -> None:
    writer = _writer(deadline_s=0.0)
    waiting = (True, "TasksStarting", "0/2 running")
    first = writer.with_conditions(
        OBJ, writer.read(OBJ), ready=(False, "TasksStarting", ""), progressing=waiting,
        degraded=(False, "Healthy", ""),
    )  # fmt: skip
    assert _by_type(first)[ConditionType.DEGRADED][0] is ConditionStatus.FALSE
    again = first.model_copy(
        update={
            "conditions": [
                c.model_copy(update={"last_update_time": "2000-01-01T00:00:00+00:00"})
                for c in first.conditions
            ]
        }
    )
    later = writer.with_conditions(
        OBJ, again, ready=(False, "TasksStarting", ""), progressing=waiting,
        degraded=(False, "Healthy", ""),
    )  # fmt: skip
    assert _by_type(later)[ConditionType.DEGRADED][:2] == (
        ConditionStatus.TRUE,
        "ProgressDeadlineExceeded",
    )
