"""The id of the streaming query a ``foreachBatch`` sink writes for.

Sinks name the query in their markers (see ``logic.sink_markers``). Spark knows the id
only once the query has started, and the first batch may already be running by then,
so the job binds the sink right after ``start()`` and a batch waits for the binding.
"""

from __future__ import annotations

import threading

# Binding follows start() within milliseconds; a minute means the driver is broken.
BIND_TIMEOUT_S = 60.0


class QueryIdentity:
    def __init__(self) -> None:
        self._id: str | None = None
        self._bound = threading.Event()

    def bind(self, query_id: str) -> None:
        self._id = query_id
        self._bound.set()

    def wait(self, timeout_s: float = BIND_TIMEOUT_S) -> str:
        if not self._bound.wait(timeout_s) or self._id is None:
            raise RuntimeError("the sink was never bound to its streaming query's id")
        return self._id
