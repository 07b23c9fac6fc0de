"""Which slices a batch of the exactly-once Postgres sink is written in, and which
markers of older sink versions a query may take as its own: the replay rules of the
Postgres sink (the Kafka sink's, which these follow, are in ``sink_markers``).

A slice marker says "query Q committed slice s of batch B". Slice s is the rows whose
spread columns (the key, or the whole row of an append) hash to s modulo the slice
count, so s means something only in one layout: that count and those columns. A batch
in flight when ``parallelism`` or ``key`` changes must be finished in the layout it
started in: replayed in another, the slices that find a marker skip rows that were
never written (loss), and the others write rows again (duplicates). Later batches use
the new layout.

So the layout of every batch is recorded before any of its slices is written, and a
batch is written in the layout its record names. A record, not a column of each slice's
marker: the marker of a slice exists only once the slice committed, and a driver that
replays the batch must know its layout even while a slice of the driver before it is
still running (an executor outliving its driver).

Markers of older sink versions:

- Markers that named the query but no layout (no record for their batch): the batch is
  written in the current layout, as the Kafka sink reads a marker without a layout
  (change ``parallelism`` or ``key`` after the upgrade, not with it).
- Markers that named only the job (before markers named their query): they say which
  batch ids were written, not by which checkpoint, so by themselves they would make any
  later query's batch with the same id look written. The old format can identify one
  batch only: the last one it wrote, which the first query to run after the upgrade
  may have had in flight (``SinkMarker.same_query`` for a marker without a query).
  At a driver's first batch they are therefore taken as that query's own for exactly
  that batch, and only while no marker of the job names a query (once one does, the
  upgrade is behind the job), then retired for good, in the same transaction. A
  checkpoint reset made together with the upgrade is the one case the old format cannot
  tell apart: when the old query's last batch id equals the new query's first (0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onceflow.logic.sink_markers import SinkMarker


@dataclass(frozen=True)
class SliceLayout:
    """How a batch is split: into ``slices`` by Spark's Murmur3 of ``spread`` (in order)."""

    slices: int
    spread: tuple[str, ...]

    @classmethod
    def of_sink(cls, slices: int, key: Sequence[str], columns: Sequence[str]) -> SliceLayout:
        """The layout the sink's settings ask for now: by the key columns, or by the
        whole row (every output column) for appends."""
        return cls(slices, tuple(key) or tuple(columns))

    def describe(self) -> str:
        return f"{self.slices} slices by ({', '.join(self.spread)})"


class LayoutUnavailableError(ValueError):
    """A batch started in a layout whose columns the output no longer has: which of its
    rows the slices that committed wrote cannot be told apart from the others."""


def layout_to_write(
    recorded: SliceLayout, batch: int, columns: Sequence[str], wanted: SliceLayout
) -> SliceLayout:
    """The layout ``batch`` is written in: the one recorded for it (the current one,
    ``wanted``, unless the batch started under earlier settings), if the output still
    has the columns it splits by."""
    missing = [c for c in recorded.spread if c not in columns]
    if missing:
        raise LayoutUnavailableError(
            f"spec.sink.postgres: batch {batch} was started split into "
            f"{recorded.describe()} and is being replayed; the output has no column(s) "
            f"{', '.join(map(repr, missing))} now (it is split into {wanted.describe()}), "
            "so its rows cannot be matched to the slices already committed. Restore those "
            f"columns until batch {batch} is written, then change the transform or key."
        )
    return recorded


@dataclass(frozen=True)
class LegacyMarkers:
    """What a driver's first batch finds of its job's markers from before markers named
    their query."""

    last_batch: int | None
    """The newest batch id under the bare job name (None: none left)."""
    named_elsewhere: bool
    """A marker of the job names a query, other than this query's markers of this batch
    (which an upgraded driver of the same query may have left in a replay of it)."""


@dataclass(frozen=True)
class LegacyAdoption:
    """What the driver does with those markers, in one transaction."""

    adopt_batch: int | None
    """Their markers of this batch become the query's own (copied under its name)."""
    retire: bool
    """All of them are deleted: no later query may find them."""


def adopt_legacy_markers(found: LegacyMarkers, query: str, batch: int) -> LegacyAdoption:
    """At a driver's first batch (the only one an earlier driver can have left in
    flight): take the bare markers of this batch as the query's own if the old format
    can say they are, and retire them all either way."""
    if found.last_batch is None:
        return LegacyAdoption(adopt_batch=None, retire=False)
    last = SinkMarker(batch=found.last_batch, query=None)
    if not found.named_elsewhere and last.same_query(query, batch):
        return LegacyAdoption(adopt_batch=batch, retire=True)
    # A reset checkpoint's batch, a batch after the upgraded one, or a job that has
    # written markers naming queries since: the bare markers can be no one's replay.
    return LegacyAdoption(adopt_batch=None, retire=True)
