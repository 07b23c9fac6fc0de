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

from onceflow.connectors.postgres.pgoutput import UNCHANGED_TOAST

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


def encode(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()
