"""The columns of a SparkJob's view ``input``, known without Spark: Kafka's own (as
Spark's Kafka source gives them, headers included) and the top-level fields of the
value's JSON schema. Admission checks watermark and dedup columns against them, so a
misspelt column is refused when the SparkJob is written, not when its driver starts."""

from __future__ import annotations

import re

# Spark's Kafka source schema with includeHeaders; types as Spark's DDL names them.
KAFKA_COLUMNS: dict[str, str] = {
    "key": "binary",
    "value": "binary",
    "topic": "string",
    "partition": "int",
    "offset": "bigint",
    "timestamp": "timestamp",
    "timestampType": "int",
    "headers": "array<struct<key:string,value:binary>>",
}
# Kafka's columns that differ between two deliveries of one record (a redelivery is
# a new record of the topic). Dedup keeps one delivery of each id, and which one it
# keeps within a batch follows the shuffle's arrival order, which a replay need not
# repeat: so these identify no record, and view `input` drops them after dedup, or a
# replayed batch could write a different copy (to another partition or slice).
DELIVERY_COLUMNS = ("topic", "partition", "offset", "timestamp", "timestampType")
# What Spark accepts as an event-time column for a watermark.
EVENT_TIME_TYPES = ("timestamp", "timestamp_ltz", "timestamp_ntz")

_FIELD = re.compile(
    r"^\s*(`(?P<quoted>[^`]+)`|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))\s*:?\s+(?P<type>.+)$", re.S
)
_BRACKETS = {"<": ">", "(": ")"}


def _top_level_parts(ddl: str) -> list[str]:
    """``ddl`` split at the commas outside ``<>`` and ``()`` (and quoted comments)."""
    parts, depth, quote, start = [], 0, "", 0
    for index, char in enumerate(ddl):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in _BRACKETS:
            depth += 1
        elif char in _BRACKETS.values():
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced {char!r} in the schema")
        elif char == "," and depth == 0:
            parts.append(ddl[start:index])
            start = index + 1
    if depth or quote:
        raise ValueError("unbalanced brackets or quotes in the schema")
    parts.append(ddl[start:])
    return parts


def schema_fields(ddl: str) -> dict[str, str]:
    """Top-level field names of a Spark DDL schema and their types, lower case
    (``decimal(10,2)``, ``struct<...>``); raises ValueError on what is not a field list.
    Spark checks the types themselves when the driver starts."""
    fields: dict[str, str] = {}
    for part in _top_level_parts(ddl):
        match = _FIELD.match(part)
        if match is None or not part.strip():
            raise ValueError(f"{part.strip()!r} is not `name TYPE`")
        name = match.group("quoted") or match.group("plain")
        if column_type(fields, name) is not None:
            raise ValueError(f"field {name!r} appears twice (Spark ignores case)")
        fields[name] = _type_name(match.group("type"))
    return fields


def _type_name(declared: str) -> str:
    """The type without NOT NULL / COMMENT, spaces removed, lower case."""
    cut = re.split(r"\s+(?=NOT\s+NULL\b|COMMENT\b)", declared.strip(), maxsplit=1, flags=re.I)
    return re.sub(r"\s+", "", cut[0]).lower()


def column_type(columns: dict[str, str], name: str) -> str | None:
    """The type of column ``name``, found as Spark resolves names: ignoring case."""
    wanted = name.lower()
    return next((kind for column, kind in columns.items() if column.lower() == wanted), None)


def is_event_time(kind: str) -> bool:
    return kind in EVENT_TIME_TYPES
