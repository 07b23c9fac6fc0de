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

The standby is this module's own: made in a temporary directory, on a free port
next to the primary's, and stopped and removed in a ``finally``. The helper lives
here rather than in tests/support because nothing else needs a standby.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from confluent_kafka.admin import AdminClient
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from onceflow.api import KafkaSourceSpec
from onceflow.api.connector import ConnectorError, SourceRecord, TaskContext
from onceflow.connectors.postgres import PostgresConnector, PostgresTask
from onceflow.eos.offsets import StoredOffsets
from onceflow.runtime.source_check import SOURCE_SYSTEM_REFUSED, source_system_problems
from tests.support.onceflow_run import run_until_refused
from tests.support.waiting import wait_for

pytestmark = pytest.mark.postgres

# Below the kernel's ephemeral range, next to the primary's 15432 (scripts/postgres.sh):
# a port taken from the ephemeral range can be handed to a client socket first.
STANDBY_PORTS = range(15490, 15600)
# Settings a hot standby must hold at least at the primary's values, or it refuses to
# start ("insufficient parameter settings"); the test bed's primary raises some of them.
AT_LEAST_THE_PRIMARYS = (
    "max_connections",
    "max_worker_processes",
    "max_wal_senders",
    "max_prepared_transactions",
    "max_locks_per_transaction",
)


@dataclass(frozen=True)
class Standby:
    """A running hot standby of the test bed's server."""

    dsn: str
    primary_dsn: str

    def sees(self, table: str, rows: int) -> bool:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
            if not (exists and exists[0]):
                return False
            count = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            return bool(count and count[0] >= rows)


def _pg_bin() -> Path:
    """The newest installed server's binaries, as scripts/postgres.sh picks them."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    assert found, "no PostgreSQL server under /usr/lib/postgresql (scripts/postgres.sh installs it)"
    return found[-1]


def _as_owner(*command: str) -> list[str]:
    """PostgreSQL refuses to run as root: under root its tools run as ``postgres``, as
    scripts/postgres.sh runs the primary."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else list(command)


def _run(*command: str) -> None:
    done = subprocess.run(
        _as_owner(*command), capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stderr}\n{done.stdout}"


def _free_port() -> int:
    for port in STANDBY_PORTS:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {STANDBY_PORTS} for the standby")


def _in_recovery(dsn: str) -> bool:
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=2) as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
            return bool(row and row[0])
    except psycopg.OperationalError:
        return False


@pytest.fixture(scope="module")
def standby(postgres_dsn: str) -> Iterator[Standby]:
    """``pg_basebackup -R`` of the primary into a temporary directory, started as a
    hot standby on a port of its own; stopped and removed whatever happens."""
    bin_dir = _pg_bin()
    primary = conninfo_to_dict(postgres_dsn)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        settings = {
            name: str((conn.execute(f"SHOW {name}").fetchone() or ("",))[0])
            for name in AT_LEAST_THE_PRIMARYS
        }
    # Not pytest's tmp_path: its parents are private to root, and the server runs as
    # postgres under root.
    home = Path(tempfile.mkdtemp(prefix="onceflow-standby-"))
    data = home / "data"
    if os.geteuid() == 0:
        shutil.chown(home, "postgres", "postgres")
    started = False
    try:
        _run(
            str(bin_dir / "pg_basebackup"),
            "-h",
            str(primary.get("host", "127.0.0.1")),
            "-p",
            str(primary.get("port", "5432")),
            "-U",
            str(primary.get("user", "onceflow")),
            "-D",
            str(data),
            "-R",  # standby.signal and primary_conninfo: a hot standby of this primary
            "-X",
            "stream",
            "-c",
            "fast",
            "--no-sync",
        )
        port = _free_port()
        options = [
            f"-p {port}",
            f"-k {home}",
            "-c listen_addresses=127.0.0.1",
            "-c fsync=off",
            "-c hot_standby=on",
            *(f"-c {name}={value}" for name, value in settings.items()),
        ]
        _run(
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(home / "server.log"),
            "-w",
            "-t",
            "60",
            "start",
            "-o",
            " ".join(options),
        )
        started = True
        dsn = make_conninfo(postgres_dsn, host="127.0.0.1", port=str(port))
        wait_for(lambda: _in_recovery(dsn), 60, f"the standby on port {port} to accept reads")
        yield Standby(dsn, postgres_dsn)
    finally:
        if started:
            subprocess.run(
                _as_owner(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"),
                capture_output=True,
                timeout=120,
                check=False,
            )
        shutil.rmtree(home, ignore_errors=True)


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
    with caplog.at_level(logging.WARNING, logger="onceflow.runtime.source_check"):
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
