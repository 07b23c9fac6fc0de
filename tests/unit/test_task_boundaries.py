"""Where a task cuts a poll when its connector asks for boundaries after records."""

from __future__ import annotations

import time

from onceflow.api.connector import RecordingTransactionContext, SourceRecord, TransactionRequest
from onceflow.runtime.task import split_at_boundaries


def _records(count: int) -> list[SourceRecord]:
    return [SourceRecord({"p": 0}, {"o": n}, str(n).encode()) for n in range(count)]


def test_without_boundaries_the_poll_is_one_piece() -> None:
    records = _records(3)
    assert list(split_at_boundaries(records, {})) == [(records, None)]


def test_each_boundary_ends_a_piece_after_its_record_and_the_rest_follows() -> None:
    records = _records(5)
    commit = TransactionRequest(commit=True, after=records[1])
    abort = TransactionRequest(commit=False, after=records[2])
    pieces = list(split_at_boundaries(records, {id(records[1]): commit, id(records[2]): abort}))
    assert pieces == [(records[:2], commit), (records[2:3], abort), (records[3:], None)]


def test_a_boundary_after_the_last_record_leaves_an_empty_rest() -> None:
    records = _records(2)
    commit = TransactionRequest(commit=True, after=records[-1])
    assert list(split_at_boundaries(records, {id(records[-1]): commit})) == [
        (records, commit),
        ([], None),
    ]


def test_a_transaction_runs_long_only_while_open_past_half_its_timeout() -> None:
    txn = RecordingTransactionContext(long_after_s=30.0)
    assert not txn.running_long(), "no transaction is open"
    txn.opened_at = lambda: time.monotonic() - 10
    assert not txn.running_long()
    txn.opened_at = lambda: time.monotonic() - 31
    assert txn.running_long()
    assert not RecordingTransactionContext().running_long(), "without a timeout: never"
