"""A stopped CDC source's offset, set or forgotten by a user (KIP-875), and a set one
checked against the replication slot.

What a set offset means. ``{lsn: X}``: every database transaction committed at or
before WAL position X counts as delivered, and the task resumes with the first one
committed after it. A record's value carries its transaction's commit position as
``lsn``, so setting a record's ``lsn`` skips its whole transaction and every one before.
It is stored as the task stores a position (``streaming_phase.Position``): commit X,
change X, record 0. A transaction's changes precede its commit record, so none of the one
committed at X is at X itself: each of its records sorts before that position, and
each record of a later commit after it, which is what the task compares. Given as
``onceflow offsets list`` prints it, with ``change`` and ``seq``, the position is
taken as it is: the task resumes inside that transaction, after that record.

The snapshot. Setting ``lsn`` ends an unfinished initial snapshot: an offset with a
position and no ``snapshot`` key is how the task knows the snapshot is done, and a
snapshot's own position cannot be set (its exported snapshots lived only as long as
their sessions). The rows it had not read are never read; their changes committed
after ``lsn`` are. The listed ``tables`` and ``segments`` are kept: they say which
tables were snapshotted (so a table added later is still refused) and which changes
the rows already written show.

What the slot allows (``check_cdc_offsets``, the half that asks the database).
PostgreSQL decodes a logical slot from its ``confirmed_flush_lsn`` whatever earlier
position a client asks for: the transactions committed before it are not available any
more. An lsn before it is a rewind nobody can honour; one past the server's current
WAL position names transactions not yet written (every one until the WAL gets there
would be skipped); without the slot nothing resumes at all (the task refuses to start).

Forgetting. The slot stays where the offset left it, so a task without an offset would
not start over: under ``snapshot: never`` it would deliver again what the slot still
sends (at least the last transaction delivered, whose commit position is what the task
confirms), and under ``initial`` it would read a new snapshot against a slot far older
than it, which only a new slot is proven for. A new slot name starts over cleanly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from onceflow.api.connector import OffsetRefusedError, SourceOffset, SourcePartition
from onceflow.connectors.postgres.answer_deadline import answering_within
from onceflow.connectors.postgres.pgoutput import lsn_text, parse_lsn
from onceflow.connectors.postgres.server_checks import slot_problem
from onceflow.connectors.postgres.settings import DEFAULTS, SettingError, connect
from onceflow.connectors.postgres.snapshot_window import Segment, window_end
from onceflow.connectors.settings import is_int, masked

LSN = re.compile(r"[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}")
SYSTEM = re.compile(r"[0-9]{1,20}")
"""IDENTIFY_SYSTEM's identifier: a 64-bit integer, written in decimal."""
SETTABLE = ("tables", "segments", "lsn", "change", "seq")
SHAPE = (
    "an offset is {lsn: 'X/Y'}, a WAL position as PostgreSQL writes it (hex/hex): every "
    "database transaction committed at or before it counts as delivered, and the source "
    "resumes with the first committed after it"
)
NEW_SLOT = (
    "to read the tables whole again, give the source a new slot name (config.slot): a new "
    "slot starts with a full snapshot"
)


def _slot(config: Mapping[str, Any]) -> str:
    return str({**DEFAULTS, **config}["slot"])


# -- setting (pure) --------------------------------------------------------------------


def alter_cdc_offset(
    config: Mapping[str, Any], partition: SourcePartition, offset: SourceOffset
) -> dict[str, Any]:
    """The offset to store for ``{lsn}`` (or the listed shape); see the module's
    docstring for what it means and what happens to an unfinished snapshot."""
    _check_partition(config, partition)
    said = f"offset {dict(offset)}"
    if "snapshot" in offset:
        raise OffsetRefusedError(
            f"{said}: the position of an unfinished snapshot (snapshot) cannot be set: its "
            "exported snapshots are gone with their sessions. Remove snapshot and set lsn: "
            "the snapshot then counts as done, and the rows it has not read are never read "
            f"(only their changes after lsn); {NEW_SLOT}"
        )
    if unknown := sorted(set(offset) - set(SETTABLE)):
        raise OffsetRefusedError(f"{said}: unknown {', '.join(unknown)}; {SHAPE}")
    lsn = _lsn(offset.get("lsn"), said, "lsn")
    return {**_snapshot_window(offset, lsn, said), "lsn": lsn_text(lsn), **_record(offset, lsn)}


