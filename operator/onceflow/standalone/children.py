"""Child processes of ``onceflow run`` (source tasks, Spark drivers): start, watch,
restart, stop.

Restart policy mirrors a pod's ``restartPolicy: OnFailure``: exit 0 means the child
stopped or was superseded and stays down; anything else (75 fenced while current,
1 error, killed by a signal) restarts with a capped exponential backoff.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# First restart is quick (a SIGKILLed task should resume at once); repeated failures
# back off to 30 s so a broken config does not spin the CPU.
RESTART_BACKOFF_S = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
# Matches the default pod terminationGracePeriodSeconds order of magnitude for tasks.
STOP_GRACE_S = 10.0


@dataclass
class ChildProcess:
    """One child's process and the last progress event it printed on stdout."""

    label: str
    """How lines name it: ``task 1``, ``driver``."""
    command: str
    """The ``onceflow`` subcommand that reads ``--config``: ``task``, ``spark-job``."""
    settings_path: Path
    log_path: Path
    process: subprocess.Popen[str] | None = None
    restarts: int = 0
    failures_in_a_row: int = 0
    next_start: float = 0.0
    finished: bool = False
    last_progress: dict[str, Any] = field(default_factory=dict)
    _reader: threading.Thread | None = None

    def start(self) -> None:
        log = self.log_path.open("a")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "onceflow", self.command, "--config", str(self.settings_path)],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        log.close()
        self._reader = threading.Thread(target=self._read_progress, daemon=True)
        self._reader.start()

    def _read_progress(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "committed":
                self.last_progress = event

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def poll(self) -> int | None:
        return self.process.poll() if self.process else None

    def supervise(self, now: float) -> str | None:
        """Restarts the child when due; returns a line to show when something happened."""
        if self.finished:
            return None
        if self.process is None:
            if now >= self.next_start:
                self.start()
                return f"{self.label} started (pid {self.pid})"
            return None
        code = self.process.poll()
        if code is None:
            if now - self.next_start > 60:
                self.failures_in_a_row = 0
            return None
        self.process = None
        if code == 0:
            self.finished = True
            return f"{self.label} exited 0 (stopped or superseded)"
        delay = RESTART_BACKOFF_S[min(self.failures_in_a_row, len(RESTART_BACKOFF_S) - 1)]
        self.failures_in_a_row += 1
        self.restarts += 1
        self.next_start = now + delay
        return f"{self.label} exited {code}; restarting in {delay:.1f}s"

    def stop(self) -> None:
        """SIGTERM, wait for a graceful exit, then SIGKILL: returns only once it is gone."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        self.finished = True
