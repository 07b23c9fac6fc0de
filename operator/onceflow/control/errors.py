"""Outcomes of a reconcile pass that are not failures of the operator itself."""

from __future__ import annotations


class RetryLaterError(Exception):
    """The world is not ready for the next step yet; observe again after ``delay_s``."""

    def __init__(self, reason: str, delay_s: float = 1.0) -> None:
        super().__init__(reason)
        self.delay_s = delay_s


class InvalidWorkloadError(Exception):
    """A workload cannot run as specified; ``reason`` and the message go to status."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
