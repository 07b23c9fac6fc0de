"""A polling ``postgres`` source pointed at a real hot standby (a read replica made
from the test bed's server with ``pg_basebackup -R``): its high-water mark would see
only the standby's own transactions, so a row whose id commits on the primary after
a larger one was read would be skipped for good (eos-review 2026-11-27 §2). Under
``exactlyOnceSupport: required`` the check before any task starts refuses it naming
``spec.connector.config.url`` and both fixes, a task started there anyway stops
before reading, and ``onceflow run`` writes nothing; under ``requested`` it runs,
saying it is without exactly-once.

On the code before the fix each test fails: the check asked the standby nothing
about recovery (no problem, so ``required`` passed), ``TaskContext`` had no
``exactly_once_required`` and the task read the standby, and ``onceflow run`` started
tasks instead of exiting (``run_until_refused`` times out).

The standby is this module's own (tests/support/standby.py): made in a temporary
directory, on a free port next to the primary's, and stopped and removed in a
``finally``. The source kit's ``postgres-incrementing`` subject makes its own too.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from confluent_kafka.admin import AdminClient

from onceflow.api import KafkaSourceSpec
from onceflow.api.connector import ConnectorError, SourceRecord, TaskContext
from onceflow.connectors.checks import SOURCE_SYSTEM_REFUSED, source_system_problems
from onceflow.connectors.postgres import PostgresConnector, PostgresTask
from onceflow.eos.offsets import StoredOffsets
from tests.support.onceflow_run import run_until_refused
from tests.support.standby import Standby, hot_standby
from tests.support.waiting import wait_for

# alone: two workers each making a standby could both take the same free port.
pytestmark = [pytest.mark.alone, pytest.mark.postgres]


@pytest.fixture(scope="module")
def standby(postgres_dsn: str) -> Iterator[Standby]:
    with hot_standby(postgres_dsn) as running:
        yield running


@pytest.fixture
def table(standby: Standby) -> Iterator[str]:
    """A table with two committed rows on the primary, replayed on the standby."""
    name = f"standby_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(standby.primary_dsn, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {name} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, note text)"
        )
        conn.execute(f"INSERT INTO {name} (note) VALUES ('a'), ('b')")
    try:
        wait_for(lambda: standby.sees(name, 2), 60, f"the standby to replay {name}")
        yield name
    finally:
        with psycopg.connect(standby.primary_dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {name}")


def _config(url: str, table: str) -> dict[str, Any]:
    return {
        "mode": "incrementing",
        "url": url,
        "tables": [table],
        "incrementingColumn": "id",
        "pollIntervalMs": 10,
    }


def _spec(url: str, table: str, support: str) -> KafkaSourceSpec:
    return KafkaSourceSpec.model_validate(
        {
            "pipeline": "p",
            "topic": f"{table}.out",
            "exactlyOnceSupport": support,
            "connector": {"type": "postgres", "config": _config(url, table)},
        }
    )


def test_the_source_check_refuses_a_standby_when_exactly_once_is_required(
    standby: Standby, table: str, caplog: pytest.LogCaptureFixture
) -> None:
    (problem,) = source_system_problems(
        _spec(standby.dsn, table, "required"), {}, shares_task_filesystem=False
    )
    assert problem.field == "spec.connector.config.url"
    assert problem.reason == SOURCE_SYSTEM_REFUSED
    assert "hot standby (pg_is_in_recovery() is true)" in problem.message
    assert "point url at the primary" in problem.message
    assert "set spec.exactlyOnceSupport: requested" in problem.message

    # The primary passes the same check: it is the server that is refused, not the mode.
    primary = _spec(standby.primary_dsn, table, "required")
    assert source_system_problems(primary, {}, shares_task_filesystem=False) == []

    # Requested: the source runs, and the log says it is without exactly-once.
    with caplog.at_level(logging.WARNING, logger="onceflow.connectors.checks"):
        requested = _spec(standby.dsn, table, "requested")
        assert source_system_problems(requested, {}, shares_task_filesystem=False) == []
    assert "runs without exactly-once" in caplog.text


def _task_config(url: str, table: str) -> dict[str, Any]:
    (config,) = PostgresConnector().task_configs(_config(url, table), 1)
    return config


def test_a_task_started_on_a_standby_stops_before_reading_when_exactly_once_is_required(
    standby: Standby, table: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The task asks again at start: a restart can reach another server behind the
    same url (a failover, a list of hosts) than the one the check asked."""
    config = _task_config(standby.dsn, table)
    required = TaskContext(
        task_id=0, config=config, offsets=StoredOffsets(), exactly_once_required=True
    )
    with pytest.raises(ConnectorError, match=r"^config\.url: the server is a hot standby"):
        PostgresTask().start(required)

    requested = TaskContext(task_id=0, config=config, offsets=StoredOffsets())
    task = PostgresTask()
    with caplog.at_level(logging.WARNING, logger="onceflow.connectors.postgres.query"):
        task.start(requested)
    read: list[SourceRecord] = []

    def read_both() -> bool:
        read.extend(task.poll())
        return len(read) >= 2

    try:
        assert "runs without exactly-once" in caplog.text
        wait_for(read_both, 30, "both rows read from the standby", interval_s=0.01)
    finally:
        task.stop()
    assert [r.source_offset for r in read] == [{"after": ["1"]}, {"after": ["2"]}]


@pytest.mark.kafka
def test_onceflow_run_refuses_a_standby_and_writes_nothing(
    standby: Standby, table: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    name = f"standby-{uuid.uuid4().hex[:6]}"
    manifest = tmp_path / "source.yaml"
    manifest.write_text(
        yaml.safe_dump_all(
            [
                {
                    "apiVersion": "onceflow.io/v1alpha1",
                    "kind": "Pipeline",
                    "metadata": {"name": name},
                    "spec": {
                        "kafka": {"bootstrapServers": kafka_bootstrap},
                        "exactlyOnce": "enabled",
                    },
                },
                {
                    "apiVersion": "onceflow.io/v1alpha1",
                    "kind": "KafkaSource",
                    "metadata": {"name": "src"},
                    "spec": {
                        "pipeline": name,
                        "topic": f"{name}.out",
                        "exactlyOnceSupport": "required",
                        "connector": {"type": "postgres", "config": _config(standby.dsn, table)},
                    },
                },
            ]
        )
    )
    state = tmp_path / "state"
    result = run_until_refused(manifest, state)
    assert result.returncode == 1, result.stderr
    assert "spec.connector.config.url: the server is a hot standby" in result.stderr
    assert "point url at the primary" in result.stderr
    assert not state.exists(), "nothing may be written for a refused source"
    topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=30).topics
    assert not [t for t in topics if t.startswith(name)], "no topic for a refused source"
