"""A stopped CDC source's offset as a user sets or forgets it (KIP-875): the listed
shape and a bare ``{lsn}`` are taken, stored as a position the task resumes after;
anything else is refused naming the field and the fix; forgetting the offset of the
slot the source reads is refused (the slot stays ahead); and the slot's verdict on an
lsn (released already, not written yet, no slot) is judged without a database."""

from __future__ import annotations

import re
from typing import Any

import pytest

from onceflow.api.connector import OffsetRefusedError, SourceConnector
from onceflow.api.source import OffsetsChangeResult
from onceflow.connectors.postgres import PostgresConnector
from onceflow.connectors.postgres.cdc_offsets import SlotPositions, lsn_refusal
from onceflow.connectors.postgres.pgoutput import parse_lsn
from onceflow.connectors.sequence import SequenceConnector
from onceflow.logic.offsets_change import checked, refused_by_its_system
from onceflow.model.tasks import OffsetsRequest

CDC = {"url": "postgresql://app@127.0.0.1:9/shop", "tables": ["public.orders"], "slot": "orders"}
QUERY = {
    "url": CDC["url"],
    "tables": ["public.orders"],
    "mode": "incrementing",
    "incrementingColumn": "id",
}
AT = {"system": "7301234567890123456", "slot": "orders"}
SEGMENT = {"table": "public.orders", "after": ["41"], "lsn": "0/3000000"}
postgres = PostgresConnector()


@pytest.mark.parametrize(
    ("offset", "stored"),
    [
        # A record's lsn: that transaction and every one before it count as delivered.
        ({"lsn": "0/16B3748"}, {"lsn": "0/16B3748", "change": "0/16B3748", "seq": 0}),
        ({"lsn": "0/16b3748"}, {"lsn": "0/16B3748", "change": "0/16B3748", "seq": 0}),
        # As listed: inside that transaction, after that record.
        ({"tables": ["public.orders"], "lsn": "1/A0", "change": "1/80", "seq": 2},
         {"tables": ["public.orders"], "lsn": "1/A0", "change": "1/80", "seq": 2}),
        # Segments are kept while they can still skip something, dropped past them.
        ({"tables": ["public.orders"], "segments": [SEGMENT], "lsn": "0/2000000"},
         {"tables": ["public.orders"], "segments": [SEGMENT], "lsn": "0/2000000",
          "change": "0/2000000", "seq": 0}),
        ({"tables": ["public.orders"], "segments": [SEGMENT], "lsn": "0/3000000"},
         {"tables": ["public.orders"], "lsn": "0/3000000", "change": "0/3000000", "seq": 0}),
    ],
)  # fmt: skip
def test_an_lsn_in_the_listed_shape_is_taken(
    offset: dict[str, Any], stored: dict[str, Any]
) -> None:
    assert postgres.alter_offset(CDC, AT, offset) == stored


def test_a_bare_lsn_resumes_after_the_whole_transaction_committed_there() -> None:
    """As the task compares positions (commit, change, record): a transaction's changes
    lie before its commit record, so all of the one committed at the lsn sort at or
    before the stored position, and the first record of a later commit after it."""
    stored = postgres.alter_offset(CDC, AT, {"lsn": "0/5000"})
    resume = (parse_lsn(stored["lsn"]), parse_lsn(stored["change"]), stored["seq"])
    commit = 0x5000
    assert (commit, 0x4F00, 0) < resume and (commit, commit - 1, 10**6) < resume
    assert resume < (0x5001, 0x4000, 0), "an interleaved change of a later commit is sent"


@pytest.mark.parametrize(
    ("partition", "offset", "says"),
    [
        ({**AT, "slot": "other"}, {"lsn": "0/1"}, "the slot config.slot names (orders)"),
        ({**AT, "system": 7301234567890123456}, {"lsn": "0/1"}, "as a quoted string"),
        ({"slot": "orders"}, {"lsn": "0/1"}, "a partition is {system, slot}"),
        (AT, {}, "lsn is not a WAL position"),
        (AT, {"lsn": "16B3748"}, "such as 0/16B3748"),
        (AT, {"lsn": 23803720}, "lsn is not a WAL position"),
        (AT, {"lsn": "0/1", "position": 5}, "unknown position"),
        (AT, {"tables": ["public.orders"], "snapshot": {"table": "public.orders", "after": ["7"]}},
         "Remove snapshot and set lsn"),
        (AT, {"lsn": "0/A0", "seq": 1}, "change and seq go together"),
        (AT, {"lsn": "0/A0", "change": "0/B0", "seq": 1}, "at or before lsn"),
        (AT, {"lsn": "0/A0", "change": "0/80", "seq": -1}, "seq >= 0"),
        (AT, {"lsn": "0/A0", "tables": "public.orders"}, "tables is kept as listed"),
        (AT, {"lsn": "0/A0", "segments": [SEGMENT]}, "segments go with the tables"),
        (AT, {"lsn": "0/A0", "tables": ["public.other"], "segments": [SEGMENT]},
         "each segment's table among them"),
        (AT, {"lsn": "0/A0", "tables": ["public.orders"], "segments": [{"lsn": "0/1"}]},
         "{table, after, lsn} each"),
    ],
)  # fmt: skip
def test_anything_else_is_refused_naming_the_field_and_the_fix(
    partition: dict[str, Any], offset: dict[str, Any], says: str
) -> None:
    with pytest.raises(OffsetRefusedError, match=re.escape(says)):
        postgres.alter_offset(CDC, partition, offset)


