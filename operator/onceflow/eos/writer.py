"""Producers of a source task, as explicit state machines.

``TransactionalWriter`` (``enabled``): records and offsets in one transaction.
``IdempotentWriter`` (``disabled``/``preparing``): records first, offsets only after
the records are acknowledged (at-least-once, classic Connect).

Never abort after a commit timed out (KAFKA-17754): the outcome is unknown and an
abort could race the commit. The writer retries the commit until its deadline and
then raises ``CommitUncertainError``; the process exits so the next instance fences.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from onceflow.api.connector import SourceOffset, SourcePartition, SourceRecord
from onceflow.eos.clients import (
    client_config,
    describe_access_error,
    initialise_transactions,
    is_fenced,
)
from onceflow.eos.offsets import offset_key, offset_value

DeliveryCallback = Callable[[KafkaError | None, Message], None]

# A full local queue only needs the background thread to send; 0.1 s keeps latency low.
QUEUE_FULL_WAIT_S = 0.1
# A record's headers as the producer takes them.
Headers = list[tuple[str, str | bytes | None]]
# A sink's record: key, value and headers (None: none).
Record = tuple[bytes | None, bytes | None, Headers | None]


EAGER_CONNECTIONS = {"enable.sparse.connections": False}
"""Transactional producers connect to every broker they learn of at once. With
librdkafka's sparse connections the broker that must find the transaction coordinator
is connected only after a 50 ms hold-off (half of reconnect.backoff.ms), and sometimes
only after the coordinator query's 500 ms retry: measured on one id initialised again
and again, 63 ms per initialisation sparse, 10 ms eager (and no 500 ms outliers). A
Spark sink initialises a partition's producer again whenever the partition moves to
another Python worker; a source task once per start, which a rollout waits for. The
price is a connection to each broker per producer: a source task's producer writes to
every partition of its topic and opens most of them anyway, a sink's (one partition)
opens them for nothing. A pipeline's auth Secret can set the key back
(``tenants.kafkaSecretKeys``) on a cluster of very many brokers."""


JAVA_PARTITIONER = "murmur2_random"
"""Keyed records go where Kafka's Java producers and Connect put them (murmur2 of the
key), not librdkafka's default CRC32: consumers that co-partition by key, and a
pipeline that moves between Onceflow and Connect, see the same partitioning."""


class ProducerFencedError(Exception):
    """A newer producer with the same transactional.id initialised: this one is a zombie."""


class TransactionAbortedError(Exception):
    """The transaction could not commit and was aborted; nothing of it is visible."""


class TransactionTimedOutError(Exception):
    """The broker aborted the transaction because it stayed open past its timeout."""


class CommitUncertainError(Exception):
    """Commit kept timing out: the outcome is unknown, so the producer must be abandoned."""


class ProducerFailedError(Exception):
    """A fatal producer error other than fencing (authorization, misconfiguration)."""


WRITE_FAILURES: tuple[type[Exception], ...] = (
    ProducerFencedError,
    TransactionAbortedError,
    TransactionTimedOutError,
    CommitUncertainError,
    ProducerFailedError,
    KafkaException,
)
"""Every way a transactional write can fail: nothing of it is visible, or (uncertain)
writing it again is the way out."""


class TxnState(StrEnum):
    NEW = "new"
    READY = "ready"
    IN_TRANSACTION = "in-transaction"
    FENCED = "fenced"
    FAILED = "failed"


def _kafka_error(error: KafkaException) -> KafkaError:
    detail: KafkaError = error.args[0]
    return detail


class _ProducingWriter:
    """Shared produce path: retries a full local queue instead of failing."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer

    def send_records(self, records: Iterable[SourceRecord], default_topic: str) -> None:
        """A source task's per-poll path: one call per record, names bound once."""
        produce = self._produce
        for record in records:
            produce(
                record.topic or default_topic,
                record.key,
                record.value,
                record.headers,
                record.timestamp_ms,
                partition=-1 if record.partition is None else record.partition,
            )

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
        partition: int = -1,
    ) -> None:
        self._produce(topic, key, value, headers, timestamp_ms, partition=partition)

    def _produce(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
        on_delivery: DeliveryCallback | None = None,
        partition: int = -1,
    ) -> None:
        while True:
            try:
                if headers or timestamp_ms or on_delivery is not None:
                    self.producer.produce(
                        topic,
                        value=value,
                        key=key,
                        headers=list(headers) or None,
                        timestamp=timestamp_ms or 0,  # 0: let the client stamp the time
                        on_delivery=on_delivery,
                        partition=partition,  # -1: the configured partitioner
                    )
                else:
                    # Most records carry only a key and a value, and the short call
                    # costs half of the one with every keyword.
                    self.producer.produce(topic, value, key, partition)
                return
            except BufferError:
                self.producer.poll(QUEUE_FULL_WAIT_S)


