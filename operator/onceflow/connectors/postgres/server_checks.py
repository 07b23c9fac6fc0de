"""What the database must offer a source, asked before any task starts (``check``) and
again by the task itself: readable tables with primary keys, logical WAL, a user with
REPLICATION, a publication and slot that fit, and for the polling modes a primary
rather than a hot standby. Each answer names the setting and the statement that fixes
it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from onceflow.api.connector import ConfigProblem
from onceflow.connectors.postgres.answer_deadline import answering_within
from onceflow.connectors.postgres.catalog import Table, describe
from onceflow.connectors.postgres.publication import publication_problem
from onceflow.connectors.postgres.replication import ReplicationConnection, ReplicationLostError
from onceflow.connectors.postgres.settings import (
    DEFAULTS,
    SettingError,
    connect,
    conninfo,
    publication_name,
)
from onceflow.connectors.settings import masked


def slot_problem(conn: psycopg.Connection[Any], slot: str) -> SettingError | None:
    """A slot of that name that is not this source's kind (another database, plugin)."""
    found = conn.execute(
        "SELECT s.plugin, d.datname = current_database()"
        " FROM pg_replication_slots s LEFT JOIN pg_database d ON d.oid = s.datoid"
        " WHERE s.slot_name = %s",
        (slot,),
    ).fetchone()
    if found is not None and (found[0] != "pgoutput" or not found[1]):
        return SettingError(
            "slot",
            f"slot {slot!r} exists for another database or plugin ({found[0]}); choose "
            "another name",
        )
    return None


def in_recovery(conn: psycopg.Connection[Any]) -> bool:
    """True on a hot standby (a read replica), which replays the primary's WAL."""
    (recovering,) = conn.execute("SELECT pg_is_in_recovery()").fetchone() or (False,)
    return bool(recovering)


def standby_problem(mode: str, recovering: bool) -> ConfigProblem | None:
    """A polling mode cannot be exactly-once on a hot standby. Its high-water mark waits
    for the transactions running when it was taken (``pg_locks``, ``pg_prepared_xacts``),
    and on a standby those list only the standby's own read-only sessions: a row that
    takes a smaller value on the primary and commits after a larger one was read is
    skipped for good. The primary's transaction ids (``pg_current_snapshot()``) would
    not close the hole either: a transaction can draw its value from the sequence
    before it has an id. CDC decodes the WAL in commit order wherever it is decoded,
    so it is not concerned."""
    if not recovering or mode == "cdc":
        return None
    order = "incrementingColumn" if mode == "incrementing" else "timestampColumn"
    return ConfigProblem(
        "url",
        f"the server is a hot standby (pg_is_in_recovery() is true), where mode {mode} "
        "sees only the standby's own running transactions, not the primary's: a row "
        f"whose {order} value commits on the primary after a larger one was read would "
        "be skipped for good; point url at the primary",
        exactly_once_only=True,
    )


def refused_replication(error: str, secrets: Mapping[str, str]) -> SettingError:
    return SettingError(
        "url",
        f"the database refused a replication connection ({masked(error, secrets)}); the "
        "user needs the REPLICATION attribute and pg_hba.conf a 'replication' entry for it",
    )


def replication_problems(conn: psycopg.Connection[Any]) -> list[SettingError]:
    found = []
    (level,) = conn.execute("SHOW wal_level").fetchone() or ("",)
    if level != "logical":
        found.append(
            SettingError(
                "url",
                f"the server's wal_level is {level}; change data capture needs "
                "wal_level = logical (postgresql.conf, then a restart)",
            )
        )
    role = conn.execute(
        "SELECT current_user, rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user"
    ).fetchone()
    if role is not None and not role[1]:
        found.append(
            SettingError(
                "url",
                f"user {role[0]} may not read the WAL: ALTER ROLE {role[0]} REPLICATION "
                "(or use a user that has it)",
            )
        )
    return found


def source_problems(config: Mapping[str, Any], secrets: Mapping[str, str]) -> list[ConfigProblem]:
    merged = {**DEFAULTS, **config}
    try:
        return _problems(merged, secrets)
    except SettingError as error:
        return [error.problem]
    except psycopg.Error as error:
        return [ConfigProblem("url", f"asking the database failed: {masked(str(error), secrets)}")]


def _problems(merged: Mapping[str, Any], secrets: Mapping[str, str]) -> list[ConfigProblem]:
    cdc = merged["mode"] == "cdc"
    found: list[SettingError] = []
    with (
        connect(merged["url"], secrets, "onceflow-check") as conn,
        answering_within(conn, "the check"),
    ):
        tables = []
        for name in merged["tables"]:
            try:
                tables.append(describe(conn, name, cdc=cdc))
            except SettingError as error:
                found.append(error)
        if not cdc:
            standby = standby_problem(merged["mode"], in_recovery(conn))
            problems = [e.problem for e in found + _column_problems(merged, tables)]
            return problems + ([standby] if standby else [])
        found += replication_problems(conn)
        if len(tables) == len(merged["tables"]):
            publication = publication_name(merged)
            found += filter(None, [publication_problem(conn, publication, tables)])
        found += filter(None, [slot_problem(conn, merged["slot"])])
    if not found:
        found += filter(None, [_replication_connection_problem(merged["url"], secrets)])
    return [error.problem for error in found]


def _column_problems(merged: Mapping[str, Any], tables: list[Table]) -> list[SettingError]:
    columns = {
        "incrementingColumn": merged["incrementingColumn"],
        "timestampColumn": merged["timestampColumn"],
    }
    return [
        SettingError(setting, f"{table.name} has no column {column!r}")
        for table in tables
        for setting, column in columns.items()
        if column is not None and column not in table.columns
    ]


def _replication_connection_problem(url: str, secrets: Mapping[str, str]) -> SettingError | None:
    """pg_hba.conf lists replication connections apart from the others."""
    try:
        ReplicationConnection(conninfo(url, secrets, "onceflow-check")).close()
    except ReplicationLostError as error:
        return refused_replication(str(error), secrets)
    return None
