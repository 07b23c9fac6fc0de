"""A thread doing a test's background work (a loader, writers) whose failure the test
reports after joining it, instead of it vanishing with the thread."""

from __future__ import annotations

import threading


class BackgroundWork(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.error: BaseException | None = None
        self.released = threading.Event()
        """Cleared by a test that must finish its faults while the work still runs: the
        work waits for it before its last part (``hold_until_released``)."""
        self.released.set()

    def hold_until_released(self, timeout_s: float = 900) -> None:
        self.released.wait(timeout_s)

    def run(self) -> None:
        try:
            self.work()
        except BaseException as error:  # reported by the test
            self.error = error

    def work(self) -> None:
        raise NotImplementedError
