"""Crashes and zombies against a real broker: at-least-once duplicates in ``disabled``
mode, and a zombie of a replaced generation never becomes visible. (SIGKILLs in
``enabled`` mode are the source conformance kit's, tests/conformance.)

Size comes from ONCEFLOW_CHAOS_KILLS (default 20: the CI default still kills for
real) and ONCEFLOW_CHAOS_RECORDS (records per stream).
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from onceflow.eos.audit_reader import read_sequences
from onceflow.eos.fencing import fence_transactional_ids
from onceflow.logic.audit import AuditReport, audit_sequences
from onceflow.model.names import task_transactional_ids
from onceflow.runtime.task import ExitCode
from tests.support.tasks import (
    TaskProcess,
    committed_offsets,
    generation_settings,
    plan,
    write_generation,
)
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.kafka]

KILLS = int(os.environ.get("ONCEFLOW_CHAOS_KILLS", "20"))
RECORDS = int(os.environ.get("ONCEFLOW_CHAOS_RECORDS", "3000"))
STREAMS = 6
# Paced so that tasks are mid-flight for the whole kill phase.
PACED = {"streams": STREAMS, "limit": RECORDS, "batchSize": 20, "pollIntervalMs": 20}


def _audit(bootstrap: str, topic: str) -> AuditReport:
    pairs, unparsable = read_sequences(bootstrap, topic, key_field="stream", seq_field="seq")
    return audit_sequences(
        pairs,
        expect=RECORDS,
        expected_keys=[f"s{i}" for i in range(STREAMS)],
        unparsable=unparsable,
    )


def _crash_repeatedly(kafka_bootstrap: str, tmp_path: Path, mode: str) -> AuditReport:
    desired = plan(kafka_bootstrap, mode=mode, tasks_max=3, config=PACED)
    authority = tmp_path / "state.json"
    write_generation(authority, 1, desired.task_count, mode)
    settings = generation_settings(desired, 1, authority)
    # Flush offsets rarely in at-least-once mode so that every crash replays records.
    settings = [s.model_copy(update={"offset_flush_interval_ms": 2000}) for s in settings]
    tasks = [TaskProcess(s, tmp_path).start() for s in settings]
    rng = random.Random(618)
    try:
        for _ in range(KILLS):
            # Random moments: often mid-transaction (commits are frequent), sometimes
            # during start-up or offset recovery.
            victim = rng.choice(tasks)
            time.sleep(rng.uniform(0.2, 1.2))  # fault timing, not synchronisation
            victim.kill()
            victim.start()
        wait_for(
            lambda: committed_offsets(desired) == {f"s{i}": RECORDS for i in range(STREAMS)},
            180,
            f"every stream to commit seq {RECORDS}",
            interval_s=1,
        )
    finally:
        for task in tasks:
            if task.alive:
                task.terminate()
    return _audit(kafka_bootstrap, desired.source.spec.topic)


def test_sigkills_in_disabled_mode_duplicate_but_never_lose(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    report = _crash_repeatedly(kafka_bootstrap, tmp_path, "disabled")
    assert report.missing == 0, "at-least-once must never lose a record"
    # The contrast with enabled mode: replays after crashes are visible duplicates.
    assert report.duplicates > 0
    assert report.records > STREAMS * RECORDS


def test_stopped_task_of_replaced_generation_never_becomes_visible(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    config = {**PACED, "limit": RECORDS // 2}
    old = plan(kafka_bootstrap, tasks_max=3, config=config)
    authority = tmp_path / "state.json"
    write_generation(authority, 1, 3, "enabled")
    gen1 = [TaskProcess(s, tmp_path).start() for s in generation_settings(old, 1, authority)]
    wait_for(
        lambda: all(committed_offsets(old).values()) and len(committed_offsets(old)) == 6,
        60,
        "generation 1 to commit on every stream",
    )
    zombie = gen1[2]
    zombie.signal(signal.SIGSTOP)

    # What the supervisor does for 3 -> 2 tasks: intent, stop, fence, record, start.
    new = plan(kafka_bootstrap, tasks_max=2, config=config, name=old.source.metadata.name)
    write_generation(authority, 2, 2, "enabled")
    for task in gen1[:2]:
        assert task.terminate() == ExitCode.STOPPED
    report = fence_transactional_ids(
        kafka_bootstrap,
        task_transactional_ids(old.pipeline.transactional_id_prefix, old.source.metadata.name, 3),
    )
    assert report.ok, report.summary()
    gen2 = [TaskProcess(s, tmp_path).start() for s in generation_settings(new, 2, authority)]
    limit = config["limit"]
    wait_for(
        lambda: committed_offsets(new) == {f"s{i}": limit for i in range(STREAMS)},
        120,
        "generation 2 to finish every stream",
    )

    zombie.signal(signal.SIGCONT)
    assert zombie.wait(60) == ExitCode.STOPPED, "a superseded zombie exits 0"
    assert "superseded" in zombie.log_path.read_text()
    for task in gen2:
        task.terminate()

    pairs, unparsable = read_sequences(
        kafka_bootstrap, old.source.spec.topic, key_field="stream", seq_field="seq"
    )
    audit = audit_sequences(pairs, expect=limit, unparsable=unparsable)
    assert audit.ok, audit
    assert len(audit.keys) == STREAMS
