"""The ``postgres`` connector's settings: their defaults, their checks (pure, for
admission) and the connection string they make with the connector's Secret."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from onceflow.api.connector import ConfigProblem, ConnectorError
from onceflow.connectors.postgres.libpq_keys import parameter_problems, with_content_files
from onceflow.connectors.settings import integer_problems, masked, unknown_settings

DEFAULTS: dict[str, Any] = {
    "mode": "cdc",
    "url": None,
    "tables": None,
    # cdc
    "slot": None,
    "publication": None,
    "snapshot": "initial",
    "snapshotChunkSize": 2000,
    "transactionsPerCommit": 1,
    "maxRecordsPerTransaction": 100000,
    "reconnectTimeoutMs": 60000,
    "statusIntervalMs": 10000,
    "maxRetainedWalBytes": 10 * 1024**3,
    # incrementing / timestamp+incrementing
    "incrementingColumn": None,
    "timestampColumn": None,
    "pollIntervalMs": 1000,
    # both. Records per poll, and so per Kafka transaction in cdc: at 1,000 a flood of
    # changes paid a commit per 1,000 and streamed about a tenth slower than at 2,048
    # (Debezium's max.batch.size), which users compare it with (vs_debezium.py).
    "batchSize": 2048,
}
MODES = ("cdc", "incrementing", "timestamp+incrementing")
SNAPSHOTS = ("initial", "never")
# Slot names PostgreSQL accepts, leaving room for the snapshot's temporary slots.
SLOT_NAME = re.compile(r"[a-z0-9_]{1,40}")
IDENTIFIER = re.compile(r"[^\s.\"]{1,63}(\.[^\s.\"]{1,63})?")


def problems(config: Mapping[str, Any]) -> list[ConfigProblem]:
    found = unknown_settings(config, DEFAULTS)
    merged = {**DEFAULTS, **config}
    mode = merged["mode"]
    if mode not in MODES:
        found.append(ConfigProblem("mode", "one of " + ", ".join(MODES)))
    found += _url_problems(merged["url"])
    tables = merged["tables"]
    if not (
        isinstance(tables, list)
        and tables
        and all(isinstance(t, str) and IDENTIFIER.fullmatch(t) for t in tables)
        and len(set(tables)) == len(tables)
    ):
        found.append(
            ConfigProblem("tables", "a non-empty list of distinct table names (schema.table)")
        )
    if mode == "cdc":
        found += _cdc_problems(merged)
    elif mode in MODES:
        found += _query_problems(merged)
    found += integer_problems(merged, {"batchSize": 1})
    return found


def _url_problems(url: object) -> list[ConfigProblem]:
    if not (isinstance(url, str) and url):
        return [
            ConfigProblem(
                "url",
                "the database's connection string (postgresql://user@host:5432/db); the "
                "password belongs in the connector's secretRef (key: password)",
            )
        ]
    try:
        parsed = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as error:
        return [ConfigProblem("url", f"not a connection string: {error}")]
    if "password" in parsed:
        return [
            ConfigProblem(
                "url", "holds a password: move it to the connector's secretRef (key: password)"
            )
        ]
    return []


def _cdc_problems(merged: Mapping[str, Any]) -> list[ConfigProblem]:
    found = []
    if not (isinstance(merged["slot"], str) and SLOT_NAME.fullmatch(merged["slot"])):
        found.append(
            ConfigProblem(
                "slot", "the replication slot's name: 1-40 of a-z, 0-9 and _ (one per source)"
            )
        )
    publication = merged["publication"]
    if publication is not None and not (
        isinstance(publication, str) and SLOT_NAME.fullmatch(publication)
    ):
        found.append(
            ConfigProblem("publication", "1-40 of a-z, 0-9 and _, or omitted (the slot's name)")
        )
    if merged["snapshot"] not in SNAPSHOTS:
        found.append(ConfigProblem("snapshot", "one of " + ", ".join(SNAPSHOTS)))
    return found + integer_problems(
        merged,
        {
            "snapshotChunkSize": 1,
            "transactionsPerCommit": 1,
            "maxRecordsPerTransaction": 1,
            "maxRetainedWalBytes": 1,
            "reconnectTimeoutMs": 0,
            "statusIntervalMs": 100,
        },
    )


def publication_name(merged: Mapping[str, Any]) -> str:
    """The publication a CDC source decodes through: the one named, else the slot's name."""
    name: str = merged["publication"] or merged["slot"]
    return name


