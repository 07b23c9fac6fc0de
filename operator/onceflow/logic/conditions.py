"""Conditions as values: setting one keeps lastTransitionTime unless its status flips,
as Kubernetes' meta.SetStatusCondition does, so watchers see real transitions only."""

from __future__ import annotations

from collections.abc import Sequence

from onceflow.api.status import Condition, ConditionStatus, ConditionType


def set_condition(
    conditions: Sequence[Condition],
    type_: ConditionType,
    status: bool,
    reason: str,
    message: str,
    now: str,
    observed_generation: int | None,
) -> list[Condition]:
    wanted = ConditionStatus.TRUE if status else ConditionStatus.FALSE
    previous = next((c for c in conditions if c.type is type_), None)
    since = previous.last_transition_time if previous and previous.status is wanted else now
    updated = Condition(
        type=type_,
        status=wanted,
        reason=reason,
        message=message,
        last_transition_time=since,
        observed_generation=observed_generation,
    )
    others = [c for c in conditions if c.type is not type_]
    return sorted([*others, updated], key=lambda c: list(ConditionType).index(c.type))


def set_conditions(
    conditions: Sequence[Condition],
    *,
    ready: tuple[bool, str, str],
    progressing: tuple[bool, str, str],
    degraded: tuple[bool, str, str],
    now: str,
    observed_generation: int | None,
) -> list[Condition]:
    """All three conditions at once, each as (status, reason, message)."""
    result = list(conditions)
    for type_, (status, reason, message) in (
        (ConditionType.READY, ready),
        (ConditionType.PROGRESSING, progressing),
        (ConditionType.DEGRADED, degraded),
    ):
        result = set_condition(result, type_, status, reason, message, now, observed_generation)
    return result
