"""Watches the partition ends of every Pipeline's topics for hanging transactions.

It looks every ``interval_s`` on a thread of its own, so a broker that does not
answer holds that thread, never a reconcile worker, and keeps what
logic/hanging_transactions.py finds. A Pipeline's pass tells it what to follow (the
topics, their cluster, how long a transaction may stay open) and reads the last
finding; when the hanging partitions of a Pipeline change, ``changed`` wakes the
Pipeline's loop, so the condition appears within a look, not at the next resync.
What it found lives in memory: after an operator restart a stall is timed again from
the first look.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from onceflow.eos.partition_ends import partition_ends
from onceflow.logic.hanging_transactions import (
    Hanging,
    PartitionEnds,
    PartitionKey,
    Stall,
    hanging,
    track,
)

log = logging.getLogger(__name__)

Looker = Callable[[str, Sequence[str], Mapping[str, str]], list[PartitionEnds]]


@dataclass(frozen=True)
class Followed:
    """What to watch for one Pipeline."""

    bootstrap: str
    topics: tuple[str, ...]
    client_settings: tuple[tuple[str, str], ...]
    after_s: float
    """A last stable offset standing longer than this is hanging."""


@dataclass
class HangingWatch:
    interval_s: float = 15.0
    look: Looker = partition_ends
    changed: Callable[[str, str], None] = lambda namespace, name: None
    _followed: dict[tuple[str, str], Followed] = field(default_factory=dict)
    _stalls: dict[tuple[str, str], dict[PartitionKey, Stall]] = field(default_factory=dict)
    _found: dict[tuple[str, str], list[Hanging]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def follow(self, namespace: str, name: str, followed: Followed | None) -> list[Hanging]:
        """Follows (or, with None, stops following) a Pipeline's topics; returns what the
        last look found. A change of what is followed starts the timing over."""
        key = (namespace, name)
        with self._lock:
            if followed is None:
                self._followed.pop(key, None)
                self._stalls.pop(key, None)
                self._found.pop(key, None)
                return []
            if self._followed.get(key) != followed:
                self._followed[key] = followed
                self._stalls.pop(key, None)
                self._found.pop(key, None)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hanging-watch", daemon=True)
                self._thread.start()
            return list(self._found.get(key, []))

    def _run(self) -> None:
        while True:
            time.sleep(self.interval_s)
            with self._lock:
                followed = list(self._followed.items())
            for key, what in followed:
                try:
                    looks = self.look(what.bootstrap, what.topics, dict(what.client_settings))
                except Exception as error:  # the next look tries again
                    log.warning("%s/%s: could not look at its partitions: %s", *key, error)
                    continue
                self._take(key, what, looks, time.monotonic())

    def _take(
        self, key: tuple[str, str], what: Followed, looks: list[PartitionEnds], now: float
    ) -> None:
        with self._lock:
            if self._followed.get(key) != what:
                return  # followed differently since the look began
            stalls = track(self._stalls.get(key, {}), looks, now)
            found = hanging(stalls, looks, now, what.after_s)
            before = self._found.get(key, [])
            self._stalls[key], self._found[key] = stalls, found
        if [(h.topic, h.partition) for h in found] != [(h.topic, h.partition) for h in before]:
            self.changed(*key)
