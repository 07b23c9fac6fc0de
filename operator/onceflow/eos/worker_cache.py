"""Clients a Python worker keeps from one batch to the next.

Spark reuses its Python workers across tasks and batches; a sink that opened a
connection or producer per task paid for its setup in every batch. One worker runs
one task at a time, and taking removes: two writes never share a client. In ``eos``
because the Kafka sink's marker store (``eos.sink_markers``) keeps its readers here
too, beside the Spark sinks' producers and connections.
"""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class KeptBetweenBatches(Generic[T]):
    def __init__(self) -> None:
        self._kept: dict[tuple[str, ...], T] = {}

    def take(self, *key: str) -> T | None:
        """The client kept under ``key``, now the caller's (None if none)."""
        return self._kept.pop(key, None)

    def keep(self, value: T, *key: str) -> None:
        """Hands a client in a reusable state back for the next batch."""
        self._kept[key] = value
