"""The ``postgres`` connector's CDC mode against a real PostgreSQL and a real broker: a
snapshot of a large table, killed repeatedly mid-way while the table changes under
it, and the example as a user runs it. The audit (tests/support/cdc.py) checks every
key's records: consecutive versions, no repeated read or insert, and the table's
final state. (A loader's changes through terminated replication connections, SIGKILLs
and a generation change are the source conformance kit's, tests/conformance.)

Sizes: ONCEFLOW_CDC_SNAPSHOT_ROWS (default 100,000), faults from ONCEFLOW_CHAOS_KILLS
(default 20 in CI; halved here).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from onceflow.api.task import FileAuthority
from onceflow.eos.offsets import read_offsets
from onceflow.model.tasks import DesiredTasks
from tests.support.cdc import (
    ChangeAudit,
    Loader,
    audit_changes,
    create_table,
    drop_slot,
    final_versions,
    read_changes,
)
from tests.support.onceflow_run import start_run
from tests.support.tasks import TaskProcess, only_task, plan
from tests.support.testbed import ROOT
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]

SNAPSHOT_ROWS = int(os.environ.get("ONCEFLOW_CDC_SNAPSHOT_ROWS", "100000"))
FAULTS = max(4, int(os.environ.get("ONCEFLOW_CHAOS_KILLS", "20")) // 2)


def _cdc_source(bootstrap: str, dsn: str, table: str, **config: Any) -> DesiredTasks:
    slot = f"t_{uuid.uuid4().hex[:10]}"
    return plan(
        bootstrap,
        connector="postgres",
        tasks_max=1,
        config={"url": dsn, "tables": [table], "slot": slot, **config},
    )


def _stored_offset(desired: DesiredTasks) -> dict[str, Any] | None:
    settings = desired.settings(1, FileAuthority(path="-"))[0]
    try:
        stored = read_offsets(
            settings.bootstrap_servers, settings.offsets_topic, settings.offsets_owner
        )
    except LookupError:
        return None
    return next((dict(v) for v in stored.by_partition.values()), None)


def _terminate_snapshot_reader(dsn: str, slot: str, within_s: float = 5.0) -> int:
    """Ends the session reading the snapshot (in its transaction, with the export).
    Looked for until found or ``within_s`` passed: between its chunk queries it is
    idle in its transaction, but for a moment after a task restart it does not exist
    yet and during a chunk it is busy, and a single look once missed every time."""
    deadline = time.monotonic() + within_s
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s AND state = 'idle in transaction'",
                (f"onceflow-{slot}",),
            ).fetchall()
            ended = sum(1 for (done,) in rows if done)
            if ended or time.monotonic() > deadline:
                return ended
            time.sleep(0.01)


def _audit(bootstrap: str, desired: DesiredTasks, dsn: str, table: str) -> ChangeAudit:
    try:
        changes = read_changes(bootstrap, desired.source.spec.topic)
    except LookupError:
        changes = []
    return audit_changes(changes, final_versions(dsn, table))


def _after_loader(
    loader: Loader, bootstrap: str, desired: DesiredTasks, dsn: str, table: str
) -> ChangeAudit:
    """The audit once the loader is done and the topic shows the table's final state
    (or a deadline passed: a lost change never shows it)."""
    loader.join(600)
    assert loader.error is None, loader.error
    wait_for(
        lambda: _audit(bootstrap, desired, dsn, table).caught_up,
        180,
        "every change to be delivered",
        interval_s=3,
    )
    return _audit(bootstrap, desired, dsn, table)


def test_a_snapshot_killed_midway_delivers_every_row_once_then_streams(
    kafka_bootstrap: str, postgres_dsn: str, tmp_path: Path
) -> None:
    table = f"snap_{uuid.uuid4().hex[:8]}"
    create_table(postgres_dsn, table, SNAPSHOT_ROWS)
    desired = _cdc_source(
        kafka_bootstrap, postgres_dsn, table, batchSize=500, snapshotChunkSize=500
    )
    slot = desired.source.spec.connector.config["slot"]
    task = TaskProcess(only_task(desired, tmp_path), tmp_path).start()
    # Changes under the snapshot: rows already read, rows still to read, new rows.
    loader = Loader(postgres_dsn, table, existing=SNAPSHOT_ROWS, changes=20000, pace_s=0.3)
    rng = random.Random(5)
    kills = reader_terminations = 0
    seen: Any = None
    try:
        loader.start()
        while kills < FAULTS:

            def moved(before: Any = seen) -> bool:
                stored = _stored_offset(desired)
                return stored is not None and stored != before

            wait_for(moved, 120, "the snapshot to make progress")
            seen = _stored_offset(desired)
            if seen is None or "snapshot" not in seen:
                break  # streaming: the snapshot is over
            time.sleep(rng.uniform(0.0, 0.4))  # fault timing, not synchronisation
            if kills % 2 == 1:
                # The task continues in a new segment without restarting.
                reader_terminations += _terminate_snapshot_reader(postgres_dsn, slot)
                time.sleep(rng.uniform(0.2, 0.6))
            task.kill()
            task.start()
            kills += 1
        assert kills >= 3, f"only {kills} kills landed during the snapshot"
        assert reader_terminations >= 1, "no termination hit the snapshot's reader"
        report = _after_loader(loader, kafka_bootstrap, desired, postgres_dsn, table)
    finally:
        if task.alive:
            task.terminate()
    assert report.ok, (report.problems[:20], report.behind[:5])
    # Every row the loader did not delete first was read by the snapshot.
    assert report.snapshot_reads >= SNAPSHOT_ROWS - loader.deleted, json.dumps(seen)
    drop_slot(postgres_dsn, slot)


def test_the_cdc_example_runs_with_onceflow_run(
    kafka_bootstrap: str, postgres_dsn: str, tmp_path: Path
) -> None:
    """examples/postgres-cdc.{sql,yaml} as a user runs them, names made unique per run."""
    example = CdcExample.created(postgres_dsn, kafka_bootstrap, tmp_path)
    table, slot, topic = example.table, example.slot, example.topic
    run = start_run(example.manifest, tmp_path, tmp_path / "run.log")
    try:
        wait_for(lambda: len(_changes(kafka_bootstrap, topic)) >= 1000, 120, "the snapshot")
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(
                f"UPDATE {table} SET status = 'paid', version = version + 1 WHERE id <= 10"
            )
            conn.execute(f"DELETE FROM {table} WHERE id > 995")
            conn.execute(f"INSERT INTO {table} (id, customer, total) VALUES (1001, 'new', 9.5)")
        wait_for(
            lambda: (
                audit_changes(
                    _changes(kafka_bootstrap, topic), final_versions(postgres_dsn, table)
                ).caught_up
            ),
            120,
            "the changes",
        )
    finally:
        run.send_signal(signal.SIGTERM)
        run.wait(60)
    changes = _changes(kafka_bootstrap, topic)
    report = audit_changes(changes, final_versions(postgres_dsn, table))
    assert report.ok, report.problems[:10]
    assert [v["op"] for _, v in changes].count("u") == 10
    paid = next(v for k, v in changes if k == 1 and v["op"] == "u")
    assert paid["after"] == {
        "id": 1,
        "customer": "customer-1",
        "total": "1.25",
        "status": "paid",
        "version": 2,
    }
    drop_slot(postgres_dsn, slot)


@dataclass(frozen=True)
class CdcExample:
    """examples/postgres-cdc.{sql,yaml} with names unique to one test: its table
    created, its manifest written."""

    table: str
    slot: str
    topic: str
    manifest: Path
    text: str

    @classmethod
    def created(cls, dsn: str, bootstrap: str, directory: Path) -> CdcExample:
        suffix = uuid.uuid4().hex[:6]
        table, slot, name = f"shop_orders_{suffix}", f"cdc_demo_{suffix}", f"cdc-demo-{suffix}"

        def unique(text: str) -> str:
            return (
                text.replace("shop_orders", table)
                .replace("cdc_demo_orders", slot)
                .replace("cdc-demo", name)
                .replace("postgresql://onceflow@127.0.0.1:15432/postgres", dsn)
                .replace("127.0.0.1:9092", bootstrap)
            )

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(unique((ROOT / "examples" / "postgres-cdc.sql").read_text()).encode())
        manifest = directory / "postgres-cdc.yaml"
        text = unique((ROOT / "examples" / "postgres-cdc.yaml").read_text())
        manifest.write_text(text)
        return cls(table, slot, f"{name}.orders", manifest, text)


def _changes(bootstrap: str, topic: str) -> list[tuple[int, dict[str, Any]]]:
    try:
        return read_changes(bootstrap, topic)
    except LookupError:  # not created yet
        return []