class TransactionalWriter(_ProducingWriter):
    """One transactional producer; every public method checks the state it needs."""

    def __init__(
        self,
        bootstrap: str,
        transactional_id: str,
        *,
        extra: Mapping[str, str] | None = None,
        transaction_timeout_ms: int = 60000,
    ) -> None:
        super().__init__(
            Producer(
                {
                    **EAGER_CONNECTIONS,
                    **client_config(bootstrap, extra),
                    "transactional.id": transactional_id,
                    "transaction.timeout.ms": transaction_timeout_ms,
                    "linger.ms": 5,
                    "partitioner": JAVA_PARTITIONER,
                }
            )
        )
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.began_at = 0.0
        self.state = TxnState.NEW

    def _require(self, *states: TxnState) -> None:
        if self.state not in states:
            raise RuntimeError(f"transaction is {self.state}, expected one of {states}")

    def _fail(self, error: KafkaException, what: str) -> Exception:
        detail = _kafka_error(error)
        open_ms = (time.monotonic() - self.began_at) * 1000
        if (
            (is_fenced(detail) or detail.fatal() or detail.code() == KafkaError._FATAL)
            and self.state is TxnState.IN_TRANSACTION
            and open_ms >= self.transaction_timeout_ms
        ):
            # The coordinator bumps the epoch when it aborts an expired transaction, so
            # the client reports fencing (or a fatal error at the next produce); no
            # other producer took over, and restarting to "fence back" would loop.
            self.state = TxnState.FAILED
            return TransactionTimedOutError(
                f"{self.transactional_id}: the transaction stayed open {open_ms:.0f} ms, "
                f"longer than transaction.timeout.ms={self.transaction_timeout_ms}, and "
                "the broker aborted it; commit more often (transactionBoundaryIntervalMs, "
                f"or the connector's boundaries) or raise transactionTimeoutMs ({what}: "
                f"{detail.str()})"
            )
        if is_fenced(detail):
            self.state = TxnState.FENCED
            return ProducerFencedError(f"{self.transactional_id}: fenced during {what}")
        if detail.fatal() or detail.code() == KafkaError._FATAL:
            # _FATAL: the client raised an earlier fatal error again, at a call that came
            # after it (a produce after the producer was fenced in the background); the
            # cause is in the client's log, not in this error.
            self.state = TxnState.FAILED
            hint = describe_access_error(detail, self.transactional_id)
            return ProducerFailedError(hint or f"{self.transactional_id}: {what}: {detail.str()}")
        if (
            self.state is TxnState.IN_TRANSACTION
            and what != "abort_transaction"
            and (detail.txn_requires_abort() or detail.code() == KafkaError._STATE)
        ):
            # The transaction failed (a record the broker refused, say) but the producer
            # did not: librdkafka then refuses every produce with _STATE until it is
            # aborted. Abort here, so the caller sees one named error and a writer
            # ready for the next transaction.
            self.abort()
            return TransactionAbortedError(
                f"{self.transactional_id}: transaction aborted after {what} failed: "
                f"{detail.str()} (the client log names the record the broker refused)"
            )
        return error

    def _guarded(self, what: str, call: Callable[[], object]) -> None:
        """Runs one producer call, turning fencing and fatal errors into named ones."""
        try:
            call()
        except KafkaException as error:
            raise self._fail(error, what) from error

    def initialize(
        self, timeout_s: float = 60, give_up_after_s: float = 300, topic: str | None = None
    ) -> None:
        """Fences every earlier producer of this id and aborts its open transaction.

        A timed-out call is resumed, not failed: librdkafka keeps the request going, and
        a process paused mid-call (a SIGSTOPped or partitioned zombie) must still get to
        ask whether it was superseded instead of dying with an error. ``topic``: one this
        writer will produce to, for the metadata round trip before initialising."""
        self._require(TxnState.NEW)
        deadline = time.monotonic() + give_up_after_s
        while True:
            try:
                initialise_transactions(self.producer, timeout_s, topic)
                break
            except KafkaException as error:
                if _kafka_error(error).retriable() and time.monotonic() < deadline:
                    continue
                raise self._fail(error, "init_transactions") from error
        self.state = TxnState.READY

    def begin(self) -> None:
        self._require(TxnState.READY)
        self._guarded("begin_transaction", self.producer.begin_transaction)
        self.state = TxnState.IN_TRANSACTION
        self.began_at = time.monotonic()

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
        partition: int = -1,
    ) -> None:
        self._require(TxnState.IN_TRANSACTION)
        self._guarded(
            "produce",
            lambda: super(TransactionalWriter, self).send(
                topic, key, value, headers, timestamp_ms, partition
            ),
        )

    def send_records(self, records: Iterable[SourceRecord], default_topic: str) -> None:
        """The per-poll path of source tasks: ``send``'s checks once, not per record."""
        self._require(TxnState.IN_TRANSACTION)
        try:
            super().send_records(records, default_topic)
        except KafkaException as error:
            raise self._fail(error, "produce") from error

    def send_acknowledged(
        self, topic: str, key: bytes, value: bytes, partition: int, timeout_s: float = 30
    ) -> None:
        """Sends one record and waits until it left the queue. As a transaction's first
        record this checks, in one round trip, that no producer initialised this id
        since this one did: adding the partition to the transaction fails fatally for a
        fenced producer, which raises here, before anything else is sent, instead of at
        the commit. (A delivery callback cannot see it: the client raises the fatal
        error while calling it.) Any other failure of the record fails the commit."""
        self._require(TxnState.IN_TRANSACTION)
        try:
            self._produce(topic, key, value, partition=partition)
            left = self.producer.flush(timeout_s)
        except KafkaException as error:
            raise self._fail(error, "produce") from error
        if left:
            raise self._fail(
                KafkaException(KafkaError(KafkaError._TIMED_OUT)), "produce (no acknowledgement)"
            )

    def send_rows(
        self,
        topic: str,
        partition: int,
        keys: Iterable[bytes | None],
        values: Iterable[bytes | None],
        headers: Iterable[Headers | None] | None = None,
    ) -> int:
        """Bulk path for sinks, rows as columns: one state check, then a tight produce
        loop (the per-record checks of ``send`` cost more than librdkafka's own
        produce). A row without headers takes the positional call, which costs half of
        the one with keywords (1.0 against 2.1 us measured). ``headers`` None: no row
        has any. Returns the count."""
        self._require(TxnState.IN_TRANSACTION)
        produce, sent = self.producer.produce, 0
        no_headers = itertools.repeat(None)  # endless: zip ends with the keys and values
        rows = zip(keys, values, no_headers if headers is None else headers, strict=False)
        try:
            for key, value, header in rows:
                while True:
                    try:
                        if header is None:
                            produce(topic, value, key, partition)
                        else:
                            produce(topic, value, key, partition=partition, headers=header)
                        break
                    except BufferError:
                        self.producer.poll(QUEUE_FULL_WAIT_S)
                sent += 1
        except KafkaException as error:
            raise self._fail(error, "produce") from error
        return sent

    def send_offsets(
        self, topic: str, owner: str, offsets: Mapping[bytes, tuple[SourcePartition, SourceOffset]]
    ) -> None:
        """The offsets go into the open transaction: visible iff the records are."""
        for partition, offset in offsets.values():
            self.send(topic, offset_key(owner, partition), offset_value(offset))

    def commit(self, timeout_s: float = 30, give_up_after_s: float = 120) -> None:
        """Commits, retrying a timed-out commit (never aborting it) until the deadline."""
        self._require(TxnState.IN_TRANSACTION)
        deadline = time.monotonic() + give_up_after_s
        while True:
            try:
                self.producer.commit_transaction(timeout_s)
                self.state = TxnState.READY
                return
            except KafkaException as error:
                detail = _kafka_error(error)
                if detail.retriable() and time.monotonic() < deadline:
                    continue
                if detail.retriable():
                    self.state = TxnState.FAILED
                    raise CommitUncertainError(
                        f"{self.transactional_id}: commit outcome unknown after "
                        f"{give_up_after_s:.0f}s; exiting so the next instance fences"
                    ) from error
                # Failed definitively (not timed out): aborting is safe, and _fail does
                # it for an abortable error.
                raise self._fail(error, "commit_transaction") from error

    def abort(self, timeout_s: float = 30) -> None:
        """Discards the open transaction (connector request, or an abortable error)."""
        self._require(TxnState.IN_TRANSACTION)
        self._guarded("abort_transaction", lambda: self.producer.abort_transaction(timeout_s))
        self.state = TxnState.READY

    def close(self) -> None:
        """Leaves an open transaction to the broker's timeout or the next initialiser.
        A fenced or failed producer raises from flush; there is nothing left to save."""
        with contextlib.suppress(KafkaException):
            self.producer.flush(0)


