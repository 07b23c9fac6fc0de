"""The connector API, shaped after Kafka Connect's source API (and KIP-618's additions).

A connector plans tasks; a task turns an external system into ``SourceRecord``s, each
carrying the source partition and offset it came from. The runtime, not the task,
decides when records and offsets become durable: tasks never track committed offsets
themselves, they read them through the ``OffsetReader`` at start.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

SourcePartition = Mapping[str, Any]
SourceOffset = Mapping[str, Any]


@dataclass(slots=True)
class SourceRecord:
    """One record and the position in the source system it was read from. Not to be
    changed once ``poll`` returned it: the runtime keeps it until its transaction
    commits. Not frozen because a frozen dataclass costs a microsecond more to build,
    a sixth of the raw producer's time per small record."""

    source_partition: SourcePartition
    source_offset: SourceOffset
    value: bytes | None
    key: bytes | None = None
    topic: str | None = None
    """Destination topic; ``None`` means the source's ``spec.topic``."""
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp_ms: int | None = None
    partition: int | None = None
    """Destination partition; ``None`` means the partitioner's choice (by key)."""


class ConnectorError(RuntimeError):
    """The source system cannot be read as configured (unreachable, changed under the
    connector): the message names the setting to fix. The task exits with an error
    instead of guessing, and restarts from its committed offsets."""


# The other fix of a problem that only takes exactly-once away: trade it for running.
EXACTLY_ONCE_WAIVER = (
    "or, to run it without exactly-once, set spec.exactlyOnceSupport: requested instead of required"
)


@dataclass(frozen=True)
class ConfigProblem:
    """A connector config error: ``field`` is the key under ``spec.connector.config``."""

    field: str
    message: str
    exactly_once_only: bool = False
    """The source can run as configured, only not exactly-once (a polling query pointed
    at a read replica): refused under ``exactlyOnceSupport: required``, logged and run
    without exactly-once under ``requested``, as a config the connector declares no
    exactly-once support for is."""


@dataclass(frozen=True)
class KafkaRead:
    """A Kafka topic a connector's tasks read, and the cluster they read it on."""

    topic: str
    bootstrap_servers: str
    """The cluster's bootstrap servers, as the config gives them."""
    field: str
    """The key under ``spec.connector.config`` that names the topic (``topics[0]``)."""


class OffsetReader(Protocol):
    """Committed source offsets, as of the task's start (read to the end, committed only)."""

    def offset(self, partition: SourcePartition) -> SourceOffset | None: ...


class TransactionContext(Protocol):
    """Lets a task define transaction boundaries (``transactionBoundary: connector``)."""

    def commit_transaction(self) -> None:
        """Commit after the records of the current ``poll()`` batch."""

    def commit_transaction_after(self, record: SourceRecord) -> None:
        """Commit right after ``record`` (a record of the current batch) is written;
        later records open a new transaction."""

    def abort_transaction(self) -> None:
        """Abort after the current batch: its records are discarded, and (KIP-618) their
        offsets are committed anyway, so a restarted task does not emit them again."""

    def abort_transaction_after(self, record: SourceRecord) -> None:
        """Abort right after ``record`` (a record of the current batch): the open
        transaction up to it is discarded, its offsets committed as for an abort."""

    def running_long(self) -> bool:
        """True once the open Kafka transaction has used half of the source's
        ``transactionTimeoutMs``. The broker aborts a transaction that outlives the
        timeout, and a task that resumes before the same unit of work would meet the
        same fate on every restart: a connector whose own unit of atomicity (a database
        transaction) can grow without bound ends the Kafka transaction early when this
        says so, at a record it can resume after."""


@dataclass(frozen=True)
class TaskContext:
    """What a task receives at start."""

    task_id: int
    config: Mapping[str, Any]
    offsets: OffsetReader
    transactions: TransactionContext | None = None
    """Present only when the source's boundary is ``connector``."""
    secrets: Mapping[str, str] = field(default_factory=dict)
    """The keys of ``spec.connector.secretRef`` (credentials of the source system):
    mounted into the task, never part of ``config``."""
    exactly_once_required: bool = False
    """``spec.exactlyOnceSupport`` is ``required``: a task that finds at start what its
    connector's ``check`` reports as ``exactly_once_only`` (the system changed since,
    or a restart reached another server) stops with a ``ConnectorError`` naming the
    setting instead of running without exactly-once."""

    def refuse_or_warn(self, problem: ConfigProblem) -> str:
        """For a task that finds at start what its connector's ``check`` reports as
        ``exactly_once_only``: raises a ``ConnectorError`` naming the setting when the
        source requires exactly-once, else returns the warning to log before the task
        runs without it (the same rule as ``api.check_verdict.judge_source_check``)."""
        if self.exactly_once_required:
            raise ConnectorError(
                f"config.{problem.field}: {problem.message}; {EXACTLY_ONCE_WAIVER}"
            )
        return (
            f"config.{problem.field}: {problem.message}; the task runs without exactly-once "
            "(spec.exactlyOnceSupport is requested)"
        )


