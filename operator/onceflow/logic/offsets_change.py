"""A requested offsets change, checked by its connector before anything is written:
every entry the connector refuses is named with its index, and one refusal refuses the
whole change (half a change would resume some partitions where nobody asked)."""

from __future__ import annotations

from collections.abc import Mapping
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
    connector: SourceConnector, config: Mapping[str, Any], request: OffsetsRequest
) -> OffsetsOutcome:
    """The change ``Applying`` with the offsets to write (as the connector stores them),
    or ``Refused`` naming every entry the connector refused."""
    entries: list[tuple[SourcePartition, SourceOffset | None]] = []
    problems: list[str] = []
    for index, (partition, offset) in enumerate(request.entries):
        if offset is None:
            entries.append((partition, None))
            continue
        try:
            entries.append((partition, connector.alter_offset(config, partition, offset)))
        except OffsetRefusedError as refused:
            problems.append(f"spec.offsetsChange.offsets[{index}]: {refused}")
    if problems:
        why = "; ".join(problems) + "; nothing was written"
        return OffsetsOutcome(request.id, OffsetsChangeResult.REFUSED, why)
    what = "forgetting every stored offset, then writing " if request.reset else "writing "
    return OffsetsOutcome(
        request.id,
        OffsetsChangeResult.APPLYING,
        f"{what}{len(entries)} partition(s)",
        reset=request.reset,
        writing=tuple(entries),
    )


def applied(applying: OffsetsOutcome, written: int) -> OffsetsOutcome:
    what = "every stored offset forgotten, then " if applying.reset else ""
    return OffsetsOutcome(
        applying.id,
        OffsetsChangeResult.APPLIED,
        f"{what}{written} partition(s) written; the source resumes from them once running",
        written,
    )
