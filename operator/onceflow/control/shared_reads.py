"""Reads that concurrent callers share: the admission webhook's, and the reconcilers'
stored topic graph (``graph.GraphReads``).

Every admission request judges the incoming object against the whole stored graph
(``control.graph``), which costs a LIST per kind. Read per request, a burst of
requests (an Argo CD sync of a hundred objects, or anyone who can reach the port)
multiplies those LISTs on the API server and holds as many of kopf's threads. Shared,
the work per key is bounded whatever the request rate: at most one read in flight and
one waiting to start, and every caller is answered by a read that began after it
asked, so a verdict never rests on a listing older than its request (an object stored
just before is seen, as with a read of its own).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)
Value = TypeVar("Value")


@dataclass
class _Reads(Generic[Value]):
    """One key's reads: how many began, how many ended, and the last one's outcome."""

    begun: int = 0
    ended: int = 0
    value: Value | None = None
    error: BaseException | None = None
    changed: threading.Condition = field(default_factory=threading.Condition)


class SharedReads(Generic[Key, Value]):
    """``read(key)`` shared by the callers that ask for a key at once."""

    def __init__(self, read: Callable[[Key], Value]) -> None:
        self._read = read
        self._keys: dict[Key, _Reads[Value]] = {}
        self._lock = threading.Lock()

    def __call__(self, key: Key) -> Value:
        with self._lock:
            reads = self._keys.setdefault(key, _Reads())
        with reads.changed:
            # A read already under way may have begun before this call: wait for the
            # next one, which this caller or another starts once that one ends.
            wanted = reads.begun + 1
            while reads.ended < wanted:
                if reads.begun == reads.ended:
                    reads.begun += 1
                    self._read_for_all(key, reads)
                else:
                    reads.changed.wait()
            if reads.error is not None:
                raise reads.error
            return reads.value  # type: ignore[return-value]  # set with error None

    def _read_for_all(self, key: Key, reads: _Reads[Value]) -> None:
        """Reads outside the lock (others wait on it meanwhile), then wakes them."""
        reads.changed.release()
        try:
            value, error = self._read(key), None
        except BaseException as failed:  # every caller sharing the read gets its error
            value, error = None, failed
        finally:
            reads.changed.acquire()
        reads.value, reads.error = value, error
        reads.ended = reads.begun
        reads.changed.notify_all()
