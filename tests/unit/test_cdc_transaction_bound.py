"""Where the CDC task ends Kafka transactions under ``transactionBoundary: connector``:
after whole database transactions (``transactionsPerCommit``), and inside one only
past ``maxRecordsPerTransaction`` of its own records or when it alone has run long.
A smaller transaction is never split, whatever came before it in the Kafka
transaction."""

from __future__ import annotations

from typing import Any

from onceflow.api.connector import RecordingTransactionContext, SourceRecord, TaskContext
from onceflow.connectors.postgres.pgoutput import Commit
from onceflow.connectors.postgres.settings import DEFAULTS
from onceflow.connectors.postgres.snapshot_window import SnapshotWindow
from onceflow.connectors.postgres.streaming_phase import BEFORE_ANYTHING, StreamingPhase


def _task(per_commit: int, bound: int, txn: RecordingTransactionContext) -> StreamingPhase:
    """A task's streaming phase as its start leaves it, with nothing delivered yet
    uncommitted; no connection is opened before the first poll."""
    context = TaskContext(task_id=0, config={}, offsets=None, transactions=txn)  # type: ignore[arg-type]
    config = {
        **DEFAULTS,
        "slot": "s",
        "transactionsPerCommit": per_commit,
        "maxRecordsPerTransaction": bound,
    }
    return StreamingPhase(
        context,
        config,
        None,  # type: ignore[arg-type]
        "",
        {"p": 0},
        {},
        SnapshotWindow([], []),
        BEFORE_ANYTHING,
        delivered=lambda: True,
    )


def _stream(task: StreamingPhase, sizes: list[int]) -> list[tuple[int, int, bool]]:
    """Feeds database transactions of ``sizes`` records as ``_emit`` and ``Commit`` do;
    returns ``(transaction, record index, last of its transaction)`` of every record a
    commit was asked after."""
    txn = task.transactions
    assert isinstance(txn, RecordingTransactionContext)
    named: dict[int, tuple[int, int, bool]] = {}
    out: list[SourceRecord] = []
    for number, size in enumerate(sizes):
        task.txn, task.txn_records = object(), 0  # type: ignore[assignment]
        for index in range(size):
            record = SourceRecord({"p": 0}, {"o": index}, b"")
            named[id(record)] = (number, index, index == size - 1)
            if task.held is not None:
                out.append(task.held)
                task._bound_transaction(task.held)
            task.held = record
        task._end_transaction(Commit(commit_lsn=number + 1, end_lsn=number + 2, commit_ts=0), out)
    return [named[id(r.after)] for r in txn.take() if r.commit and r.after is not None]


def test_small_transactions_are_committed_whole_even_past_the_bound_in_total() -> None:
    task = _task(per_commit=25, bound=300, txn=RecordingTransactionContext())
    asked = _stream(task, [20] * 40)
    assert all(last for _, _, last in asked), asked
    # 300 records in whole transactions end a Kafka transaction before 25 of them do.
    assert [number for number, _, _ in asked] == [14, 29]


def test_a_transaction_past_the_bound_is_cut_every_bound_records() -> None:
    task = _task(per_commit=1, bound=300, txn=RecordingTransactionContext())
    assert _stream(task, [5, 700, 5]) == [
        (0, 4, True),
        (1, 299, False),
        (1, 599, False),
        (1, 699, True),
        (2, 4, True),
    ]


def test_a_long_running_transaction_is_cut_once_a_poll_not_after_every_record() -> None:
    txn: Any = RecordingTransactionContext(long_after_s=0.0)
    txn.opened_at = lambda: 0.0  # open since long ago
    task = _task(per_commit=1, bound=100_000, txn=txn)
    asked = _stream(task, [50])
    # One cut inside (the rest waits for the next poll's look), and the transaction's
    # own end, where transactionsPerCommit: 1 ends every Kafka transaction.
    assert asked == [(0, 0, False), (0, 49, True)]
