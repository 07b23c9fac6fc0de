"""When a sink may skip a batch: the replay rule of the exactly-once sinks.

A marker says "query Q committed batch B here". Batch ids restart at 0 with every new
checkpoint, so a marker that named only the batch would make a reset or re-created
query skip its own new batches as "already written" and lose them. The query id is
the checkpoint's identity: Spark keeps it in the checkpoint, the same across restarts
of one checkpoint and new for a new one. A replay is recognised only within a query.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class SinkMarker:
    batch: int
    query: str | None
    """None for markers written before markers named their query (a plain batch id):
    they are taken as the current query's, which is what they were when written."""

    def encode(self) -> bytes:
        return json.dumps({"query": self.query, "batch": self.batch}).encode()

    @classmethod
    def decode(cls, raw: bytes) -> SinkMarker:
        value = json.loads(raw)
        if isinstance(value, int):
            return cls(batch=value, query=None)
        return cls(batch=int(value["batch"]), query=value["query"])


def already_written(marker: SinkMarker | None, query: str, batch: int) -> bool:
    """True when ``batch`` of ``query`` was committed before (a replay to skip)."""
    if marker is None or marker.query not in (None, query):
        return False
    return marker.batch >= batch
