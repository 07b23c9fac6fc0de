"""The ``postgres`` connector's ``incrementing`` mode against a real PostgreSQL and a
real broker: rows whose ids commit out of order (a transaction holding a smaller id
while a larger one commits) are not skipped, and SIGKILLed tasks deliver every row of
concurrent writers once."""

from __future__ import annotations

import json
import os
import random
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from onceflow.eos.consume import read_to_end
from onceflow.model.tasks import DesiredTasks
from tests.support.background import BackgroundWork
from tests.support.tasks import TaskProcess, only_task, plan
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]

KILLS = max(4, int(os.environ.get("ONCEFLOW_CHAOS_KILLS", "20")) // 2)
ROWS = int(os.environ.get("ONCEFLOW_CHAOS_RECORDS", "3000")) * 2


def _table(dsn: str) -> str:
    table = f"q_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, writer int, note text)")
    return table


def _source(bootstrap: str, dsn: str, table: str, column: str = "id") -> DesiredTasks:
    return plan(
        bootstrap,
        connector="postgres",
        tasks_max=1,
        config={
            "mode": "incrementing",
            "url": dsn,
            "tables": [table],
            "incrementingColumn": column,
            "pollIntervalMs": 50,
            "batchSize": 200,
        },
    )


def _delivered(bootstrap: str, desired: DesiredTasks) -> list[int]:
    try:
        return [
            json.loads(m.value() or b"null")["id"]
            for m in read_to_end(bootstrap, desired.source.spec.topic, isolation="read_committed")
        ]
    except LookupError:  # no task has created the topic yet
        return []


def _ids(dsn: str, table: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        return [i for (i,) in conn.execute(f"SELECT id FROM {table} ORDER BY id")]


def test_a_smaller_id_committing_after_a_larger_one_is_not_skipped(
    kafka_bootstrap: str, postgres_dsn: str, tmp_path: Path
) -> None:
    table = _table(postgres_dsn)
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


class Writers(BackgroundWork):
    """Two sessions inserting concurrently, so ids often commit out of order."""

    def __init__(self, dsn: str, table: str, rows: int, seconds: float) -> None:
        super().__init__()
        self.dsn, self.table, self.rows = dsn, table, rows
        self.pause_s = seconds / max(1, rows // 200)
        self.written = 0

    def work(self) -> None:
        errors: list[BaseException] = []

        def write(writer: int) -> None:
            rng = random.Random(writer)
            try:
                with psycopg.connect(self.dsn) as conn:
                    for n in range(self.rows // 2):
                        conn.execute(f"INSERT INTO {self.table} (writer) VALUES (%s)", (writer,))
                        if rng.random() < 0.05:
                            time.sleep(rng.uniform(0, 0.02))  # hold a smaller id open
                        conn.commit()
                        self.written += 1
                        if n % 100 == 0:
                            time.sleep(self.pause_s)
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=write, args=(w,)) for w in (1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]


def test_killed_tasks_deliver_every_row_of_concurrent_writers_once(
    kafka_bootstrap: str, postgres_dsn: str, tmp_path: Path
) -> None:
    table = _table(postgres_dsn)
    desired = _source(kafka_bootstrap, postgres_dsn, table)
    task = TaskProcess(only_task(desired, tmp_path), tmp_path).start()
    # The writers take about twice as long as the kills (a kill round is under 2 s).
    writers = Writers(postgres_dsn, table, ROWS, seconds=4 * KILLS)
    writers.start()
    rng = random.Random(3)
    try:
        wait_for(lambda: _delivered(kafka_bootstrap, desired), 60, "the first rows")
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.3, 1.0))  # fault timing, not synchronisation
            task.kill()
            task.start()
        assert writers.written < ROWS, "every kill must land while rows are written"
        writers.join(300)
        assert writers.error is None, writers.error
        wait_for(lambda: len(_delivered(kafka_bootstrap, desired)) >= ROWS, 120, "every row", 2)
    finally:
        task.terminate()
    delivered: list[Any] = _delivered(kafka_bootstrap, desired)
    assert sorted(delivered) == _ids(postgres_dsn, table)
    assert len(delivered) == len(set(delivered)) == ROWS