def _check_partition(config: Mapping[str, Any], partition: SourcePartition) -> None:
    """The task's partition is the database system and the slot: any other is never
    read. The system is a string (IDENTIFY_SYSTEM's answer); unquoted in YAML it would
    be a number, and the offset would be stored under a partition no task reads."""
    slot, system = _slot(config), partition.get("system")
    if (
        set(partition) != {"system", "slot"}
        or partition["slot"] != slot
        or not (isinstance(system, str) and SYSTEM.fullmatch(system))
    ):
        raise OffsetRefusedError(
            f"partition {dict(partition)}: a partition is {{system, slot}} as `onceflow "
            "offsets list` prints it: the database system's identifier, as a quoted string, "
            f"and the slot config.slot names ({slot})"
        )


def _lsn(value: object, said: str, key: str) -> int:
    if not (isinstance(value, str) and LSN.fullmatch(value)):
        raise OffsetRefusedError(
            f"{said}: {key} is not a WAL position as PostgreSQL writes it (such as "
            f"0/16B3748); {SHAPE}"
        )
    return parse_lsn(value)


def _record(offset: SourceOffset, lsn: int) -> dict[str, Any]:
    """The record of the transaction committed at ``lsn`` to resume after: the listed
    one, or one past its last (change ``lsn`` itself, where none of its changes is)."""
    given = {"change", "seq"} & set(offset)
    if not given:
        return {"change": lsn_text(lsn), "seq": 0}
    change, seq = offset.get("change"), offset.get("seq")
    if not (
        given == {"change", "seq"}
        and isinstance(change, str)
        and LSN.fullmatch(change)
        and parse_lsn(change) <= lsn
        and is_int(seq, 0)
    ):
        raise OffsetRefusedError(
            f"offset {dict(offset)}: change and seq go together, as listed: a record of the "
            "transaction committed at lsn (change a WAL position at or before lsn, seq >= 0); "
            "give lsn alone to resume after that whole transaction"
        )
    return {"change": lsn_text(parse_lsn(change)), "seq": int(offset["seq"])}


def _snapshot_window(offset: SourceOffset, lsn: int, said: str) -> dict[str, Any]:
    """``tables`` and ``segments`` as listed; the segments only while ``lsn`` is inside
    their window (the task drops them past it too, as they can skip nothing there)."""
    tables = offset.get("tables")
    if tables is not None and not (
        isinstance(tables, list) and tables and all(isinstance(t, str) and t for t in tables)
    ):
        raise OffsetRefusedError(
            f"{said}: tables is kept as listed (the tables the snapshot read, in its order) "
            "or left out (then the configured ones count as snapshotted)"
        )
    kept: dict[str, Any] = {} if tables is None else {"tables": list(tables)}
    segments = _segments(offset.get("segments"), said)
    if segments and lsn < window_end(segments):
        if tables is None or any(segment.table not in tables for segment in segments):
            raise OffsetRefusedError(
                f"{said}: segments go with the tables listed with them (each segment's "
                "table among them); keep both as listed, or leave both out"
            )
        kept["segments"] = [segment.to_offset() for segment in segments]
    return kept


def _segments(value: object, said: str) -> list[Segment]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(_is_segment(s) for s in value):
        raise OffsetRefusedError(
            f"{said}: segments are kept only as `onceflow offsets list` prints them "
            "({table, after, lsn} each), or left out"
        )
    return [Segment.from_offset(s) for s in value]


def _is_segment(value: object) -> bool:
    if not (isinstance(value, Mapping) and set(value) == {"table", "after", "lsn"}):
        return False
    table, after, lsn = value["table"], value["after"], value["lsn"]
    key_ok = after is None or (
        isinstance(after, list) and all(k is None or isinstance(k, str) for k in after)
    )
    return isinstance(table, str) and isinstance(lsn, str) and bool(LSN.fullmatch(lsn)) and key_ok


# -- forgetting (pure) -----------------------------------------------------------------


def forget_cdc_offset(config: Mapping[str, Any], partition: SourcePartition) -> None:
    """Refused for the slot ``config.slot`` names (see the module's docstring); the
    offset of a slot the source no longer reads is only left over, and may go."""
    slot = _slot(config)
    if partition.get("slot") != slot:
        return
    raise OffsetRefusedError(
        f"partition {dict(partition)}: slot {slot} (config.slot) stays where this offset "
        "left it, so forgetting the offset would not start the source over: the task would "
        "resume from the slot's position with nothing to say what of it was delivered "
        "(under snapshot: never, what the slot still holds is delivered again). To start "
        "over with a new snapshot, give the source a new slot name (config.slot) and drop "
        f"this slot (SELECT pg_drop_replication_slot('{slot}')); to skip ahead, set an lsn "
        "instead"
    )


# -- checking against the slot (I/O) ---------------------------------------------------


