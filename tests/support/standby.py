"""A hot standby (a read replica) of the test bed's PostgreSQL server, made with
``pg_basebackup -R`` in a temporary directory and started on a port of its own: a
polling source pointed at one must refuse exactly-once (eos-review 2026-11-27, hole 2).
Used by tests/integration/test_postgres_standby.py and the source kit's
``postgres-incrementing`` subject."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.support.waiting import wait_for

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


@contextmanager
def hot_standby(postgres_dsn: str) -> Iterator[Standby]:
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
