"""A logical replication connection, spoken at libpq level through ``psycopg.pq``.

psycopg 3 has no replication API, but its libpq binding reaches the protocol: a
connection opened with ``replication=database`` takes replication commands
(``CREATE_REPLICATION_SLOT``, ``START_REPLICATION``) and streams WAL as COPY data.
Connection failures become ``ReplicationLostError`` so the caller can reconnect and resume
from its own position; anything else the server refuses is a ``ConnectorError`` naming
the setting involved.
"""

from __future__ import annotations

import select
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
from psycopg import pq, sql

from onceflow.api.connector import ConnectorError
from onceflow.connectors.postgres.pgoutput import (
    Keepalive,
    XLogData,
    decode_frame,
    parse_lsn,
    standby_status,
)

OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)
# SQLSTATEs that mean "not allowed": the message says which privilege is missing.
INSUFFICIENT_PRIVILEGE = "42501"
# The slot is still held by a walsender that has not noticed its client is gone (a
# killed task, a terminated connection): worth asking again shortly.
OBJECT_IN_USE = "55006"


class ReplicationLostError(RuntimeError):
    """The replication connection broke (terminated backend, network, restart)."""


@dataclass(frozen=True)
class CreatedSlot:
    consistent_point: int
    """Changes committed after this position are streamed; none before."""
    snapshot: str | None
    """The exported snapshot showing exactly the data as of ``consistent_point``; valid
    while the connection that created it stays open and idle."""


class ReplicationConnection:
    def __init__(self, conninfo: str) -> None:
        self.conn = pq.PGconn.connect(conninfo.encode() + b" replication=database")
        if self.conn.status != pq.ConnStatus.OK:
            message = self._error_text()
            self.conn.finish()
            raise ReplicationLostError(message)

    def _error_text(self) -> str:
        return self.conn.get_error_message().strip()

    def command(self, command: str, field: str) -> list[list[str | None]]:
        result = self.conn.exec_(command.encode())
        if result.status not in OK:
            self._refused(result, field)
        return [
            [
                None if (v := result.get_value(row, col)) is None else v.decode()
                for col in range(result.nfields)
            ]
            for row in range(result.ntuples)
        ]

    def _refused(self, result: pq.abc.PGresult, field: str) -> None:
        if self.conn.status != pq.ConnStatus.OK:
            raise ReplicationLostError(self._error_text())
        code = (result.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()
        message = (result.error_message or b"").decode(errors="replace").strip()
        if code == OBJECT_IN_USE:
            raise ReplicationLostError(message)
        if code == INSUFFICIENT_PRIVILEGE:
            message += " (the connector's user needs the REPLICATION attribute)"
        raise ConnectorError(f"config.{field}: {message}")

    def create_slot(self, slot: str, *, temporary: bool, export: bool) -> CreatedSlot:
        command = (
            f"CREATE_REPLICATION_SLOT {sql.Identifier(slot).as_string(None)}"
            f"{' TEMPORARY' if temporary else ''} LOGICAL pgoutput"
            f" {'EXPORT_SNAPSHOT' if export else 'NOEXPORT_SNAPSHOT'}"
        )
        ((_name, point, snapshot, _plugin),) = self.command(command, "slot")
        assert point is not None
        return CreatedSlot(parse_lsn(point), snapshot)

    def start(self, slot: str, publication: str) -> None:
        command = (
            f"START_REPLICATION SLOT {sql.Identifier(slot).as_string(None)} LOGICAL 0/0"
            f" (proto_version '1', publication_names {sql.Literal(publication).as_string(None)})"
        )
        result = self.conn.exec_(command.encode())
        if result.status != pq.ExecStatus.COPY_BOTH:
            self._refused(result, "slot")
        self.conn.nonblocking = 1

    def frames(self, timeout_s: float, limit: int) -> Iterator[XLogData | Keepalive]:
        """Up to ``limit`` frames, waiting at most ``timeout_s`` for the first; after
        it, only what has already arrived. "Arrived" is the socket, not libpq's buffer:
        that holds one read's worth (a few hundred changes), and a batch cut there
        under a flood or a backlog would make a Kafka transaction of every read
        whatever ``batchSize`` says."""
        wait = timeout_s
        for _ in range(limit):
            while True:
                try:
                    size, data = self.conn.get_copy_data(1)
                except psycopg.Error as error:
                    raise ReplicationLostError(str(error)) from error
                if size > 0:
                    wait = 0.0
                    yield decode_frame(bytes(data))
                    break
                if size in (-1, -2):
                    raise ReplicationLostError(self._error_text() or "replication stream ended")
                ready, _, _ = select.select([self.conn.socket], [], [], wait)
                if not ready:
                    return
                wait = 0.0
                try:
                    self.conn.consume_input()
                except psycopg.Error as error:
                    raise ReplicationLostError(str(error)) from error

    def send_status(self, received: int, flushed: int) -> None:
        try:
            self.conn.put_copy_data(standby_status(received, flushed))
            self.conn.flush()
        except psycopg.Error as error:
            raise ReplicationLostError(str(error)) from error

    def close(self) -> None:
        self.conn.finish()