@dataclass(frozen=True)
class SlotPositions:
    """Where a slot and its server stand."""

    confirmed_flush: int | None
    """Transactions committed before it are not available from the slot any more; None
    for a slot that has none (not a usable logical slot)."""
    current: int
    """The server's WAL position: what it has written, or on a standby replayed."""
    lost: bool
    """Invalidated (``wal_status`` lost): the server removed WAL the slot needed."""


def slot_positions(conn: psycopg.Connection[Any], slot: str) -> SlotPositions | None:
    """None when there is no such slot."""
    found = conn.execute(
        "SELECT confirmed_flush_lsn::text, wal_status IS NOT DISTINCT FROM 'lost',"
        " (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()"
        " ELSE pg_current_wal_lsn() END)::text"
        " FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
    ).fetchone()
    if found is None:
        return None
    confirmed, lost, current = found
    return SlotPositions(
        confirmed_flush=None if confirmed is None else parse_lsn(confirmed),
        current=parse_lsn(current),
        lost=bool(lost),
    )


def lsn_refusal(slot: str, lsn: int, positions: SlotPositions | None) -> str | None:
    """Why the slot cannot resume after ``lsn``; None when it can."""
    said = f"lsn {lsn_text(lsn)}"
    if positions is None:
        return (
            f"{said}: slot {slot} (config.slot) does not exist, and a task with an offset "
            "and no slot refuses to start: the changes since the slot went are gone. A "
            "source that never ran creates its slot when it first starts (set its offset "
            f"after that); {NEW_SLOT}"
        )
    if positions.lost or positions.confirmed_flush is None:
        return (
            f"{said}: slot {slot} was invalidated (its wal_status is lost): the WAL it kept "
            f"is gone, and no position can be resumed from; {NEW_SLOT}"
        )
    if lsn < positions.confirmed_flush:
        confirmed = lsn_text(positions.confirmed_flush)
        return (
            f"{said}: before slot {slot}'s confirmed_flush_lsn {confirmed}: PostgreSQL "
            "decodes a slot from there whatever earlier position is asked (transactions "
            "committed before it are not available any more), so this rewind cannot be "
            f"honoured; the earliest lsn the slot can resume after is {confirmed}; {NEW_SLOT}"
        )
    if lsn > positions.current:
        current = lsn_text(positions.current)
        return (
            f"{said}: beyond the server's current WAL position {current}: every transaction "
            "until the WAL gets there would be skipped; give a position the server has "
            f"written (a record's lsn, or {current} to skip everything so far)"
        )
    return None


def check_cdc_offsets(
    config: Mapping[str, Any],
    secrets: Mapping[str, str],
    entries: Sequence[tuple[SourcePartition, SourceOffset | None]],
) -> dict[int, str]:
    """Each entry's lsn against the slot config.slot names (entries that passed
    ``alter_cdc_offset``, whose partition is that slot's). No connection for a change
    that only forgets. Raises a SettingError naming config.url when the database
    cannot be asked, bounded as the operator's other questions are."""
    asked = {
        index: parse_lsn(str(offset["lsn"]))
        for index, (_, offset) in enumerate(entries)
        if offset is not None and "lsn" in offset
    }
    if not asked:
        return {}
    merged = {**DEFAULTS, **config}
    slot = str(merged["slot"])
    try:
        with (
            connect(merged["url"], secrets, f"onceflow-{slot}-offsets") as conn,
            answering_within(conn, "the offsets check"),
        ):
            problem = slot_problem(conn, slot)
            positions = slot_positions(conn, slot)
            system = _system_identifier(conn)
    except psycopg.Error as error:
        raise SettingError(
            "url", f"asking the database failed: {masked(str(error), secrets)}"
        ) from None
    if problem is not None:
        return dict.fromkeys(asked, str(problem))
    refused = {index: lsn_refusal(slot, lsn, positions) for index, lsn in asked.items()}
    if system is not None:
        for index in asked:
            named = str(entries[index][0].get("system"))
            if named != system and refused[index] is None:
                refused[index] = (
                    f"partition system {named} is not this database system's ({system}): "
                    "no task would ever read the offset; copy the partition `onceflow "
                    "offsets list` prints"
                )
    return {index: why for index, why in refused.items() if why is not None}


def _system_identifier(conn: psycopg.Connection[Any]) -> str | None:
    """The database system's identifier, which names a CDC source's partition; None
    where the server does not let this user read it (managed services may not)."""
    try:
        with conn.transaction():
            row = conn.execute("SELECT system_identifier::text FROM pg_control_system()").fetchone()
    except psycopg.errors.InsufficientPrivilege:
        return None
    return None if row is None else str(row[0])
