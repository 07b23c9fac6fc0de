"""A CDC source's replication slot keeps WAL from the last position the source
confirmed, so a stopped or stuck source makes the database keep every change since
(issue 26, hole 3). The task exports what its slot keeps as a gauge; the operator's
question (the connector's ``retention``) measures it on a real server, and above the
limit the source's Degraded condition names the setting."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest

from onceflow.api.source import RetentionStatus
from onceflow.connectors.postgres import PostgresConnector
from onceflow.logic.source_status import RETAINS_TOO_MUCH, retention_condition
from tests.support.metrics import free_port, scrape
from tests.support.tasks import TaskProcess, only_task, plan
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]

RETAINED = "onceflow_source_retained_bytes"
BEHIND = "onceflow_source_bytes_behind"


def _write_wal(dsn: str, table: str, rows: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {table} (payload) SELECT repeat('x', 500) FROM generate_series(1, %s)",
            (rows,),
        )


def test_a_slot_left_behind_is_measured_and_degrades_the_source_over_its_limit(
    kafka_bootstrap: str, postgres_dsn: str, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    table, slot = f"kept_{suffix}", f"kept_{suffix}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, payload text)")
    config = {
        "url": postgres_dsn,
        "tables": [table],
        "slot": slot,
        "snapshot": "never",
        "statusIntervalMs": 200,
    }
    connector = PostgresConnector()
    assert connector.retention(config, {}) is None, "no slot yet: nothing is kept"

    port = free_port()
    desired = plan(kafka_bootstrap, connector="postgres", tasks_max=1, config=config)
    settings = only_task(desired, tmp_path).model_copy(update={"metrics_port": port})
    task = TaskProcess(settings, tmp_path).start()
    try:
        wait_for(lambda: connector.retention(config, {}) is not None, 60, "the task's slot")
        _write_wal(postgres_dsn, table, 200)
        wait_for(lambda: RETAINED in scrape(port), 60, "the task to export its slot's WAL")
        wait_for(lambda: BEHIND in scrape(port), 60, "the task to export the WAL it is behind")
    finally:
        task.terminate()

    # Stopped: nothing confirms any more, and what is written from now on is kept.
    before = connector.retention(config, {})
    assert before is not None
    _write_wal(postgres_dsn, table, 4000)  # about 2 MiB of WAL
    kept = connector.retention(config, {})
    assert kept is not None and kept.bytes >= before.bytes + 1024**2, (before, kept)
    assert kept.what == f"WAL kept by replication slot {slot}"
    assert kept.limit_bytes == 10 * 1024**3, "the default limit, the server setting none"

    limited = connector.retention({**config, "maxRetainedWalBytes": 1024**2}, {})
    assert limited is not None
    degraded, reason, message = retention_condition(RetentionStatus.measured(limited))
    assert (degraded, reason) == (True, RETAINS_TOO_MUCH)
    assert f"WAL kept by replication slot {slot}" in message
    assert "config.maxRetainedWalBytes" in message
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