class IdempotentWriter(_ProducingWriter):
    """Non-transactional producer; offsets are written only after every record sent
    before them is acknowledged (a clean ``flush``), so a crash can replay but never
    skip. Delivery reports are requested for failures only: a Python callback per
    successful record would cost more than the produce call itself."""

    def __init__(self, bootstrap: str, *, extra: Mapping[str, str] | None = None) -> None:
        self._errors: list[KafkaError] = []
        super().__init__(
            Producer(
                {
                    **client_config(bootstrap, extra),
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "partitioner": JAVA_PARTITIONER,
                    "delivery.report.only.error": True,
                    "on_delivery": self._record_failure,
                }
            )
        )

    def _record_failure(self, error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            self._errors.append(error)

    def _flush_all(self, what: str, timeout_s: float) -> None:
        remaining = self.producer.flush(timeout_s)
        if self._errors or remaining:
            first = self._errors[0].str() if self._errors else f"{remaining} unsent after flush"
            raise ProducerFailedError(f"{what} not acknowledged: {first}")

    def flush_offsets(
        self,
        offsets_topic: str,
        owner: str,
        offsets: Mapping[bytes, tuple[SourcePartition, SourceOffset]],
        timeout_s: float = 30,
    ) -> None:
        """Waits for every record, then writes and waits for their offsets."""
        self._flush_all("records", timeout_s)
        for partition, offset in offsets.values():
            self._produce(offsets_topic, offset_key(owner, partition), offset_value(offset))
        self._flush_all("offset records", timeout_s)

    def close(self) -> None:
        # Unacknowledged records are harmless here: their offsets were never written.
        with contextlib.suppress(KafkaException):
            self.producer.flush(10)