@dataclass(frozen=True)
class Retention:
    """What a source system keeps on a source's behalf until the source has read it
    (a replication slot's WAL). It grows while the source is behind or stopped, and
    the system's disk fills if nobody notices: above ``limit_bytes`` the source is
    reported Degraded, naming ``limit_from``."""

    what: str
    """What is kept, in words for status (e.g. "WAL kept by replication slot x")."""
    bytes: int
    limit_bytes: int
    limit_from: str
    """Where the limit comes from: a setting to raise, or the system's own cap."""


@dataclass(frozen=True)
class Behind:
    """A task's lag behind its source system, in the unit the system counts in."""

    bytes: int | None = None
    records: int | None = None


class SourceTask(ABC):
    """One unit of parallel work; owns a disjoint set of source partitions."""

    def start(self, context: TaskContext) -> None:
        """Prepare to poll; resume from ``context.offsets``."""
        self.context = context

    @abstractmethod
    def poll(self) -> list[SourceRecord]:
        """The next batch; an empty list when nothing is available right now."""

    def commit_record(self, record: SourceRecord) -> None:
        """Called once ``record`` is committed: release upstream resources, never track
        offsets here (the runtime already stored them with the record)."""

    def commit(self) -> None:
        """Called after each successful commit of the runtime's transaction or flush."""

    def stop(self) -> None:
        """Release resources; called once, after the last poll."""

    def retained_bytes(self) -> int | None:
        """How much the source system keeps for this task until it reads it (a slot's
        retained WAL), as last measured; exported as a gauge. Called between polls,
        so it must not do I/O itself: a task measures on its own schedule."""
        return None

    def behind(self) -> Behind | None:
        """How far this task is behind what its source system holds now, as last
        measured (WAL not yet delivered, bytes of files not yet read, records of
        mirrored partitions not yet copied); exported as gauges, so a slow source shows
        before its system fills up. Called between polls, without I/O, as
        ``retained_bytes``. None: not measured."""
        return None


class OffsetRefusedError(ValueError):
    """An offset a user asked to set that the connector cannot resume from; the message
    names what is wrong and what would do."""


