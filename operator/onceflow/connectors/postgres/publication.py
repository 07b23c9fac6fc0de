"""The publication a CDC source streams: created for the configured tables when it is
missing; an existing one must already publish them (the connector never changes a
publication someone else may use)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from onceflow.connectors.postgres.catalog import Table
from onceflow.connectors.postgres.settings import SettingError


def _create_statement(name: str, tables: list[Table]) -> sql.Composed:
    return sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(
        sql.Identifier(name), sql.SQL(", ").join(t.identifier for t in tables)
    )


def _cannot_create(name: str, tables: list[Table], why: str) -> SettingError:
    return SettingError(
        "publication",
        f"publication {name!r} is missing and the connector's user may not create it "
        f"({why}); it needs CREATE on the database and to own the tables, or create it "
        f"yourself: {_create_statement(name, tables).as_string(None)}",
    )


def publication_problem(
    conn: psycopg.Connection[Any], name: str, tables: list[Table]
) -> SettingError | None:
    """What keeps the publication from streaming ``tables``, without changing anything."""
    names = [t.name for t in tables]
    exists = conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (name,)).fetchone()
    if exists is None:
        allowed = conn.execute(
            "SELECT has_database_privilege(current_database(), 'CREATE')"
            " AND coalesce(bool_and(pg_has_role(c.relowner, 'USAGE')), true)"
            " FROM pg_class c WHERE c.oid = ANY(%s)",
            ([t.oid for t in tables],),
        ).fetchone()
        if not (allowed and allowed[0]):
            return _cannot_create(name, tables, "no CREATE on the database or not the owner")
        return None
    published = {
        f"{schema}.{table}"
        for schema, table in conn.execute(
            "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s", (name,)
        )
    }
    if missing := [t for t in names if t not in published]:
        add = sql.SQL("ALTER PUBLICATION {} ADD TABLE {}").format(
            sql.Identifier(name),
            sql.SQL(", ").join(t.identifier for t in tables if t.name in missing),
        )
        return SettingError(
            "publication",
            f"publication {name!r} does not publish {', '.join(missing)}; {add.as_string(None)}",
        )
    return None


def ensure_publication(conn: psycopg.Connection[Any], name: str, tables: list[Table]) -> None:
    exists = conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (name,)).fetchone()
    if exists is None:
        try:
            conn.execute(_create_statement(name, tables))
        except psycopg.errors.InsufficientPrivilege as error:
            raise _cannot_create(name, tables, str(error.diag.message_primary)) from None
        return
    if problem := publication_problem(conn, name, tables):
        raise problem
