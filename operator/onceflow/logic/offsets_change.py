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
from onceflow.logic.generations import OffsetsOutcome
from onceflow.model.tasks import OffsetsRequest

Entries = list[tuple[SourcePartition, SourceOffset | None]]


def checked_entries(
    connector: SourceConnector, config: Mapping[str, Any], request: OffsetsRequest
) -> Entries | OffsetsOutcome:
    """The entries to write (offsets as the connector stores them), or the refusal."""
    entries: Entries = []
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
        return OffsetsOutcome(request.id, False, "; ".join(problems) + "; nothing was written")
    return entries


def applied(request: OffsetsRequest, written: int) -> OffsetsOutcome:
    what = "every stored offset forgotten, then " if request.reset else ""
    return OffsetsOutcome(
        request.id,
        True,
        f"{what}{written} partition(s) written; the source resumes from them once running",
        written,
    )
