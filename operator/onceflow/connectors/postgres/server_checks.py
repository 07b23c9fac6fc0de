"""What the database must offer a source, asked before any task starts (``check``) and
again by the task itself: readable tables with primary keys, logical WAL, a user with
REPLICATION, a publication and slot that fit. Each answer names the setting and the
statement that fixes it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from onceflow.api.connector import ConfigProblem
from onceflow.connectors.postgres.catalog import Table, describe
from onceflow.connectors.postgres.publication import publication_problem
from onceflow.connectors.postgres.replication import ReplicationConnection, ReplicationLostError
from onceflow.connectors.postgres.settings import DEFAULTS, SettingError, connect, conninfo
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
        return [error.problem for error in _problems(merged, secrets)]
    except SettingError as error:
        return [error.problem]
    except psycopg.Error as error:
        return [ConfigProblem("url", f"asking the database failed: {masked(str(error), secrets)}")]


def _problems(merged: Mapping[str, Any], secrets: Mapping[str, str]) -> list[SettingError]:
    cdc = merged["mode"] == "cdc"
    found: list[SettingError] = []
    with connect(merged["url"], secrets, "onceflow-check") as conn:
        tables = []
        for name in merged["tables"]:
            try:
                tables.append(describe(conn, name, cdc=cdc))
            except SettingError as error:
                found.append(error)
        if not cdc:
            return found + _column_problems(merged, tables)
        found += replication_problems(conn)
        if len(tables) == len(merged["tables"]):
            publication = merged["publication"] or merged["slot"]
            found += filter(None, [publication_problem(conn, publication, tables)])
        found += filter(None, [slot_problem(conn, merged["slot"])])
    if not found:
        found += filter(None, [_replication_connection_problem(merged["url"], secrets)])
    return found


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