def test_the_polling_modes_do_not_say_yet_how_their_offsets_are_set() -> None:
    with pytest.raises(OffsetRefusedError, match="does not say how"):
        postgres.alter_offset(QUERY, {"table": "public.orders"}, {"id": 5})


def test_forgetting_the_offset_of_the_slot_the_source_reads_is_refused() -> None:
    with pytest.raises(OffsetRefusedError) as refused:
        postgres.forget_offset(CDC, AT)
    assert "give the source a new slot name (config.slot)" in str(refused.value)
    assert "pg_drop_replication_slot('orders')" in str(refused.value)
    postgres.forget_offset(CDC, {**AT, "slot": "orders_before"})  # left over: may go
    postgres.forget_offset(QUERY, {"table": "public.orders"})  # read again from its start


def test_a_connector_that_says_nothing_forgets_and_has_nothing_to_check() -> None:
    class Silent(SequenceConnector):
        forget_offset = SourceConnector.forget_offset
        check_offsets = SourceConnector.check_offsets

    Silent().forget_offset({}, {"stream": "s0"})
    assert Silent().check_offsets({}, {}, [({"stream": "s0"}, {"seq": 1})]) == {}


def test_nothing_to_check_asks_no_database() -> None:
    """The URL answers nothing: a check that connected would fail."""
    assert postgres.check_offsets(CDC, {}, [(AT, None)]) == {}
    assert postgres.check_offsets(QUERY, {}, [({"table": "public.orders"}, {"id": 5})]) == {}


SLOT = SlotPositions(confirmed_flush=0x2000, current=0x9000, lost=False)


@pytest.mark.parametrize(
    ("lsn", "positions", "says"),
    [
        (0x1FFF, SLOT, "before slot orders's confirmed_flush_lsn 0/2000"),
        (0x9001, SLOT, "beyond the server's current WAL position 0/9000"),
        (0x2000, None, "slot orders (config.slot) does not exist"),
        (0x2000, SlotPositions(0x2000, 0x9000, lost=True), "was invalidated"),
    ],
)
def test_the_slot_refuses_what_it_cannot_resume_after(
    lsn: int, positions: SlotPositions | None, says: str
) -> None:
    why = lsn_refusal("orders", lsn, positions)
    assert why is not None and says in why
    if positions is not None and not positions.lost and lsn < 0x2000:
        assert "cannot be honoured" in why and "a new slot name" in why


@pytest.mark.parametrize("lsn", [0x2000, 0x5000, 0x9000])
def test_from_the_confirmed_position_to_the_current_one_the_slot_can_resume(lsn: int) -> None:
    assert lsn_refusal("orders", lsn, SLOT) is None


def test_a_change_forgetting_the_slots_offset_is_refused_whole_before_anything_is_asked() -> None:
    """Through the change's check: a null entry, and a reset that sets no offset for
    the slot's partition, are refused naming where; a reset that sets it is taken."""
    null = OffsetsRequest("c", False, ((AT, None),))
    assert "spec.offsetsChange.offsets[0]: " in checked(postgres, CDC, null).message
    bare_reset = checked(postgres, CDC, OffsetsRequest("c", True, ()), stored=[AT])
    assert bare_reset.result is OffsetsChangeResult.REFUSED
    assert "spec.offsetsChange.reset: " in bare_reset.message
    reset_to = OffsetsRequest("c", True, ((AT, {"lsn": "0/16B3748"}),))
    assert checked(postgres, CDC, reset_to, stored=[AT]).applying


def test_the_systems_refusals_name_their_entries_and_write_nothing() -> None:
    request = OffsetsRequest("c", False, ((AT, {"lsn": "0/16B3748"}),))
    applying = checked(postgres, CDC, request)
    assert refused_by_its_system(applying, {}) is applying
    refused = refused_by_its_system(applying, {0: "behind the slot"})
    assert refused.result is OffsetsChangeResult.REFUSED and not refused.writing
    assert refused.message == "spec.offsetsChange.offsets[0]: behind the slot; nothing was written"
