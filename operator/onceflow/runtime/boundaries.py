"""Where a task's transactions end: one small policy per ``spec.transactionBoundary``,
chosen once from the task's settings (``boundaries_for``), so the task loop only polls,
writes, and asks.

Each policy answers three questions the loop would otherwise branch on: how a poll's
records are cut (only a connector that defines its own boundaries cuts them), whether
the open transaction ends once a poll is written, and what becomes of a transaction
still open when the task is asked to stop. No I/O: the loop acts on the answers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from enum import Enum

from onceflow.api.connector import RecordingTransactionContext, SourceRecord, TransactionRequest
from onceflow.api.source import TransactionBoundary
from onceflow.api.task import TaskSettings

Piece = tuple[list[SourceRecord], TransactionRequest | None]
"""Records to write, then the commit or abort to act on after them (None: none)."""


class ConnectorContractError(Exception):
    """The connector used the runtime's API in a way it does not allow."""


class AtStop(Enum):
    """What a graceful stop does with the transaction it finds open."""

    COMMIT = "commit"
    ABORT = "abort"


class Boundaries(ABC):
    """When the open transaction ends."""

    transactions: RecordingTransactionContext | None = None
    """Handed to the connector so it can ask for boundaries itself; only a policy that
    lets it has one."""

    at_stop = AtStop.COMMIT
    """A graceful stop finishes the open transaction by default: its records were
    polled, and the connector may already have moved on from them."""

    def pieces(self, records: list[SourceRecord]) -> list[Piece]:
        """A poll's records in the order they are written, each piece followed by the
        boundary the connector asked for there."""
        return [(records, None)]

    @abstractmethod
    def commit_after_poll(self, age_ms: float) -> bool:
        """Whether the transaction open after a poll's records are written (for
        ``age_ms`` since its first record) ends now."""


class PollBoundaries(Boundaries):
    """Every poll's records are one transaction: the smallest delay before consumers
    see them, at one commit per poll."""

    def commit_after_poll(self, age_ms: float) -> bool:
        return True


class IntervalBoundaries(Boundaries):
    """Polls are gathered into a transaction until it has been open ``interval_ms``:
    fewer, larger commits. Asked after every poll, an empty one too, so an idle
    connector's last records are not held past the interval."""

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms

    def commit_after_poll(self, age_ms: float) -> bool:
        return age_ms >= self.interval_ms


class ConnectorBoundaries(Boundaries):
    """Only the connector says where a transaction ends (its offsets may be valid only
    there), after any record of the poll that returned it or after the whole poll."""

    transactions: RecordingTransactionContext
    at_stop = AtStop.ABORT
    """An open transaction is aborted, as Connect does, rather than committed at a place
    the connector did not choose: the next instance resumes from the last boundary it
    asked for."""

    def __init__(self, long_after_s: float) -> None:
        self.transactions = RecordingTransactionContext(long_after_s=long_after_s)

    def commit_after_poll(self, age_ms: float) -> bool:
        return False

    def pieces(self, records: list[SourceRecord]) -> list[Piece]:
        """Cut where the connector asked during the poll; what it asked for without
        naming a record follows the whole poll, in the order asked."""
        requests = self.transactions.take()
        after = {id(r.after): r for r in requests if r.after is not None}
        if after and not after.keys() <= {id(r) for r in records}:
            raise ConnectorContractError(
                "the connector asked to commit or abort after a record that is not in"
                " the batch its poll() just returned; boundaries can only follow records"
                " of the current batch"
            )
        trailing: list[Piece] = [([], r) for r in requests if r.after is None]
        return [*split_at_boundaries(records, after), *trailing]


def split_at_boundaries(
    records: list[SourceRecord], after: dict[int, TransactionRequest]
) -> Iterator[Piece]:
    """A poll's records in pieces, each with the boundary the connector asked for
    after its last record (``after``: requests by the id of that record); the rest,
    perhaps empty, with None."""
    start = 0
    if after:
        for i, record in enumerate(records):
            request = after.get(id(record))
            if request is not None:
                yield records[start : i + 1], request
                start = i + 1
    yield records[start:], None


def boundaries_for(settings: TaskSettings) -> Boundaries:
    """The policy ``settings.transaction_boundary`` names. A connector-defined
    transaction is said to run long (``RecordingTransactionContext.running_long``) at
    half the transaction timeout, leaving the connector the other half to end it before
    the broker aborts it."""
    match settings.transaction_boundary:
        case TransactionBoundary.POLL:
            return PollBoundaries()
        case TransactionBoundary.INTERVAL:
            return IntervalBoundaries(settings.transaction_interval_ms)
        case TransactionBoundary.CONNECTOR:
            return ConnectorBoundaries(long_after_s=settings.transaction_timeout_ms / 2000)
