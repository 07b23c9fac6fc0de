"""What the database must offer a source, asked before any task starts (``check``) and
again by the task itself: readable tables with primary keys, logical WAL, a user with
REPLICATION, a publication and slot that fit. Each answer names the setting and the
statement that fixes it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from onceflow.api.connector import ConfigProblem
from onceflow.connectors.postgres.catalog import describe
from onceflow.connectors.postgres.publication import publication_problem
from onceflow.connectors.postgres.settings import DEFAULTS, SettingError, connect


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
    cdc = merged["mode"] == "cdc"
    try:
        conn = connect(merged["url"], secrets, "onceflow-check")
    except SettingError as error:
        return [error.problem]
    found: list[SettingError] = []
    with conn:
        tables = []
        for name in merged["tables"]:
            try:
                tables.append(describe(conn, name, require_key=cdc))
            except SettingError as error:
                found.append(error)
        if cdc:
            found += replication_problems(conn)
            if len(tables) == len(merged["tables"]):
                names = [t.name for t in tables]
                found += filter(
                    None,
                    [publication_problem(conn, merged["publication"] or merged["slot"], names)],
                )
            found += filter(None, [slot_problem(conn, merged["slot"])])
        else:
            columns = {
                "incrementingColumn": merged["incrementingColumn"],
                "timestampColumn": merged["timestampColumn"],
            }
            found += [
                SettingError(setting, f"{table.name} has no column {column!r}")
                for table in tables
                for setting, column in columns.items()
                if column is not None and column not in table.columns
            ]
    return [error.problem for error in found]
