"""Where a task's transactions end, by ``spec.transactionBoundary``: after every poll,
after an interval, or only where the connector asks (and where it cuts a poll when it
asks after records); and what a graceful stop does with an open transaction."""

from __future__ import annotations

import time

import pytest

from onceflow.api.connector import RecordingTransactionContext, SourceRecord, TransactionRequest
from onceflow.api.pipeline import ExactlyOnceMode
from onceflow.api.source import TransactionBoundary
from onceflow.api.task import FileAuthority, TaskSettings
from onceflow.runtime.boundaries import (
    AtStop,
    Boundaries,
    ConnectorBoundaries,
    ConnectorContractError,
    IntervalBoundaries,
    PollBoundaries,
    boundaries_for,
    split_at_boundaries,
)


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


def _settings(boundary: TransactionBoundary) -> TaskSettings:
    return TaskSettings(
        source="s",
        task_id=0,
        generation=1,
        mode=ExactlyOnceMode.ENABLED,
        bootstrap_servers="localhost:9092",
        topic="t",
        offsets_topic="o",
        transactional_id="x",
        connector_type="sequence",
        authority=FileAuthority(path="/state"),
        transaction_boundary=boundary,
        transaction_interval_ms=250,
        transaction_timeout_ms=60_000,
    )


@pytest.mark.parametrize(
    ("boundary", "kind"),
    [
        (TransactionBoundary.POLL, PollBoundaries),
        (TransactionBoundary.INTERVAL, IntervalBoundaries),
        (TransactionBoundary.CONNECTOR, ConnectorBoundaries),
    ],
)
def test_each_transaction_boundary_has_its_own_policy(
    boundary: TransactionBoundary, kind: type[Boundaries]
) -> None:
    assert type(boundaries_for(_settings(boundary))) is kind


@pytest.mark.parametrize(
    ("boundaries", "age_ms", "commits"),
    [
        (PollBoundaries(), 0.0, True),
        (PollBoundaries(), 1e9, True),
        (IntervalBoundaries(250), 0.0, False),
        (IntervalBoundaries(250), 249.9, False),
        (IntervalBoundaries(250), 250.0, True),
        (IntervalBoundaries(250), 1e9, True),
        (ConnectorBoundaries(long_after_s=30.0), 0.0, False),
        (ConnectorBoundaries(long_after_s=30.0), 1e9, False),
    ],
)
def test_after_a_poll_a_transaction_ends_by_its_policy_alone(
    boundaries: Boundaries, age_ms: float, commits: bool
) -> None:
    assert boundaries.commit_after_poll(age_ms) is commits


def test_the_interval_comes_from_the_settings() -> None:
    interval = boundaries_for(_settings(TransactionBoundary.INTERVAL))
    assert not interval.commit_after_poll(249)
    assert interval.commit_after_poll(250)


@pytest.mark.parametrize(
    ("boundaries", "at_stop"),
    [
        (PollBoundaries(), AtStop.COMMIT),
        (IntervalBoundaries(250), AtStop.COMMIT),
        (ConnectorBoundaries(long_after_s=30.0), AtStop.ABORT),
    ],
)
def test_a_stop_commits_an_open_transaction_unless_only_the_connector_may_end_it(
    boundaries: Boundaries, at_stop: AtStop
) -> None:
    assert boundaries.at_stop is at_stop


@pytest.mark.parametrize("boundaries", [PollBoundaries(), IntervalBoundaries(250)])
def test_without_connector_boundaries_the_connector_gets_no_context_and_polls_stay_whole(
    boundaries: Boundaries,
) -> None:
    assert boundaries.transactions is None
    records = _records(3)
    assert boundaries.pieces(records) == [(records, None)]


def test_a_connector_defined_transaction_runs_long_at_half_the_timeout() -> None:
    transactions = boundaries_for(_settings(TransactionBoundary.CONNECTOR)).transactions
    assert transactions is not None
    assert transactions.long_after_s == 30.0


def test_connector_boundaries_cut_where_asked_then_act_on_the_rest_in_order_once() -> None:
    boundaries = ConnectorBoundaries(long_after_s=30.0)
    records = _records(4)
    boundaries.transactions.commit_transaction_after(records[1])
    boundaries.transactions.abort_transaction()
    boundaries.transactions.commit_transaction()
    assert boundaries.pieces(records) == [
        (records[:2], TransactionRequest(commit=True, after=records[1])),
        (records[2:], None),
        ([], TransactionRequest(commit=False)),
        ([], TransactionRequest(commit=True)),
    ]
    assert boundaries.pieces([]) == [([], None)], "each request is acted on once"


def test_a_boundary_after_a_record_of_another_poll_breaks_the_contract() -> None:
    boundaries = ConnectorBoundaries(long_after_s=30.0)
    boundaries.transactions.commit_transaction_after(_records(1)[0])
    with pytest.raises(ConnectorContractError, match="not in the batch"):
        boundaries.pieces(_records(2))
