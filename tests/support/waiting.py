"""Waiting on a condition with a deadline and a message saying what was awaited:
the suite's only way to synchronise (never a bare sleep)."""

from __future__ import annotations

import time
from typing import Any


def wait_for(predicate: Any, timeout_s: float, what: str, interval_s: float = 0.25) -> None:
    """Polls ``predicate`` until true; fails naming what was awaited."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)
