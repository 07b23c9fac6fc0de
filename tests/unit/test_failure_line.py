"""What `onceflow run` says when a child exits: why, and where to read the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from onceflow.logic.failure_line import exit_description, failure_line
from onceflow.standalone.children import ChildProcess

FAILED = 'cimpl.KafkaException: KafkaError{code=_TRANSPORT,str="Failed to get metadata"}'
REFUSED = "source check refused: spec.connector.config.dsn: password authentication failed"
TRACEBACK = f"""\
[task 0] starting generation 3
Traceback (most recent call last):
  File "/x/runtime/task_main.py", line 88, in main
    producer.init_transactions()
{FAILED}
"""


@pytest.mark.parametrize(
    ("tail", "line"),
    [
        (TRACEBACK, FAILED),
        (f"ok\n{REFUSED}\n\n", REFUSED),
        ("all fine\nstill fine\n", None),
        ("", None),
    ],
)
def test_the_last_line_naming_a_failure_is_the_one_shown(tail: str, line: str | None) -> None:
    assert failure_line(tail) == line


def test_a_very_long_line_is_cut() -> None:
    shown = failure_line("ValueError: " + "x" * 5000)
    assert shown is not None and len(shown) == 300 and shown.endswith("…")


def test_a_signal_is_named() -> None:
    assert exit_description(-9) == "exited -9 (killed by SIGKILL)"
    assert exit_description(1) == "exited 1"


def test_a_failed_child_is_reported_with_its_error_and_log(tmp_path: Path) -> None:
    log = tmp_path / "task-0.log"
    log.write_text("an earlier life's noise\n" * 2000 + TRACEBACK)
    child = ChildProcess("task 0", "task", tmp_path / "settings.json", log)
    said = child._after_exit(1, now=0.0)
    assert said == f"task 0 exited 1; restarting in 0.5s: {FAILED} (log {log})"
    # A kill says so, and an earlier life's error is not passed off as its cause.
    assert child._after_exit(-9, now=0.0) == (
        f"task 0 exited -9 (killed by SIGKILL); restarting in 1.0s (log {log})"
    )
