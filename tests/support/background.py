"""A thread doing a test's background work (a loader, writers) whose failure the test
reports after joining it, instead of it vanishing with the thread."""

from __future__ import annotations

import threading


class BackgroundWork(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as error:  # reported by the test
            self.error = error

    def work(self) -> None:
        raise NotImplementedError
