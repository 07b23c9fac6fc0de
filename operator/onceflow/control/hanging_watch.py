"""Watches the partition ends of every Pipeline's topics for hanging transactions.

It looks every ``interval_s`` on a thread of its own, so a broker that does not
answer holds that thread, never a reconcile worker, and keeps what
logic/hanging_transactions.py finds. A Pipeline's pass tells it what to follow (the
topics its workloads write and how long their transactions may stay open; the topics
they only read, whose writers are someone else's and may keep one open as long as the
broker grants any producer) and reads the last finding; when the hanging partitions of
a Pipeline change, ``changed`` wakes the Pipeline's loop, so the condition appears
within a look, not at the next resync. A Pipeline no pass has followed for
``forget_after_s`` (deleted, or this replica paused by peering) is no longer looked
at. What it found lives in memory: after an operator restart a stall is timed again
from the first look.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from onceflow.eos.partition_ends import partition_ends, transaction_max_timeout_s
from onceflow.logic.hanging_transactions import (
    Hanging,
    PartitionEnds,
    PartitionKey,
    Stall,
    hanging,
    track,
)
from onceflow.logic.requeue import RequeuePolicy

log = logging.getLogger(__name__)

Looker = Callable[[str, Sequence[str], Mapping[str, str]], list[PartitionEnds]]
BrokerLimit = Callable[[str, Mapping[str, str]], float]
CLEANUP_MARGIN_S = 30.0
"""Beyond a timeout, the broker's abort of an expired transaction takes up to its
cleanup interval (10 s by default), and the watch a look."""


@dataclass(frozen=True)
class Followed:
    """What to watch for one Pipeline."""

    bootstrap: str
    written: tuple[str, ...]
    """Topics its workloads write."""
    read_only: tuple[str, ...]
    """Topics they only read: someone else writes them."""
    client_settings: tuple[tuple[str, str], ...]
    writers_s: float | None
    """The longest transaction timeout of its own writers (None: none is
    transactional, so the broker's limit bounds them too)."""
    override_s: float | None = None
    """One bound for every topic (the operator's ONCEFLOW_HANGING_AFTER_S)."""


FORGET_AFTER_S = 600.0


def forgotten_after_s(requeue: RequeuePolicy) -> float:
    """How long a Pipeline no pass followed stays watched: longer than the longest a
    settled Pipeline waits for its resync (with the resync budget stretching it, a fixed
    600 s would drop every settled Pipeline past 3,000 objects and start its stall
    timing over each time, so a hang whose bound is 930 s was never reported)."""
    return max(FORGET_AFTER_S, 1.5 * requeue.longest_resync_s)


@dataclass
class HangingWatch:
    interval_s: float = 15.0
    look: Looker = partition_ends
    broker_limit_s: BrokerLimit = transaction_max_timeout_s
    changed: Callable[[str, str], None] = lambda namespace, name: None
    forget_after_s: float = FORGET_AFTER_S
    _followed: dict[tuple[str, str], Followed] = field(default_factory=dict)
    _touched: dict[tuple[str, str], float] = field(default_factory=dict)
    _bounds: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
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
                self._forget(key)
                return []
            self._touched[key] = time.monotonic()
            if self._followed.get(key) != followed:
                self._forget(key)
                self._followed[key] = followed
                self._touched[key] = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hanging-watch", daemon=True)
                self._thread.start()
            return list(self._found.get(key, []))

    def _forget(self, key: tuple[str, str]) -> None:
        for kept in (self._followed, self._touched, self._bounds, self._stalls, self._found):
            kept.pop(key, None)

    def _run(self) -> None:
        while True:
            time.sleep(self.interval_s)
            with self._lock:
                stale = [
                    k
                    for k, at in self._touched.items()
                    if time.monotonic() - at > self.forget_after_s
                ]
                for key in stale:
                    self._forget(key)
                followed = list(self._followed.items())
            for key, what in followed:
                try:  # whatever fails, the next look tries again and the thread lives on
                    self._look_at(key, what)
                except Exception as error:
                    log.warning("%s/%s: could not look at its partitions: %s", *key, error)

    def _look_at(self, key: tuple[str, str], what: Followed) -> None:
        settings = dict(what.client_settings)
        bounds = self._bounds.get(key)
        if bounds is None:  # asked of the broker once per what is followed
            bounds = self._bounds_of(what, settings)
        looks = self.look(what.bootstrap, [*what.written, *what.read_only], settings)
        self._take(key, what, bounds, looks, time.monotonic())

    def _bounds_of(self, what: Followed, settings: Mapping[str, str]) -> dict[str, float]:
        if what.override_s is not None:
            return dict.fromkeys([*what.written, *what.read_only], what.override_s)
        if what.writers_s is not None and not what.read_only:  # no need to ask the broker
            return dict.fromkeys(what.written, what.writers_s + CLEANUP_MARGIN_S)
        broker = self.broker_limit_s(what.bootstrap, settings) + CLEANUP_MARGIN_S
        own = broker if what.writers_s is None else what.writers_s + CLEANUP_MARGIN_S
        return {**dict.fromkeys(what.read_only, broker), **dict.fromkeys(what.written, own)}

    def _take(
        self,
        key: tuple[str, str],
        what: Followed,
        bounds: dict[str, float],
        looks: list[PartitionEnds],
        now: float,
    ) -> None:
        with self._lock:
            if self._followed.get(key) != what:
                return  # followed differently since the look began
            self._bounds[key] = bounds
            stalls = track(self._stalls.get(key, {}), looks, now)
            found = hanging(stalls, looks, now, bounds)
            before = self._found.get(key, [])
            self._stalls[key], self._found[key] = stalls, found
        if [(h.topic, h.partition) for h in found] != [(h.topic, h.partition) for h in before]:
            self.changed(*key)
