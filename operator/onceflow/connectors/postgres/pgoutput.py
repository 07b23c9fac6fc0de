"""Decoding of PostgreSQL's ``pgoutput`` logical replication messages (protocol
version 1) and of the streaming replication frames that carry them.

Pure functions over bytes, kept apart from the connection so the layout can be tested
without a server. Version 1 sends a transaction only once it has committed, whole, so
every change is known with its transaction's commit position before it is emitted.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property

# Timestamps in the protocol are microseconds since PostgreSQL's epoch.
PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
PG_EPOCH_MS = 946_684_800_000
"""PostgreSQL's epoch in Unix epoch milliseconds."""


def lsn_text(lsn: int) -> str:
    """An LSN as PostgreSQL writes it (``16/B374D848``)."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def epoch_ms(pg_micros: int) -> int:
    """A protocol timestamp as Unix epoch milliseconds, in integers: a float's
    rounding can put a commit time a millisecond early."""
    return PG_EPOCH_MS + pg_micros // 1000


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    in_key: bool


@dataclass(frozen=True)
class Relation:
    oid: int
    namespace: str
    name: str
    replica_identity: str
    columns: tuple[Column, ...]

    @property
    def qualified(self) -> str:
        return f"{self.namespace}.{self.name}"

    # Worked out once per relation rather than once per change: a flood of changes
    # spends its time in per-change work.
    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @cached_property
    def types(self) -> tuple[int, ...]:
        return tuple(c.type_oid for c in self.columns)

    @cached_property
    def identity(self) -> frozenset[str]:
        """The columns of the replica identity (the key, by default)."""
        return frozenset(c.name for c in self.columns if c.in_key)

    @cached_property
    def position(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.names)}


UNCHANGED_TOAST = object()
"""A column whose large value did not change and was not sent (``'u'``)."""

Tuple = tuple[str | object | None, ...]


@dataclass(frozen=True)
class Begin:
    final_lsn: int
    """The position of the transaction's commit record."""
    commit_ts: int
    xid: int


@dataclass(frozen=True)
class Commit:
    commit_lsn: int
    end_lsn: int
    commit_ts: int


@dataclass(frozen=True)
class Insert:
    relation: int
    new: Tuple


@dataclass(frozen=True)
class Update:
    relation: int
    old: Tuple | None
    """The old row's key columns (``K``) or the whole old row (``O``, REPLICA IDENTITY
    FULL); ``None`` when the key did not change and identity is not FULL."""
    new: Tuple


@dataclass(frozen=True)
class Delete:
    relation: int
    old: Tuple


@dataclass(frozen=True)
class Truncate:
    relations: tuple[int, ...]


@dataclass(frozen=True)
class Ignored:
    """A message the connector has no use for (origin, type, logical message)."""

    kind: str


Message = Begin | Commit | Relation | Insert | Update | Delete | Truncate | Ignored


U8, U16, U32, I32 = (struct.Struct(f) for f in (">B", ">H", ">I", ">i"))
BEGIN, COMMIT = struct.Struct(">QqI"), struct.Struct(">BQQq")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: struct.Struct) -> int:
        (value,) = fmt.unpack_from(self.data, self.at)
        self.at += fmt.size
        return int(value)

    def byte(self) -> str:
        value = chr(self.data[self.at])
        self.at += 1
        return value

    def string(self) -> str:
        end = self.data.index(b"\0", self.at)
        value = self.data[self.at : end].decode()
        self.at = end + 1
        return value

    def tuple_data(self) -> Tuple:
        data, at = self.data, self.at
        (count,) = U16.unpack_from(data, at)
        at += 2
        values: list[str | object | None] = []
        for _ in range(count):
            kind = data[at]
            at += 1
            if kind == 0x74:  # 't': text
                (length,) = U32.unpack_from(data, at)
                at += 4
                values.append(data[at : at + length].decode())
                at += length
            elif kind == 0x6E:  # 'n': null
                values.append(None)
            elif kind == 0x75:  # 'u': unchanged TOAST
                values.append(UNCHANGED_TOAST)
            else:
                raise ValueError(f"pgoutput: unexpected column kind {chr(kind)!r}")
        self.at = at
        return tuple(values)


def _begin(r: _Reader) -> Begin:
    final_lsn, commit_ts, xid = BEGIN.unpack_from(r.data, r.at)
    return Begin(final_lsn=final_lsn, commit_ts=commit_ts, xid=xid)


def _commit(r: _Reader) -> Commit:
    _flags, commit_lsn, end_lsn, commit_ts = COMMIT.unpack_from(r.data, r.at)
    return Commit(commit_lsn=commit_lsn, end_lsn=end_lsn, commit_ts=commit_ts)


def _relation(r: _Reader) -> Relation:
    oid, namespace, name = r.take(U32), r.string(), r.string()
    identity = r.byte()
    columns = []
    for _ in range(r.take(U16)):
        flags = r.take(U8)
        column_name = r.string()
        type_oid = r.take(U32)
        r.take(I32)  # type modifier
        columns.append(Column(column_name, type_oid, bool(flags & 1)))
    return Relation(oid, namespace or "pg_catalog", name, identity, tuple(columns))


def _insert(r: _Reader) -> Insert:
    relation = r.take(U32)
    r.byte()  # 'N'
    return Insert(relation, r.tuple_data())


def _update(r: _Reader) -> Update:
    relation = r.take(U32)
    marker = r.byte()
    old = None
    if marker in ("K", "O"):
        old = r.tuple_data()
        r.byte()  # 'N'
    return Update(relation, old, r.tuple_data())


def _delete(r: _Reader) -> Delete:
    relation = r.take(U32)
    r.byte()  # 'K' or 'O'
    return Delete(relation, r.tuple_data())


def _truncate(r: _Reader) -> Truncate:
    count = r.take(U32)
    r.take(U8)  # options (CASCADE, RESTART IDENTITY)
    return Truncate(tuple(r.take(U32) for _ in range(count)))


_DECODERS: dict[str, Callable[[_Reader], Message]] = {
    "B": _begin,
    "C": _commit,
    "R": _relation,
    "I": _insert,
    "U": _update,
    "D": _delete,
    "T": _truncate,
}


def decode(data: bytes) -> Message:
    """One pgoutput message."""
    r = _Reader(data)
    kind = r.byte()
    decoder = _DECODERS.get(kind)
    return Ignored(kind) if decoder is None else decoder(r)


@dataclass(frozen=True)
class XLogData:
    """A ``w`` frame: WAL data starting at ``start``; the server has sent up to ``end``."""

    start: int
    end: int
    payload: bytes


@dataclass(frozen=True)
class Keepalive:
    """A ``k`` frame: the server's WAL end, and whether it wants a status reply now."""

    end: int
    reply_requested: bool


def decode_frame(frame: bytes) -> XLogData | Keepalive:
    if frame[:1] == b"w":
        start, end, _sent = struct.unpack_from(">QQq", frame, 1)
        return XLogData(start, end, frame[25:])
    if frame[:1] == b"k":
        end, _sent, reply = struct.unpack_from(">QqB", frame, 1)
        return Keepalive(end, bool(reply))
    raise ValueError(f"replication: unexpected frame {frame[:1]!r}")


def standby_status(received: int, flushed: int, now: datetime | None = None) -> bytes:
    """An ``r`` frame: ``flushed`` is what the slot may confirm (and recycle WAL up to)."""
    moment = now or datetime.now(UTC)
    micros = (moment - PG_EPOCH) // timedelta(microseconds=1)
    return b"r" + struct.pack(">QQQqB", received, flushed, flushed, micros, 0)
