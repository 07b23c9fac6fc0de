"""The publication a CDC source streams: created for the configured tables when it is
missing; an existing one must already publish them (the connector never changes a
publication someone else may use)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from onceflow.api.connector import ConnectorError
from onceflow.connectors.postgres.catalog import qualified


def ensure_publication(conn: psycopg.Connection[Any], name: str, tables: list[str]) -> None:
    exists = conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (name,)).fetchone()
    if exists is None:
        statement = sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(
            sql.Identifier(name),
            sql.SQL(", ").join(sql.Identifier(*qualified(t)) for t in tables),
        )
        try:
            conn.execute(statement)
        except psycopg.errors.InsufficientPrivilege as error:
            raise ConnectorError(
                f"config.publication: publication {name!r} is missing and the connector's "
                f"user may not create it ({error.diag.message_primary}); it needs CREATE on "
                f"the database and to own the tables, or create it yourself: "
                f"CREATE PUBLICATION {name} FOR TABLE {', '.join(tables)}"
            ) from None
        return
    published = {
        f"{schema}.{table}"
        for schema, table in conn.execute(
            "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s", (name,)
        )
    }
    if missing := [t for t in tables if t not in published]:
        raise ConnectorError(
            f"config.publication: publication {name!r} does not publish "
            f"{', '.join(missing)}; ALTER PUBLICATION {name} ADD TABLE {', '.join(missing)}"
        )
