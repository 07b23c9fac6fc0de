"""Conditions as values: setting one keeps lastTransitionTime unless its status flips,
as Kubernetes' meta.SetStatusCondition does, so watchers see real transitions only."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from onceflow.api.status import Condition, ConditionStatus, ConditionType

# metav1.Condition's bound on a message: a long list of workloads or problems is cut.
MESSAGE_LIMIT = 32768


def set_condition(
    conditions: Sequence[Condition],
    type_: ConditionType,
    status: bool | None,
    reason: str,
    message: str,
    now: str,
    observed_generation: int | None,
) -> list[Condition]:
    """``status`` None: Unknown."""
    wanted = (
        ConditionStatus.UNKNOWN
        if status is None
        else ConditionStatus.TRUE
        if status
        else ConditionStatus.FALSE
    )
    message = message[:MESSAGE_LIMIT]
    previous = next((c for c in conditions if c.type is type_), None)
    same = previous is not None and previous.status is wanted
    since = previous.last_transition_time if previous and same else now
    unchanged = previous and same and (previous.reason, previous.message) == (reason, message)
    updated = Condition(
        type=type_,
        status=wanted,
        reason=reason,
        message=message,
        last_transition_time=since,
        last_update_time=(previous.last_update_time or since) if previous and unchanged else now,
        observed_generation=observed_generation,
    )
    others = [c for c in conditions if c.type is not type_]
    return sorted([*others, updated], key=lambda c: list(ConditionType).index(c.type))


PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"


def _seconds_between(earlier: str, later: str) -> float:
    return (datetime.fromisoformat(later) - datetime.fromisoformat(earlier)).total_seconds()


def past_deadline(
    conditions: Sequence[Condition], progressing: tuple[bool, str, str], now: str, deadline_s: float
) -> tuple[bool, str, str] | None:
    """Degraded for an object Progressing without progress for longer than
    ``deadline_s`` (Deployments' progressDeadlineSeconds): a task that never gets ready,
    a driver that never runs, a rollout stuck at a step is told apart from one that is
    merely slow, in ``kubectl`` and in Argo CD. Progress is a change of what Progressing
    says (a new step, a new generation, more tasks ready). None within the deadline."""
    previous = next((c for c in conditions if c.type is ConditionType.PROGRESSING), None)
    if not progressing[0] or previous is None or previous.status is not ConditionStatus.TRUE:
        return None
    if (previous.reason, previous.message) != (progressing[1], progressing[2][:MESSAGE_LIMIT]):
        return None  # progress now
    last = previous.last_update_time or previous.last_transition_time
    if _seconds_between(last, now) <= deadline_s:
        return None
    return (
        True,
        PROGRESS_DEADLINE_EXCEEDED,
        f"no progress since {last}, longer than the {deadline_s:g} s deadline: {progressing[2]}",
    )


def set_conditions(
    conditions: Sequence[Condition],
    *,
    ready: tuple[bool, str, str],
    progressing: tuple[bool, str, str],
    degraded: tuple[bool, str, str],
    now: str,
    observed_generation: int | None,
    deadline_s: float | None = None,
) -> list[Condition]:
    """All three conditions at once, each as (status, reason, message); with
    ``deadline_s``, an object Progressing for longer is Degraded too (unless it
    already is, for a reason of its own)."""
    if deadline_s is not None and not degraded[0]:
        degraded = past_deadline(conditions, progressing, now, deadline_s) or degraded
    if degraded[0] and not ready[0]:
        # Not ready because of what Degraded says: Ready carries that reason, so that
        # `kubectl get` (whose Reason column reads Ready) shows it without a describe.
        ready = (False, degraded[1], degraded[2])
    result = list(conditions)
    for type_, (status, reason, message) in (
        (ConditionType.READY, ready),
        (ConditionType.PROGRESSING, progressing),
        (ConditionType.DEGRADED, degraded),
    ):
        result = set_condition(result, type_, status, reason, message, now, observed_generation)
    return result


def newly_degraded(before: Sequence[Condition], after: Sequence[Condition]) -> Condition | None:
    """The Degraded condition of ``after`` if it turned True or changed its reason: when
    a Warning event is due. A message that changes within one reason (a retry's
    countdown) is status only, not one event per attempt."""
    old = next((c for c in before if c.type is ConditionType.DEGRADED), None)
    new = next((c for c in after if c.type is ConditionType.DEGRADED), None)
    if new is None or new.status is not ConditionStatus.TRUE:
        return None
    if old is not None and old.status is ConditionStatus.TRUE and old.reason == new.reason:
        return None
    return new
