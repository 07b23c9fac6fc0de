"""The JSON layout of the postgres connector's records (documented in
docs/connectors.md, "Record layout").

Key: the primary key columns, ``{"id": 42}``. Value::

    {"op": "r|c|u|d|t", "table": "public.orders",
     "before": {...} | null, "after": {...} | null,
     "lsn": "0/16B3748", "txId": 731, "commitTs": 1700000000000}

``r`` is a row read by the snapshot (``lsn`` is the snapshot's position, ``txId`` and
``commitTs`` null); ``before`` holds what REPLICA IDENTITY gives (the key by default,
the whole row under FULL). Columns keep PostgreSQL's text form except booleans,
integers, finite floats and json/jsonb, which become their JSON counterparts; numeric
stays a string so no digit is lost. A large (TOASTed) value an update did not change is
not sent by PostgreSQL: it is left out of ``after`` and named in ``unchangedToast``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from onceflow.connectors.postgres.catalog import Table
from onceflow.connectors.postgres.pgoutput import (
    UNCHANGED_TOAST,
    Delete,
    Insert,
    Relation,
    Tuple,
    Update,
)
from onceflow.connectors.postgres.snapshot_window import Key

BOOL, INT2, INT4, INT8, OID, FLOAT4, FLOAT8, JSON, JSONB = 16, 21, 23, 20, 26, 700, 701, 114, 3802


def json_value(text: str | None, type_oid: int) -> Any:
    if text is None:
        return None
    if type_oid == BOOL:
        return text == "t"
    if type_oid in (INT2, INT4, INT8, OID):
        return int(text)
    if type_oid in (FLOAT4, FLOAT8) and text not in ("NaN", "Infinity", "-Infinity"):
        return float(text)
    if type_oid in (JSON, JSONB):
        return json.loads(text)
    return text


def row_object(
    columns: Sequence[str], types: Sequence[int], values: Sequence[object]
) -> tuple[dict[str, Any], list[str]]:
    """The row as JSON, and the columns left out because their value was not sent."""
    row: dict[str, Any] = {}
    unchanged: list[str] = []
    for name, type_oid, value in zip(columns, types, values, strict=True):
        if value is UNCHANGED_TOAST:
            unchanged.append(name)
        else:
            row[name] = json_value(value if value is None else str(value), type_oid)
    return row, unchanged


_COMPACT = json.JSONEncoder(separators=(",", ":"))
"""One encoder for every record: ``json.dumps`` with any option builds a new one per call."""


def encode(document: dict[str, Any]) -> bytes:
    return _COMPACT.encode(document).encode()


def record_key(table: Table, key: Key) -> bytes:
    """The record's key: the primary key's columns, typed as in the value."""
    types = table.key_types
    return encode({k: json_value(v, t) for k, v, t in zip(table.key, key, types, strict=True)})


def change_documents(
    message: Insert | Update | Delete, relation: Relation, table: Table
) -> list[tuple[str, Key, dict[str, Any]]]:
    """The records a change makes: (op, key, before/after). An update that changes the
    primary key is a delete of the old key and an insert of the new one, so each key's
    records stay in order in their partition."""
    names, types, identity = relation.names, relation.types, relation.identity

    def row(values: Tuple | None) -> dict[str, Any] | None:
        return None if values is None else row_object(names, types, values)[0]

    def before(values: Tuple | None) -> dict[str, Any] | None:
        """Under REPLICA IDENTITY DEFAULT the old row holds only the key (the other
        columns come as nulls that mean "not sent"); under FULL, all of it."""
        old = row(values)
        if old is None or relation.replica_identity == "f":
            return old
        return {k: v for k, v in old.items() if k in identity}

    def key_of(values: Tuple) -> Key:
        at = relation.position
        return tuple(None if values[at[k]] is None else str(values[at[k]]) for k in table.key)

    if isinstance(message, Insert):
        return [("c", key_of(message.new), {"before": None, "after": row(message.new)})]
    if isinstance(message, Delete):
        return [("d", key_of(message.old), {"before": before(message.old), "after": None})]
    new_key = key_of(message.new)
    old_key = key_of(message.old) if message.old is not None else new_key
    if old_key != new_key:
        return [
            ("d", old_key, {"before": before(message.old), "after": None}),
            ("c", new_key, {"before": None, "after": row(message.new)}),
        ]
    unchanged = row_object(names, types, message.new)[1]
    return [
        (
            "u",
            new_key,
            {
                "before": before(message.old),
                "after": row(message.new),
                **({"unchangedToast": unchanged} if unchanged else {}),
            },
        )
    ]