class SourceConnector(ABC):
    """Plans tasks for one connector instance and declares its exactly-once abilities."""

    task_class: type[SourceTask]
    secret_is_kafka_client_config: ClassVar[bool] = False
    """The connector's Secret holds librdkafka settings (a source cluster's client): the
    operator, which runs ``check`` in its own process, takes only the keys it takes
    from a Pipeline's auth Secret (logic.client_keys)."""

    def validate(self, config: Mapping[str, Any]) -> list[ConfigProblem]:
        """Problems with ``config``; an empty list when it is usable."""
        return []

    def check(
        self,
        config: Mapping[str, Any],
        secrets: Mapping[str, str],
        *,
        shares_task_filesystem: bool,
    ) -> list[ConfigProblem]:
        """Problems only the source system can reveal (a missing table or privilege, an
        unreachable cluster, a missing directory), found by asking it with a valid
        ``config``. Runs before a generation's tasks start, so a config that cannot run
        writes nothing; ``shares_task_filesystem`` says whether the caller sees the
        files the tasks will (``onceflow run``) or not (the operator's pod). A problem
        marked ``exactly_once_only`` refuses only a source that requires exactly-once:
        what the system is (a replica) can take away what ``exactly_once_support``
        declared for the config alone."""
        return []

    @abstractmethod
    def task_configs(self, config: Mapping[str, Any], max_tasks: int) -> list[dict[str, Any]]:
        """At most ``max_tasks`` task configs splitting the work; deterministic for a
        given input, since a change of output starts a new task generation."""

    def retention(self, config: Mapping[str, Any], secrets: Mapping[str, str]) -> Retention | None:
        """What the source system keeps for this source (see ``Retention``), asked by
        the operator on its passes with a valid ``config``; None when it keeps nothing.
        Raises when the system cannot be asked: the operator then keeps the last
        measurement in status (a database too full to answer must not look healthy),
        and the pass goes on."""
        return None

    def exactly_once_support(self, config: Mapping[str, Any]) -> bool:
        """True when the connector can resume exactly from a stored offset (KIP-618)."""
        return False

    def exactly_once_refusal(self, config: Mapping[str, Any]) -> str | None:
        """Why this config cannot be exactly-once, in words for the user (a connector
        whose answer depends on its config should say which setting decides)."""
        return None

    def can_define_transaction_boundaries(self, config: Mapping[str, Any]) -> bool:
        """True when tasks may drive the ``TransactionContext``."""
        return False

    def alter_offset(
        self, config: Mapping[str, Any], partition: SourcePartition, offset: SourceOffset
    ) -> SourceOffset:
        """The offset to store when a user sets ``partition`` to ``offset`` (KIP-875's
        alterOffsets), given in the shape ``onceflow offsets list`` prints: checked, and
        completed where the connector stores more than a user can know. Raises
        ``OffsetRefusedError`` saying why not. Pure (no I/O): the operator calls it in
        its pass. Default: refused, since only the connector knows what its offsets
        mean; forgetting them (a reset, or a null offset) needs no connector."""
        raise OffsetRefusedError(
            "this connector does not say how its offsets may be set; forgetting them "
            "(reset: true, or offset: null) works: the partition starts over"
        )

    def forget_offset(self, config: Mapping[str, Any], partition: SourcePartition) -> None:
        """Whether ``partition``'s stored offset may be forgotten (an entry whose offset
        is null, or a reset that sets none for it); raises ``OffsetRefusedError`` saying
        why not and what would do. Pure (no I/O), as ``alter_offset``. Default: allowed,
        since a partition without an offset starts over as a new one does; a connector
        whose source system keeps a position of its own for the source (a replication
        slot) refuses, because that position stays where the offset left it and the
        partition would not start over at all."""

    def check_offsets(
        self,
        config: Mapping[str, Any],
        secrets: Mapping[str, str],
        entries: Sequence[tuple[SourcePartition, SourceOffset | None]],
    ) -> dict[int, str]:
        """What only the source system can tell of the offsets a change sets (a WAL
        position the replication slot has already released): ``entries`` are the
        change's, in its order, each offset as ``alter_offset`` returned it (None for a
        forgotten one, which has nothing to check). Returns why, by entry index, for
        each entry the system cannot honour (naming what would do); empty when all can
        be. Asked once every entry has passed ``alter_offset`` and before anything is
        written, with a valid ``config`` and the connector's Secret, as ``retention`` is
        (``alter_offset`` is pure, so it cannot ask). Raises when the system cannot be
        asked: a refusal is for good, and an outage is not the change's fault.
        Default: nothing to check."""
        return {}

    def kafka_reads(self, config: Mapping[str, Any]) -> list[KafkaRead]:
        """The Kafka topics the tasks read with this ``config``, as a pure function of
        it (no I/O). Onceflow judges its topic graph with them: a source reading what
        its own pipeline writes can feed records round a cycle without end. Asked of
        configs ``validate`` may refuse, so it returns the well-formed reads and never
        raises. Default: a connector that reads no Kafka topic."""
        return []


ConnectorLookup = Callable[[str], SourceConnector]
"""``spec.connector.type`` -> connector; raises LookupError saying what is installed."""


@dataclass
class TransactionRequest:
    """A boundary a task asked for; filled by the runtime's TransactionContext."""

    commit: bool
    after: SourceRecord | None = None


@dataclass
class RecordingTransactionContext:
    """The runtime's TransactionContext: it only records requests; the runner acts,
    and tells it when the open transaction began (``opened_at``: monotonic seconds,
    None while none is open)."""

    long_after_s: float = math.inf
    requests: list[TransactionRequest] = field(default_factory=list)
    opened_at: Callable[[], float | None] = lambda: None

    def running_long(self) -> bool:
        """False once a commit is already asked for in this poll: the transaction ends
        there, and a connector asking again after every later record would cut the rest
        of its batch into one-record transactions."""
        if any(request.commit for request in self.requests):
            return False
        opened = self.opened_at()
        return opened is not None and time.monotonic() - opened >= self.long_after_s

    def commit_transaction(self) -> None:
        self.requests.append(TransactionRequest(commit=True))

    def commit_transaction_after(self, record: SourceRecord) -> None:
        self.requests.append(TransactionRequest(commit=True, after=record))

    def abort_transaction(self) -> None:
        self.requests.append(TransactionRequest(commit=False))

    def abort_transaction_after(self, record: SourceRecord) -> None:
        self.requests.append(TransactionRequest(commit=False, after=record))

    def take(self) -> list[TransactionRequest]:
        taken, self.requests = self.requests, []
        return taken
