"""A requested offsets change, checked by its connector before anything is written:
every entry the connector refuses is named with its index, and one refusal refuses the
whole change (half a change would resume some partitions where nobody asked)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from onceflow.api.connector import (
    OffsetRefusedError,
    SourceConnector,
    SourceOffset,
    SourcePartition,
)
from onceflow.api.source import OffsetsChangeResult
from onceflow.logic.generations import OffsetsOutcome
from onceflow.model.tasks import OffsetsRequest


def checked(
    connector: SourceConnector,
    config: Mapping[str, Any],
    request: OffsetsRequest,
    stored: Sequence[SourcePartition] = (),
) -> OffsetsOutcome:
    """The change ``Applying`` with the offsets to write (as the connector stores them),
    or ``Refused`` naming every entry the connector refused. ``stored``: the partitions
    with an offset now, which a reset forgets unless it sets them."""
    entries: list[tuple[SourcePartition, SourceOffset | None]] = []
    problems: list[str] = []
    for index, (partition, offset) in enumerate(request.entries):
        try:
            if offset is None:
                connector.forget_offset(config, partition)
                entries.append((partition, None))
            else:
                entries.append((partition, connector.alter_offset(config, partition, offset)))
        except OffsetRefusedError as refused:
            problems.append(f"spec.offsetsChange.offsets[{index}]: {refused}")
    if request.reset:
        problems += _forgetting_refused(connector, config, stored, entries)
    if problems:
        return refused_change(request.id, problems)
    what = "forgetting every stored offset, then writing " if request.reset else "writing "
    return OffsetsOutcome(
        request.id,
        OffsetsChangeResult.APPLYING,
        f"{what}{len(entries)} partition(s)",
        reset=request.reset,
        writing=tuple(entries),
    )


def _forgetting_refused(
    connector: SourceConnector,
    config: Mapping[str, Any],
    stored: Sequence[SourcePartition],
    entries: Sequence[tuple[SourcePartition, SourceOffset | None]],
) -> list[str]:
    """What a reset would forget that the connector refuses to: every stored partition
    the change does not set."""
    kept = [dict(partition) for partition, offset in entries if offset is not None]
    problems = []
    for partition in stored:
        if dict(partition) in kept:
            continue
        try:
            connector.forget_offset(config, partition)
        except OffsetRefusedError as refused:
            problems.append(f"spec.offsetsChange.reset: {refused}")
    return problems


def refused_change(change_id: str, problems: Sequence[str]) -> OffsetsOutcome:
    why = "; ".join(problems) + "; nothing was written"
    return OffsetsOutcome(change_id, OffsetsChangeResult.REFUSED, why)


def refused_by_its_system(applying: OffsetsOutcome, why: Mapping[int, str]) -> OffsetsOutcome:
    """The change as its source system judged it (``SourceConnector.check_offsets``,
    by entry index): still ``Applying`` when it raised nothing."""
    if not why:
        return applying
    problems = [f"spec.offsetsChange.offsets[{index}]: {why[index]}" for index in sorted(why)]
    return refused_change(applying.id, problems)


def applied(applying: OffsetsOutcome, written: int) -> OffsetsOutcome:
    what = "every stored offset forgotten, then " if applying.reset else ""
    return OffsetsOutcome(
        applying.id,
        OffsetsChangeResult.APPLIED,
        f"{what}{written} partition(s) written; the source resumes from them once running",
        written,
    )
