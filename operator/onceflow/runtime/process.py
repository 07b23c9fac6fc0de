"""``onceflow task``: the process a task pod (or ``onceflow run``) starts.

stdout carries one JSON progress line per second at most, for whoever supervises the
process; logs go to stderr. SIGTERM and SIGINT stop the task gracefully; they are taken
by a thread of their own (``processes.stop_signals``), never by a handler that could run
inside a blocking client call.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any

from onceflow.api.task import TaskSettings
from onceflow.connectors.registry import load_connector
from onceflow.eos.clients import mounted_secret
from onceflow.processes.stop_signals import stop_on_signals
from onceflow.runtime.authority import authority_from
from onceflow.runtime.task import ExitCode, TaskRunner

# Progress lines are for humans and dashboards; more than one a second is noise.
PROGRESS_INTERVAL_S = 1.0


class ThrottledPrinter:
    """Prints the latest progress event at most once per interval; a background flush
    makes sure the last event of a burst is printed too, not just the first."""

    def __init__(self) -> None:
        self._pending: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._flusher = threading.Thread(target=self._flush_periodically, daemon=True)
        self._flusher.start()

    def __call__(self, event: dict[str, Any]) -> None:
        with self._lock:
            self._pending = event

    def _flush(self) -> None:
        with self._lock:
            event, self._pending = self._pending, None
        if event is not None:
            print(json.dumps(event, separators=(",", ":")), flush=True)

    def _flush_periodically(self) -> None:
        while not self._closed.wait(PROGRESS_INTERVAL_S):
            self._flush()

    def close(self) -> None:
        self._closed.set()
        self._flush()


TERMINATION_LOG = "/dev/termination-log"


def with_mounted_kafka_config(settings: TaskSettings) -> TaskSettings:
    """Merges a mounted Secret's files (one librdkafka setting per file) into the
    client settings; the Secret's keys win over the plain config."""
    mounted = mounted_secret(settings.kafka_config_dir)
    return settings.model_copy(update={"kafka_config": {**settings.kafka_config, **mounted}})


def run_task_process(settings_path: str) -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s"
    )
    settings = with_mounted_kafka_config(
        TaskSettings.model_validate_json(Path(settings_path).read_text())
    )
    # Not earlier: a signal while the settings are read ends the process at once, as
    # nothing has been written. Not later: every thread (progress printer, metrics
    # server, the connector's) must be started with the signals already blocked.
    stop = stop_on_signals()
    printer = ThrottledPrinter()
    runner = TaskRunner(
        settings,
        load_connector(settings.connector_type),
        authority_from(settings.authority),
        stop,
        printer,
    )
    runner.metrics.serve(settings.metrics_port)
    code = runner.run()
    printer.close()
    print(json.dumps({"event": "exit", "task": settings.task_id, "code": int(code)}), flush=True)
    if runner.failure and os.access(TERMINATION_LOG, os.W_OK):
        # In a pod, the kubelet keeps this as the container's termination message, which
        # the operator copies into the source's status (tasks[].lastError).
        Path(TERMINATION_LOG).write_text(runner.failure[:4096])
    return int(code)


__all__ = ["ExitCode", "run_task_process"]
