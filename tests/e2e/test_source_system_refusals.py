"""``onceflow run`` asks each source's system before any task starts: a missing table,
a user without REPLICATION, tables CDC cannot capture (partitioned, no replica
identity), a missing directory, an unknown source cluster and a mode that cannot be
exactly-once are refused naming the field and the fix, and nothing is
written (no state, no topic)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from confluent_kafka.admin import AdminClient

from tests.support.onceflow_run import pipeline_with_source, run_until_refused

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


def _manifest(bootstrap: str, name: str, connector: dict[str, Any], **spec: Any) -> str:
    return yaml.safe_dump_all(
        pipeline_with_source(
            bootstrap, name, "src", {"topic": f"{name}.out", "connector": connector, **spec}
        )
    )


def _no_replication_user(dsn: str) -> str:
    """A user that may read a table but not the WAL; its DSN."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS refusal_orders (id int PRIMARY KEY)")
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'reader'").fetchone():
            conn.execute("CREATE ROLE reader LOGIN NOREPLICATION")
        conn.execute("GRANT SELECT ON refusal_orders TO reader")
    return dsn.replace("onceflow@", "reader@")


def _table(dsn: str, name: str, *, partitioned: bool = False, identity: str = "") -> str:
    """A table CDC cannot capture as it is; the DSN, unchanged."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {name}")
        conn.execute(
            f"CREATE TABLE {name} (id int PRIMARY KEY)"
            + (" PARTITION BY RANGE (id)" if partitioned else "")
        )
        if identity:
            conn.execute(f"ALTER TABLE {name} REPLICA IDENTITY {identity}")
    return dsn


CASES: dict[str, tuple[Callable[[str], dict[str, Any]], dict[str, Any], list[str]]] = {
    "missing table": (
        lambda dsn: {"type": "postgres", "config": {"url": dsn, "tables": ["nope"], "slot": "r1"}},
        {},
        ["spec.connector.config.tables: table public.nope does not exist"],
    ),
    "user without REPLICATION": (
        lambda dsn: {
            "type": "postgres",
            "config": {
                "url": _no_replication_user(dsn),
                "tables": ["refusal_orders"],
                "slot": "r2",
            },
        },
        {},
        [
            "spec.connector.config.url: user reader may not read the WAL: ALTER ROLE reader "
            "REPLICATION",
            "spec.connector.config.publication: publication 'r2' is missing and the "
            "connector's user may not create it",
        ],
    ),
    "partitioned table": (
        lambda dsn: {
            "type": "postgres",
            "config": {
                "url": _table(dsn, "refusal_parted", partitioned=True),
                "tables": ["refusal_parted"],
                "slot": "r3",
            },
        },
        {},
        ["spec.connector.config.tables: public.refusal_parted is partitioned"],
    ),
    "replica identity nothing": (
        lambda dsn: {
            "type": "postgres",
            "config": {
                "url": _table(dsn, "refusal_nothing", identity="NOTHING"),
                "tables": ["refusal_nothing"],
                "slot": "r4",
            },
        },
        {},
        ["REPLICA IDENTITY DEFAULT"],
    ),
    "mode that cannot be exactly-once": (
        lambda dsn: {
            "type": "postgres",
            "config": {
                "mode": "timestamp+incrementing",
                "url": dsn,
                "tables": ["refusal_orders"],
                "incrementingColumn": "id",
                "timestampColumn": "id",
            },
        },
        {"exactlyOnceSupport": "required"},
        ["spec.exactlyOnceSupport: required", "use mode incrementing (new rows only) or cdc"],
    ),
    "missing directory": (
        lambda dsn: {"type": "files", "config": {"paths": ["/nonexistent/onceflow/*.log"]}},
        {},
        ["spec.connector.config.paths: directory /nonexistent/onceflow of"],
    ),
    "unknown source cluster": (
        lambda dsn: {
            "type": "kafka",
            "config": {"topics": ["orders"], "bootstrapServers": "127.0.0.1:1"},
        },
        {},
        ["spec.connector.config.bootstrapServers: the source cluster at '127.0.0.1:1' did not"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_source_its_system_refuses_starts_no_task_and_writes_nothing(
    case: str, kafka_bootstrap: str, postgres_dsn: str, tmp_path: Path
) -> None:
    connector, spec, expected = CASES[case]
    name = f"refused-{uuid.uuid4().hex[:6]}"
    manifest = tmp_path / "source.yaml"
    manifest.write_text(_manifest(kafka_bootstrap, name, connector(postgres_dsn), **spec))
    state = tmp_path / "state"
    result = run_until_refused(manifest, state)
    assert result.returncode == 1, result.stderr
    for words in expected:
        assert words in result.stderr
    assert not state.exists(), "nothing may be written for a refused source"
    topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=30).topics
    assert not [t for t in topics if t.startswith(name)], "no topic for a refused source"