def _query_problems(merged: Mapping[str, Any]) -> list[ConfigProblem]:
    found = []
    mode, column, timestamp = (
        merged["mode"],
        merged["incrementingColumn"],
        merged["timestampColumn"],
    )
    if not (isinstance(column, str) and column):
        found.append(
            ConfigProblem(
                "incrementingColumn", f"required in mode {mode}: a column that only grows"
            )
        )
    if mode == "timestamp+incrementing" and not (isinstance(timestamp, str) and timestamp):
        found.append(ConfigProblem("timestampColumn", f"required in mode {mode}"))
    if mode == "incrementing" and timestamp is not None:
        found.append(ConfigProblem("timestampColumn", "only used in mode timestamp+incrementing"))
    return found + integer_problems(merged, {"pollIntervalMs": 10})


class SettingError(ConnectorError):
    """A problem of one setting, found by asking the database: raised by a task, and
    reported as a ``ConfigProblem`` by the check that runs before any task starts."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"config.{field}: {message}")
        self.problem = ConfigProblem(field, message)


def connect(url: str, secrets: Mapping[str, str], application: str) -> psycopg.Connection[Any]:
    """An autocommit connection, or a SettingError saying why there is none."""
    try:
        return psycopg.connect(conninfo(url, secrets, application), autocommit=True)
    except psycopg.OperationalError as error:
        # A server's own refusal (a wrong password, no such database) has an SQLSTATE
        # and takes a PostgreSQL server to say; how a connection failed below that
        # (refused, timed out, closed) would tell a tenant, through the operator's
        # check, which ports of the operator's network are open.
        said = f" ({masked(str(error).strip(), secrets)})" if error.sqlstate else ""
        raise SettingError(
            "url",
            f"the database did not accept the connection{said}; check the address and "
            "the connector's secretRef",
        ) from None


def connection_lost(error: psycopg.OperationalError) -> ConnectorError:
    """A connection that was open and went (a terminated session, a server going
    down): the task ends saying so, and its restart resumes from the committed offsets,
    which is all a lost connection needs."""
    return ConnectorError(f"config.url: the connection was lost ({error})")


CONNECT_TIMEOUT_S = 10
"""At most this long per connection attempt, whatever the URL or Secret asks: libpq
waits forever at 0 (its default) for a SYN nobody answers or a login nobody ends, and
the operator opens these connections on its own workers."""


def _bounded_connect_timeout(asked: object) -> str:
    """A tenant's ``connect_timeout`` if it is a shorter positive one, else the bound."""
    try:
        seconds = int(str(asked or 0))
    except ValueError:
        seconds = 0
    return str(seconds if 0 < seconds < CONNECT_TIMEOUT_S else CONNECT_TIMEOUT_S)


def conninfo(url: str, secrets: Mapping[str, str], application: str) -> str:
    """The connection string: ``url`` with the Secret's keys as libpq parameters
    (``password``, ``user``, ``sslmode``, certificates as PEM content...), only those
    ``libpq_keys`` allows, its connect timeout bounded."""
    try:
        in_url = {k: str(v) for k, v in conninfo_to_dict(url).items() if v is not None}
    except psycopg.ProgrammingError as error:
        raise SettingError("url", f"not a libpq URL ({masked(str(error), secrets)})") from None
    if problems := parameter_problems({**in_url, **secrets}):
        raise SettingError(
            "url", "; ".join(problems) + " (in the url or the connector's secretRef)"
        )
    asked = {**in_url, **secrets}.get("connect_timeout")
    # pgoutput sends text in the client encoding; the decoder reads UTF-8.
    return make_conninfo(
        "",
        **with_content_files({**in_url, **secrets}),
        connect_timeout=_bounded_connect_timeout(asked),
        application_name=application,
        client_encoding="UTF8",
    )
