"""A database transaction larger than one Kafka transaction can hold, under
``transactionBoundary: connector`` (issue 26, hole 3): before the bound it was aborted
by the broker on every restart once it outlasted ``transaction.timeout.ms``, nothing
behind it was ever delivered and the slot kept its WAL for good. Now a Kafka
transaction ends early (a record count, or half the timeout) and a restart resumes
inside the database transaction from the change-level offset."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from onceflow.eos.consume import read_to_end
from onceflow.eos.fencing import fence_transactional_ids
from onceflow.model.tasks import DesiredTasks
from tests.support.cdc import drop_slot
from tests.support.metrics import free_port, scrape
from tests.support.tasks import TaskProcess, only_task, plan
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


def _source(bootstrap: str, dsn: str, table: str, **config: Any) -> DesiredTasks:
    return plan(
        bootstrap,
        connector="postgres",
        tasks_max=1,
        boundary="connector",
        config={
            "url": dsn,
            "tables": [table],
            "slot": f"big_{uuid.uuid4().hex[:10]}",
            "snapshot": "never",
            **config,
        },
    )


def _table(dsn: str) -> str:
    table = f"big_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY)")
    return table


def _inserted_ids(bootstrap: str, desired: DesiredTasks) -> list[int]:
    try:
        messages = read_to_end(bootstrap, desired.source.spec.topic, isolation="read_committed")
    except LookupError:  # no task has created the topic yet
        return []
    return [json.loads(m.value() or b"null")["after"]["id"] for m in messages]


def _one_big_transaction_then_a_small_one(dsn: str, table: str, rows: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {table} SELECT g FROM generate_series(1, %s) g", (rows,))
        conn.execute(f"INSERT INTO {table} VALUES (%s)", (rows + 1,))


def _started(
    desired: DesiredTasks, workdir: Path, timeout_ms: int, metrics_port: int = 0
) -> TaskProcess:
    settings = only_task(desired, workdir).model_copy(
        update={"transaction_timeout_ms": timeout_ms, "metrics_port": metrics_port}
    )
    return TaskProcess(settings, workdir).start()


def _wait_for_slot(dsn: str, desired: DesiredTasks) -> None:
    slot = desired.source.spec.connector.config["slot"]

    def exists() -> bool:
        with psycopg.connect(dsn) as conn:
            found = conn.execute(
                "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            ).fetchone()
        return found is not None

    wait_for(exists, 60, f"slot {slot} to be created")


def test_a_transaction_outlasting_the_kafka_timeout_is_delivered_in_pieces(
    kafka_bootstrap: str, postgres_dsn: str, tmp_path: Path
) -> None:
    rows = 150_000
    table = _table(postgres_dsn)
    desired = _source(kafka_bootstrap, postgres_dsn, table)
    port = free_port()
    task = _started(desired, tmp_path, timeout_ms=2000, metrics_port=port)
    try:
        _wait_for_slot(postgres_dsn, desired)
        _one_big_transaction_then_a_small_one(postgres_dsn, table, rows)
        wait_for(
            lambda: len(_inserted_ids(kafka_bootstrap, desired)) > rows or not task.alive,
            240,
            "the large transaction and the one behind it",
            interval_s=3,
        )
        assert task.alive, task.log_path.read_text()[-2000:]
        # The time bound cut the large one: more Kafka transactions than the two
        # database transactions (a machine writing 150k records within 1 s would not
        # need it, and this says so).
        committed = scrape(port)["onceflow_source_transactions_committed_total"]
        assert committed > 2, committed
    finally:
        task.terminate()
        drop_slot(postgres_dsn, desired.source.spec.connector.config["slot"])
    assert _inserted_ids(kafka_bootstrap, desired) == list(range(1, rows + 2))


def test_a_task_killed_inside_a_large_transaction_resumes_inside_it(
    kafka_bootstrap: str, postgres_dsn: str, tmp_path: Path
) -> None:
    rows, cap = 120_000, 3_000
    table = _table(postgres_dsn)
    desired = _source(kafka_bootstrap, postgres_dsn, table, maxRecordsPerTransaction=cap)
    task = _started(desired, tmp_path, timeout_ms=60_000)
    try:
        _wait_for_slot(postgres_dsn, desired)
        _one_big_transaction_then_a_small_one(postgres_dsn, table, rows)
        wait_for(
            lambda: cap <= len(_inserted_ids(kafka_bootstrap, desired)),
            120,
            "the first capped transaction",
            interval_s=0.2,
        )
        task.kill()
        # Fenced, so the transaction the kill left open is aborted now rather than
        # holding read_committed readers until its timeout.
        assert fence_transactional_ids(kafka_bootstrap, [task.settings.transactional_id]).ok
        # The kill hit inside the database transaction: what Kafka holds is a whole
        # number of capped Kafka transactions, short of the database transaction.
        delivered = _inserted_ids(kafka_bootstrap, desired)
        assert len(delivered) < rows, "the kill must land inside the database transaction"
        assert len(delivered) % cap == 0, len(delivered)
        task.start()
        wait_for(
            lambda: len(_inserted_ids(kafka_bootstrap, desired)) > rows,
            180,
            "the rest of the transaction after the restart",
            interval_s=2,
        )
    finally:
        task.terminate()
        drop_slot(postgres_dsn, desired.source.spec.connector.config["slot"])
    assert _inserted_ids(kafka_bootstrap, desired) == list(range(1, rows + 2))
