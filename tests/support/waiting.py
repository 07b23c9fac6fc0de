"""Waiting on a condition with a deadline and a message saying what was awaited:
the suite's only way to synchronise (never a bare sleep)."""

from __future__ import annotations

import time
from typing import Any


def holds_within(predicate: Any, timeout_s: float, interval_s: float = 0.25) -> bool:
    """Polls ``predicate`` until true; whether it became true in time (for a caller that
    reports a miss instead of failing on it, as the fault campaign's aiming does)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval_s)
    return True


def wait_for(predicate: Any, timeout_s: float, what: str, interval_s: float = 0.25) -> None:
    """Polls ``predicate`` until true; fails naming what was awaited."""
    if not holds_within(predicate, timeout_s, interval_s):
        raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
