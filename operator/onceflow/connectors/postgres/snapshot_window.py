"""Which streamed changes a resumable snapshot already contains.

A snapshot is read in key order, table after table, through exported snapshots, each
taken at a WAL position. A task killed mid-snapshot cannot get its snapshot back (an
export lives as long as the session that made it), so it continues from the last key
it committed in a new *segment*, read through a new export at a later position. An
export at a position shows exactly the transactions whose commit record starts before
it; the stream, which starts where the replication slot was created (before the first
segment), carries those changes again. A change is emitted only when its commit is at
or after the position of the segment its row belongs to. Rows keep their order per
key: the snapshot's read of a row is always written before the stream's changes to it.

Segments are the source offset's ``segments``, so the rule holds across restarts until
the stream has passed the last segment's position. Pure: the key comparison (done by
the database, in the key's type and collation) is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onceflow.connectors.postgres.pgoutput import lsn_text, parse_lsn

Key = tuple[str | None, ...]
KeyAfter = Callable[[str, Key, Key], bool]
"""``key_after(table, key, boundary)``: whether ``key`` sorts after ``boundary``."""


@dataclass(frozen=True)
class Segment:
    """Rows from just after ``after`` in ``table`` (its start when ``None``) onwards, read
    as of ``lsn``; the next segment, when there is one, ends this one."""

    table: str
    after: Key | None
    lsn: int

    def to_offset(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "after": None if self.after is None else list(self.after),
            "lsn": lsn_text(self.lsn),
        }

    @classmethod
    def from_offset(cls, stored: Mapping[str, Any]) -> Segment:
        after = stored["after"]
        return cls(
            str(stored["table"]), None if after is None else tuple(after), parse_lsn(stored["lsn"])
        )


@dataclass
class SnapshotWindow:
    """What every offset of a CDC task carries about its snapshot: the snapshotted
    tables in the snapshot's order (for good) and, until the stream has passed them,
    the segments. One object for both phases: the snapshot adds segments as it reads,
    the stream drops them once past, and the records of each say where they stand."""

    order: list[str]
    segments: list[Segment]

    def to_offset(self) -> dict[str, Any]:
        segments = {"segments": [s.to_offset() for s in self.segments]} if self.segments else {}
        return {"tables": self.order, **segments}

    def streamed_to(self, commit_lsn: int) -> None:
        """The stream reached a transaction committed at ``commit_lsn``: from the
        window's end on, no change can be in the snapshot, and offsets need the segments
        no more."""
        if commit_lsn >= window_end(self.segments):
            self.segments = []


def window_end(segments: Sequence[Segment]) -> int:
    """The position from which no streamed change can already be in the snapshot."""
    return max((s.lsn for s in segments), default=0)


def starts_before(
    segment: Segment, table: str, key: Key, order: Sequence[str], key_after: KeyAfter
) -> bool:
    """Whether row ``key`` of ``table`` lies after the segment's start."""
    if segment.table != table:
        return order.index(segment.table) < order.index(table)
    return segment.after is None or key_after(table, key, segment.after)


def already_read(
    segments: Sequence[Segment],
    table: str,
    key: Key,
    commit_lsn: int,
    order: Sequence[str],
    key_after: KeyAfter,
) -> bool:
    """Whether the snapshot's read of the row already shows a change committed at
    ``commit_lsn``: the row's segment was exported at a later position."""
    if table not in order or commit_lsn >= window_end(segments):
        return False
    for segment in reversed(segments):
        if starts_before(segment, table, key, order, key_after):
            return commit_lsn < segment.lsn
    return False  # before the first segment: not read by the snapshot
