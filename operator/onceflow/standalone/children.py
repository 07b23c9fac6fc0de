"""Child processes of ``onceflow run`` (source tasks, Spark drivers): start, watch,
restart, stop.

Restart policy mirrors a pod's: a driver's exit 0 (its query finished) keeps it down
(``OnFailure``); a source task runs until its generation is replaced, so its exit 0
while still current (someone SIGTERMed it) restarts it like its pod would be re-created;
anything else (75 fenced while current, 1 error, killed by a signal) restarts with a
capped exponential backoff.

Children die with the supervisor (``--supervisor-pid``, see ``processes.lifeline``), and
a new supervisor stops whatever a previous one recorded and left alive
(``stop_recorded_orphans``) before it starts anything: only then may a successor of a
non-transactional generation, which nothing can fence, start writing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onceflow.logic.failure_line import exit_description, failure_line

# First restart is quick (a SIGKILLed task should resume at once); repeated failures
# back off to 30 s so a broken config does not spin the CPU.
RESTART_BACKOFF_S = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
# Matches the default pod terminationGracePeriodSeconds order of magnitude for tasks.
STOP_GRACE_S = 10.0
# Enough for a Python traceback and the lines before it.
LOG_TAIL_BYTES = 16384


@dataclass
class ChildProcess:
    """One child's process and the last progress event it printed on stdout."""

    label: str
    """How lines name it: ``task 1``, ``driver``."""
    command: str
    """The ``onceflow`` subcommand that reads ``--config``: ``task``, ``spark-job``."""
    settings_path: Path
    log_path: Path
    restart_after_clean_exit: bool = False
    """Tasks: an exit 0 while supervised can only be an outside stop, never the end."""
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
            [
                sys.executable,
                "-m",
                "onceflow",
                self.command,
                "--config",
                str(self.settings_path),
                "--supervisor-pid",
                str(os.getpid()),
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            # Own session: a terminal's Ctrl-C reaches the supervisor only, which then
            # stops its children in protocol order.
            start_new_session=True,
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
        return self._after_exit(code, now)

    def _after_exit(self, code: int, now: float) -> str:
        if code == 0 and not self.restart_after_clean_exit:
            self.finished = True
            return f"{self.label} exited 0 (stopped or superseded)"
        if code == 0:
            self.next_start = now + RESTART_BACKOFF_S[0]
            return f"{self.label} exited 0 while current; restarting"
        delay = RESTART_BACKOFF_S[min(self.failures_in_a_row, len(RESTART_BACKOFF_S) - 1)]
        self.failures_in_a_row += 1
        self.restarts += 1
        self.next_start = now + delay
        said = f"{self.label} {exit_description(code)}; restarting in {delay:.1f}s"
        why = failure_line(self._log_tail()) if code > 0 else None
        return f"{said}: {why} (log {self.log_path})" if why else f"{said} (log {self.log_path})"

    def _log_tail(self) -> str:
        """The end of the log, where this life's last words are: the file keeps every
        life's output, and a reader wants only what came last."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - LOG_TAIL_BYTES))
                return log.read().decode(errors="replace")
        except OSError:
            return ""

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


def _alive(pid: int) -> bool:
    """True for a running process; a zombie (exited, not yet reaped) counts as gone."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _started_from(pid: int, settings_prefix: str) -> bool:
    """Whether ``pid`` is an ``onceflow`` child reading a settings file of ours: a pid
    recorded by a crashed run may since belong to an unrelated process."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return False
    names = [Path(a.decode(errors="replace")).name for a in args]
    return "onceflow" in names and any(n.startswith(settings_prefix) for n in names)


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def stop_recorded_orphans(pids_file: Path, say: Callable[[str], None]) -> None:
    """Stops every process a previous supervisor recorded in ``pids_file`` that is still
    alive (SIGTERM, then SIGKILL after the grace period); returns once all are gone."""
    if not pids_file.exists():
        return
    prefix = pids_file.name.removesuffix("pids.json")
    for label, pid in json.loads(pids_file.read_text()).items():
        if not (_alive(pid) and _started_from(pid, prefix)):
            continue
        say(f"{prefix.rstrip('.')} {label}: pid {pid} outlived its supervisor; stopping it")
        os.kill(pid, signal.SIGTERM)
        if not _wait_gone(pid, STOP_GRACE_S):
            os.kill(pid, signal.SIGKILL)
            # SIGKILL cannot be refused; a minute covers a process stuck in the kernel.
            if not _wait_gone(pid, 60):
                raise RuntimeError(f"pid {pid} ({label}) survived SIGKILL; refusing to start")
