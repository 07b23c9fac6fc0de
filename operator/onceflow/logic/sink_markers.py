"""When a sink may skip a batch, and which layout a batch is written in: the replay
rules of the exactly-once Kafka sink.

A marker says "query Q committed batch B to output partition p of topic T, which had N
partitions". Batch ids restart at 0 with every new checkpoint, so a marker that named
only the batch would make a reset or re-created query skip its own new batches as
"already written" and lose them: the query id is the checkpoint's identity (the same
across restarts of one checkpoint, new for a new one).

A batch belongs to one layout (topic and partition count). When the layout changes
while a batch is in flight (written to some partitions, not yet recorded in the
checkpoint), its replay must finish it in the layout it started in: written again in
the new one it would duplicate what the first partitions committed, skipped it would
lose the rest. Later batches use the new layout. So a re-partition neither loses nor
duplicates, and always completes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    topic: str
    partitions: int


@dataclass(frozen=True)
class SinkMarker:
    batch: int
    query: str | None
    """None for markers written before markers named their query (a plain batch id).
    Such a marker is the last batch of the query that ran before the upgrade: it counts
    only for a replay of exactly that batch (the one that may have been in flight), and
    never makes a reset checkpoint's lower batch ids look written."""
    layout: Layout | None = None
    """None for markers written before markers named their layout: the current one."""

    def encode(self) -> bytes:
        layout = (
            {"topic": self.layout.topic, "partitions": self.layout.partitions}
            if self.layout
            else None
        )
        return json.dumps({"query": self.query, "batch": self.batch, "layout": layout}).encode()

    @classmethod
    def decode(cls, raw: bytes) -> SinkMarker:
        value = json.loads(raw)
        if isinstance(value, int):
            return cls(batch=value, query=None)
        layout = value.get("layout")
        return cls(
            batch=int(value["batch"]),
            query=value["query"],
            layout=Layout(layout["topic"], int(layout["partitions"])) if layout else None,
        )

    @classmethod
    def from_record_value(cls, raw: bytes | None) -> SinkMarker | None:
        """The marker a marker record's value holds; an empty value (a tombstone) is
        none, and ends the search for the partition's marker like any other."""
        return cls.decode(raw) if raw else None

    def same_query(self, query: str, batch: int) -> bool:
        return self.query == query or (self.query is None and self.batch == batch)


def already_written(marker: SinkMarker | None, query: str, batch: int, layout: Layout) -> bool:
    """True when ``batch`` of ``query`` was committed before to this partition of this
    layout (a replay to skip)."""
    if marker is None or not marker.same_query(query, batch):
        return False
    if marker.layout not in (None, layout):
        return False
    return marker.batch >= batch


def started_layout(markers: Iterable[SinkMarker], query: str, batch: int) -> Layout | None:
    """The layout some partition already committed ``batch`` in (an in-flight batch
    replayed after a re-partition must be finished in it), or None."""
    for marker in markers:
        if marker.same_query(query, batch) and marker.batch == batch and marker.layout:
            return marker.layout
    return None
