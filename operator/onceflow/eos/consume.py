"""Reading a topic to its end without reading past an open transaction.

KIP-618's rule for offsets: take the end offsets first (read_uncommitted, so they
include records of open transactions), then consume with ``read_committed`` until the
position reaches them. A ``read_committed`` consumer stops at the last stable offset,
so the loop waits out open transactions instead of ignoring their outcome.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Collection, Generator, Mapping

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from onceflow.eos.clients import admin_client, client_config, cluster_metadata

# Short: the loop ends on the position, which moves past control records without
# delivering a message, so a long poll would only wait for nothing. A read's polls
# start at the shortest and double while nothing comes: a short read (a sink's marker,
# which ends in a commit record) ends a millisecond after its last fetch, and a read
# waiting out an open transaction does not spin.
POLL_S = 0.02
FIRST_POLL_S = 0.001


# Partition errors a new topic answers with until its leaders are known to the broker
# asked and to the client's own metadata (the underscored ones are the client's; _NOENT
# is its "no leaders found", _TIMED_OUT its wait for a leader it could not look up), and
# whatever else the broker calls retriable (a leader epoch the broker has not caught up
# with): waited out, not reported.
_NOT_READY = {
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError._NOENT,
    KafkaError._TIMED_OUT,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.FENCED_LEADER_EPOCH,
}


def _not_ready(error: KafkaError) -> bool:
    return error.code() in _NOT_READY or error.retriable()


# One offsets query's share of the wait: a query that waits out the whole timeout
# inside the client leaves no time to look at fresh metadata and ask again.
ATTEMPT_S = 5.0


def end_offsets(
    bootstrap: str,
    topic: str,
    extra: Mapping[str, str] | None = None,
    timeout_s: float = 30,
    partitions: Collection[int] | None = None,
    admin: AdminClient | None = None,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
) -> dict[int, int]:
    """High watermarks per partition, open transactions included (``isolation``
    READ_COMMITTED: the last stable offsets, where open transactions begin).

    A topic that metadata already lists can still refuse an offsets query while its
    partitions' leaders are being elected (a sink creates its topic with its first
    batch); those partitions are asked again, after fresh metadata, until
    ``timeout_s``. A partition still refused then raises LookupError, as an unknown
    topic does. ``admin``: a client the caller keeps for repeated queries (a new one
    costs its connections, tens of milliseconds)."""
    deadline = time.monotonic() + timeout_s
    if admin is None:  # not `or`: a client with nothing queued is falsy (__len__)
        admin = admin_client(bootstrap, extra)
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    pending = None if partitions is None else set(partitions)
    found: dict[int, int] = {}
    while True:
        # Each round: the client answers "unknown partition" and "no leader" from its
        # own metadata, which only a metadata request refreshes.
        left = max(1.0, deadline - time.monotonic())
        described = cluster_metadata(admin, topic, left).topics[topic]
        if described.error is not None:
            raise LookupError(f"topic {topic!r}: {described.error.str()}")
        if pending is None:
            pending = set(described.partitions)
        futures = admin.list_offsets(
            {TopicPartition(topic, p): latest for p in pending},
            isolation_level=isolation,
            request_timeout=min(ATTEMPT_S, left),
        )
        refused: dict[int, KafkaError] = {}
        for tp, future in futures.items():
            try:
                offset = future.result().offset
            except KafkaException as error:
                if not _not_ready(error.args[0]):
                    raise
                refused[tp.partition] = error.args[0]
                continue
            if offset < 0:
                # A request the leader never answered (stopped, or just killed) comes
                # back as OFFSET_INVALID (-1001) without an error. Taken as an end, it
                # made a partition look empty: a task read no committed offsets and
                # produced its streams again from the start (found by the campaign).
                refused[tp.partition] = KafkaError(
                    KafkaError._TIMED_OUT, f"no end offset (got {offset}): leader not answering"
                )
                continue
            found[tp.partition] = offset
        if not refused:
            return found
        if time.monotonic() >= deadline:
            detail = ", ".join(f"{p}: {e.str()}" for p, e in sorted(refused.items()))
            raise LookupError(f"topic {topic!r} partitions not ready after {timeout_s}s ({detail})")
        pending = set(refused)
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


def read_to_end(
    bootstrap: str,
    topic: str,
    *,
    extra: Mapping[str, str] | None = None,
    isolation: str = "read_committed",
    timeout_s: float = 120,
    partitions: Collection[int] | None = None,
    span: Mapping[int, tuple[int, int]] | None = None,
    consumer: Consumer | None = None,
    admin: AdminClient | None = None,
) -> Generator[Message, None, None]:
    """Every record readable at ``isolation`` up to the end offsets taken at the start,
    or, with ``span``, each partition's records in ``[start, end)`` of its span.

    ``consumer``: one the caller keeps between reads (made by ``span_reader`` with the
    same isolation); it is assigned for this read and unassigned after it, so it
    fetches nothing in between. Without it, a consumer is made and closed here.
    ``admin``: the caller's client for the end offsets (see ``end_offsets``).

    Raises TimeoutError naming the partitions still held back (an open transaction of
    a live producer) when the end is not reached within ``timeout_s``.
    """
    if span is None:
        found = end_offsets(bootstrap, topic, extra, partitions=partitions, admin=admin)
        span = {p: (0, end) for p, end in found.items()}
    starts = {p: start for p, (start, end) in span.items() if end > start}
    ends = {p: span[p][1] for p in starts}
    if not ends:
        return
    kept = consumer is not None
    deadline = time.monotonic() + timeout_s
    if consumer is None:
        reader = span_reader(bootstrap, extra, isolation, topic, timeout_s)
    else:
        reader = consumer
        _wait_positions_forgotten(reader, topic, ends, deadline)
    try:
        # An absolute offset starts fetching at once; a logical one (BEGINNING) waits for
        # a timed offset query (~0.5 s) when the leader is not known yet. A log that no
        # longer starts at 0 is reset to its earliest offset by auto.offset.reset.
        reader.assign([TopicPartition(topic, p, starts[p]) for p in ends])
        remaining = dict(ends)
        wait = FIRST_POLL_S
        while remaining:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"reading {topic!r} to its end took over {timeout_s:.0f}s: partitions "
                    f"{sorted(remaining)} are held by an open transaction. A live "
                    "producer's transaction ends within its transaction.timeout.ms; one "
                    "that outlives it is hanging: list it with `kafka-transactions.sh "
                    "--bootstrap-server <servers> find-hanging --broker-id <leader>` and "
                    "end it with its `abort` command (brokers from Kafka 3.6 prevent "
                    "most with transaction.partition.verification.enable=true)"
                )
            message = reader.poll(wait)
            wait = FIRST_POLL_S if message is not None else min(POLL_S, wait * 2)
            if message is not None and _in_span(message, topic, starts, ends):
                yield message
            for tp in reader.position([TopicPartition(topic, p) for p in remaining]):
                if tp.offset >= remaining[tp.partition]:
                    del remaining[tp.partition]
    finally:
        if kept:
            reader.unassign()
        else:
            reader.close()


def _in_span(message: Message, topic: str, starts: dict[int, int], ends: dict[int, int]) -> bool:
    """A record of the span being read (a kept consumer's earlier reads never count)."""
    offset, partition = message.offset(), message.partition()
    return (
        message.error() is None
        and message.topic() == topic
        and partition in ends
        and offset is not None
        and starts[partition] <= offset < ends[partition]
    )


def _wait_positions_forgotten(
    consumer: Consumer, topic: str, partitions: Collection[int], deadline: float
) -> None:
    """A kept consumer's position of a partition it read before is reset only when its
    broker thread has stopped that fetch, a moment after ``unassign`` (0.3 ms seen).
    Until then it shows the last read's end: a read of an earlier span (a marker
    window further back) would take it for its own end and stop before reading
    anything. So a read starts once no partition it reads has a position."""
    asked = [TopicPartition(topic, p) for p in partitions]
    while any(tp.offset >= 0 for tp in consumer.position(asked)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"a kept consumer of {topic!r} never let go of {sorted(partitions)}")
        time.sleep(FIRST_POLL_S / 10)


def span_reader(
    bootstrap: str,
    extra: Mapping[str, str] | None,
    isolation: str,
    topic: str,
    timeout_s: float = 30,
) -> Consumer:
    """A consumer for ``read_to_end`` of ``topic``: no group membership, nothing
    committed. It asks for the topic's metadata before anything is assigned: a consumer
    assigned a topic it knows nothing of may look it up only at its next one-second
    scan (measured: one fresh read in six waited 0.95 s for it)."""
    consumer = Consumer(
        {
            **client_config(bootstrap, extra),
            "group.id": f"onceflow-reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": False,
            # The end is known and usually near: a broker holding each fetch for the
            # default 500 ms to fill it would make every short read cost a second.
            "fetch.wait.max.ms": 10,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        cluster_metadata(consumer, topic, timeout_s)
    except BaseException:
        consumer.close()
        raise
    return consumer
