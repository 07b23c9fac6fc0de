"""The ``files`` connector against a real broker: writers append lines to files (some
written in two halves, one file appearing mid-run) while the tasks are SIGKILLed;
every line arrives once, in order per file.

Size comes from ONCEFLOW_CHAOS_KILLS (kills, default 20 in CI; halved here) and
ONCEFLOW_CHAOS_RECORDS (lines per file).
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest

from onceflow.connectors.files import owner_task
from onceflow.eos.audit_reader import read_sequences
from onceflow.logic.audit import AuditReport, audit_sequences
from tests.support.background import BackgroundWork
from tests.support.tasks import TaskProcess, generation_settings, plan, write_generation
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.kafka]

KILLS = max(4, int(os.environ.get("ONCEFLOW_CHAOS_KILLS", "20")) // 2)
LINES = int(os.environ.get("ONCEFLOW_CHAOS_RECORDS", "3000")) // 2
FILES = 5


class Writers(BackgroundWork):
    """Appends line ``seq`` to every file in turn; every seventh line is written in two
    halves with a pause between, and the last file only appears halfway through."""

    def __init__(self, directory: Path, pace_s: float) -> None:
        super().__init__()
        self.directory, self.pace_s = directory, pace_s
        self.written = 0

    def work(self) -> None:
        for seq in range(1, LINES + 1):
            for f in range(FILES):
                if f == FILES - 1 and seq == 1 + LINES // 2:
                    self._append(f, b"".join(self._line(f, n) for n in range(1, seq)))
                if f == FILES - 1 and seq <= LINES // 2:
                    continue
                line = self._line(f, seq)
                if seq % 7 == 0:
                    self._append(f, line[:5])
                    time.sleep(0.001)
                    self._append(f, line[5:])
                else:
                    self._append(f, line)
            self.written = seq
            if seq % 50 == 0:
                time.sleep(self.pace_s)

    def _line(self, f: int, seq: int) -> bytes:
        return json.dumps({"stream": f"f{f}", "seq": seq}).encode() + b"\n"

    def _append(self, f: int, data: bytes) -> None:
        with (self.directory / f"part-{f}.jsonl").open("ab") as out:
            out.write(data)


def _audit(bootstrap: str, topic: str) -> AuditReport:
    try:
        pairs, unparsable = read_sequences(bootstrap, topic, key_field="stream", seq_field="seq")
    except LookupError:  # no task has created the topic yet
        pairs, unparsable = [], 0
    return audit_sequences(
        pairs,
        expect=LINES,
        expected_keys=[f"f{f}" for f in range(FILES)],
        unparsable=unparsable,
    )


def test_sigkilled_file_tasks_deliver_every_line_once_in_order(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    # A directory whose files both tasks share (ownership hashes the full path).
    data = next(
        d
        for d in (tmp_path / f"data-{n}" for n in range(100))
        if {owner_task(str(d / f"part-{f}.jsonl"), 2) for f in range(FILES)} == {0, 1}
    )
    data.mkdir()
    desired = plan(
        kafka_bootstrap,
        connector="files",
        tasks_max=2,
        config={"paths": [str(data / "*.jsonl")], "batchSize": 40, "scanIntervalMs": 200},
    )
    authority = tmp_path / "state.json"
    write_generation(authority, 1, desired.task_count, "enabled")
    tasks = [TaskProcess(s, tmp_path).start() for s in generation_settings(desired, 1, authority)]
    # The writers take about twice as long as the kills (a kill round is under a second).
    writers = Writers(data, pace_s=2 * KILLS / (LINES / 50))
    writers.start()
    rng = random.Random(11)
    topic = desired.source.spec.topic
    try:
        # Kills land on tasks that are reading, not on ones still starting up.
        wait_for(lambda: _audit(kafka_bootstrap, topic).records > 0, 60, "the first lines")
        for _ in range(KILLS):
            victim = rng.choice(tasks)
            time.sleep(rng.uniform(0.3, 1.0))  # fault timing, not synchronisation
            victim.kill()
            victim.start()
        assert writers.written < LINES, "every kill must land while lines are still written"
        writers.join(300)
        assert writers.error is None, writers.error
        wait_for(
            lambda: _audit(kafka_bootstrap, topic).records >= FILES * LINES,
            240,
            "every line to be delivered",
            interval_s=2,
        )
    finally:
        for task in tasks:
            if task.alive:
                task.terminate()
    report = _audit(kafka_bootstrap, topic)
    assert report.ok, report
    assert report.records == FILES * LINES
