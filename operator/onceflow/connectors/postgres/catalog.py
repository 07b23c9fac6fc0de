"""What the connector needs to know about its tables, read from PostgreSQL's catalog,
and the SQL built from it.

Keys travel as the text PostgreSQL's output functions write (the form ``pgoutput``
streams them in), and are compared and ordered by the database in the column's own
type and collation, never in Python: ``'10' < '9'`` as text, and collations differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import psycopg
from psycopg import sql

from onceflow.connectors.postgres.settings import SettingError


@dataclass(frozen=True)
class Table:
    oid: int
    name: str
    """Schema-qualified, as the catalog spells it (``public.orders``)."""
    columns: tuple[str, ...]
    types: tuple[int, ...]
    """Type OIDs of ``columns``, for turning text values into JSON."""
    casts: tuple[str, ...]
    """``format_type`` of each column, with its collation where it has one."""
    key: tuple[str, ...]
    """The primary key's columns (empty for a table without one)."""

    @cached_property
    def key_types(self) -> tuple[int, ...]:
        """Type OIDs of ``key``: looked up once, not for every record's key."""
        return tuple(self.types[self.position[k]] for k in self.key)

    @cached_property
    def position(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.columns)}

    def values(self, row: Sequence[object], columns: Sequence[str]) -> tuple[str | None, ...]:
        """Some columns of a row of ``columns`` (text values)."""
        at = self.position
        return tuple(None if (v := row[at[c]]) is None else str(v) for c in columns)

    def typed(self, columns: Sequence[str]) -> sql.Composed:
        """Placeholders for ``columns`` as a typed row: ``(%s::int, %s::text COLLATE "C")``."""
        at = {name: i for i, name in enumerate(self.columns)}
        return sql.SQL("({})").format(
            sql.SQL(", ").join(sql.SQL("%s::" + self.casts[at[c]]) for c in columns)
        )

    def column_list(self, columns: Sequence[str]) -> sql.Composed:
        """Table-qualified: in ORDER BY a bare name would mean the text output column
        of the same name (``id::text``), ordering ``10`` before ``9``."""
        return sql.SQL(", ").join(sql.Identifier(*qualified(self.name), c) for c in columns)

    @property
    def identifier(self) -> sql.Identifier:
        return sql.Identifier(*qualified(self.name))


def qualified(name: str) -> tuple[str, str]:
    schema, dot, table = name.rpartition(".")
    return (schema if dot else "public"), table


def describe(conn: psycopg.Connection[Any], name: str, *, cdc: bool = True) -> Table:
    """The table's columns and primary key, or a SettingError naming what is wrong. For
    change data capture the table needs a primary key (records are keyed and snapshots
    read by it), changes that name rows by it (REPLICA IDENTITY DEFAULT or FULL) and
    no partitions (their changes would arrive under each partition's name)."""
    schema, table = qualified(name)
    found = conn.execute(
        "SELECT c.oid, n.nspname, c.relname, has_table_privilege(c.oid, 'SELECT'),"
        " c.relkind, c.relreplident"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')",
        (schema, table),
    ).fetchone()
    if found is None:
        raise SettingError("tables", f"table {schema}.{table} does not exist")
    oid, schema, table, readable, kind, identity = found
    if not readable:
        raise SettingError(
            "tables",
            f"the connector's user may not read {schema}.{table}; "
            f"GRANT SELECT ON {schema}.{table} to it",
        )
    columns = conn.execute(
        "SELECT a.attname, a.atttypid, format_type(a.atttypid, a.atttypmod),"
        " CASE WHEN a.attcollation = 0 THEN NULL"
        "      ELSE quote_ident(cn.nspname) || '.' || quote_ident(co.collname) END"
        " FROM pg_attribute a"
        " LEFT JOIN pg_collation co ON co.oid = a.attcollation"
        " LEFT JOIN pg_namespace cn ON cn.oid = co.collnamespace"
        " WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        (oid,),
    ).fetchall()
    key = conn.execute(
        "SELECT a.attname FROM pg_index i"
        " CROSS JOIN unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)"
        " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
        " WHERE i.indrelid = %s AND i.indisprimary ORDER BY k.ord",
        (oid,),
    ).fetchall()
    if cdc:
        _cdc_problem(f"{schema}.{table}", bool(key), kind, identity)
    return Table(
        oid=int(oid),
        name=f"{schema}.{table}",
        columns=tuple(c[0] for c in columns),
        types=tuple(int(c[1]) for c in columns),
        casts=tuple(t if coll is None else f"{t} COLLATE {coll}" for _, _, t, coll in columns),
        key=tuple(k for (k,) in key),
    )


def _cdc_problem(table: str, has_key: bool, kind: str, identity: str) -> None:
    if not has_key:
        raise SettingError(
            "tables",
            f"{table} has no primary key; the connector keys records and reads snapshots "
            "by it (add one)",
        )
    if kind == "p":
        raise SettingError(
            "tables",
            f"{table} is partitioned; its changes are decoded under each partition's "
            "name: list the partitions instead",
        )
    if identity not in ("d", "f"):
        raise SettingError(
            "tables",
            f"{table} names changed rows by another index or not at all (REPLICA "
            f"IDENTITY); deletes need the primary key: ALTER TABLE {table} REPLICA "
            "IDENTITY DEFAULT (or FULL for whole old rows)",
        )


def chunk_query(table: Table, after: bool) -> sql.Composed:
    """The next ``LIMIT %s`` rows in key order, as text (after the given key if ``after``)."""
    key = table.column_list(table.key)
    return sql.SQL("SELECT {columns} FROM {table} {where} ORDER BY {key} LIMIT %s").format(
        columns=text_columns(table),
        table=table.identifier,
        where=sql.SQL("WHERE ({}) > {}").format(key, table.typed(table.key))
        if after
        else sql.SQL(""),
        key=key,
    )


def text_columns(table: Table) -> sql.Composed:
    return sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in table.columns)


def key_after(
    conn: psycopg.Connection[Any],
    table: Table,
    key: Sequence[str | None],
    boundary: Sequence[str | None],
) -> bool:
    """Whether ``key`` sorts after ``boundary`` in the table's key order."""
    typed = table.typed(table.key)
    row = conn.execute(sql.SQL("SELECT {} > {}").format(typed, typed), [*key, *boundary]).fetchone()
    return bool(row and row[0])
