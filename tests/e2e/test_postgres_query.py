"""The ``postgres`` connector's ``incrementing`` mode against a real PostgreSQL and a
real broker: rows whose ids commit out of order (a transaction holding a smaller id
while a larger one commits) are not skipped, and rows without an ordering value do
not stop the others. (SIGKILLed tasks under concurrent writers are the source
conformance kit's, tests/conformance.)"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import psycopg
import pytest

from onceflow.model.tasks import DesiredTasks
from tests.support.postgres_query import create_writer_table, delivered_ids, incrementing_config
from tests.support.tasks import TaskProcess, only_task, plan
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


def _source(bootstrap: str, dsn: str, table: str, column: str = "id") -> DesiredTasks:
    return plan(
        bootstrap,
        connector="postgres",
        tasks_max=1,
        config=incrementing_config(dsn, table, column),
    )


def _delivered(bootstrap: str, desired: DesiredTasks) -> list[int]:
    return delivered_ids(bootstrap, desired.source.spec.topic)


def test_a_smaller_id_committing_after_a_larger_one_is_not_skipped(
    kafka_bootstrap: str, postgres_dsn: str, tmp_path: Path
) -> None:
    table = create_writer_table(postgres_dsn)
    desired = _source(kafka_bootstrap, postgres_dsn, table)
    task = TaskProcess(only_task(desired, tmp_path), tmp_path).start()
    try:
        with psycopg.connect(postgres_dsn, autocommit=True) as first:
            first.execute(f"INSERT INTO {table} (writer) VALUES (0)")  # id 1
        # The task is polling: the window below cannot pass for want of a task.
        wait_for(lambda: _delivered(kafka_bootstrap, desired) == [1], 60, "the first row")
        with psycopg.connect(postgres_dsn) as slow, psycopg.connect(postgres_dsn) as fast:
            slow.execute(f"INSERT INTO {table} (writer) VALUES (1)")  # id 2, not committed
            fast.execute(f"INSERT INTO {table} (writer) VALUES (2)")  # id 3
            fast.commit()
            # A window, not a wait: many polls see id 3 while id 2 is invisible.
            time.sleep(2)
            assert _delivered(kafka_bootstrap, desired) == [1], "id 3 went out ahead of id 2"
            slow.commit()
        wait_for(lambda: len(_delivered(kafka_bootstrap, desired)) >= 3, 60, "every row")
    finally:
        task.terminate()
    assert _delivered(kafka_bootstrap, desired) == [1, 2, 3]


def test_rows_with_a_null_ordering_column_do_not_stop_the_others(
    kafka_bootstrap: str, postgres_dsn: str, tmp_path: Path
) -> None:
    table = f"qn_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, seq bigint)")
        conn.execute(f"INSERT INTO {table} VALUES (1, 1), (2, NULL), (3, 2)")
    desired = _source(kafka_bootstrap, postgres_dsn, table, column="seq")
    task = TaskProcess(only_task(desired, tmp_path), tmp_path).start()
    try:
        wait_for(lambda: len(_delivered(kafka_bootstrap, desired)) >= 2, 60, "the rows")
    finally:
        task.terminate()
    assert _delivered(kafka_bootstrap, desired) == [1, 3]
