"""Small helpers over confluent-kafka for tests: unique topics, input written in full,
draining a topic, and what a topic shows of transactions (open ones, aborted records)."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, IsolationLevel, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from onceflow.eos.consume import end_offsets, read_to_end, span_reader
from tests.support.testbed import ROOT, script_value


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1)])
    futures[name].result(timeout=30)
    return name


def new_topic(bootstrap: str, prefix: str, partitions: int = 1) -> str:
    """Creates a fresh topic so tests never see each other's records."""
    return create_topic(bootstrap, f"{prefix}-{uuid.uuid4().hex[:8]}", partitions)


class InputProducer:
    """Writes a test's input and proves, before a job reads it, that all of it reached
    the broker in the order it was sent. A job's watermark drops as late whatever
    arrives behind newer records: an input still in flight when a driver plans its
    first batches, or a produce request retried behind later ones (a new topic's first
    requests can meet a leader not yet known), would read as the job's loss.

    The producer is idempotent, which keeps each partition in send order through
    retries; a test that wants records twice sends them twice."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        self.sent, self.failed = 0, list[str]()
        self.placed: dict[int, list[tuple[int, int]]] = {}  # partition: (sent as, offset)

    def _delivered(self, number: int) -> Any:
        def delivered(error: Any, message: Any) -> None:
            if error is not None:
                self.failed.append(str(error))
            else:
                self.placed.setdefault(message.partition(), []).append((number, message.offset()))

        return delivered

    def send(self, value: bytes, key: bytes, **fields: Any) -> None:
        self.producer.produce(
            self.topic, value, key, on_delivery=self._delivered(self.sent), **fields
        )
        self.sent += 1

    def finish(self) -> int:
        """Flushes and checks the topic holds every record sent, each partition in send
        order; returns the count."""
        assert self.producer.flush(60) == 0, "the input was not all written in 60 s"
        assert not self.failed, f"{len(self.failed)} input records failed: {self.failed[:3]}"
        for partition, placed in self.placed.items():
            offsets = [offset for _, offset in sorted(placed)]
            assert offsets == sorted(offsets), f"input partition {partition} is out of send order"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        described = admin.list_topics(self.topic, timeout=30).topics[self.topic]
        request = [TopicPartition(self.topic, p) for p in described.partitions]
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "input-check"})
        try:
            stored = sum(consumer.get_watermark_offsets(tp, timeout=30)[1] for tp in request)
        finally:
            consumer.close()
        assert stored == self.sent, f"the input topic holds {stored} records, not {self.sent}"
        return self.sent


def consumer(bootstrap: str, isolation: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def drain(bootstrap: str, topic: str, isolation: str, quiet_s: float = 2.0) -> list[bytes]:
    """Values readable at ``isolation`` once no record arrived for ``quiet_s`` seconds."""
    c = consumer(bootstrap, isolation)
    c.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    last = time.monotonic()
    try:
        while time.monotonic() - last < quiet_s:
            msg = c.poll(0.2)
            if msg is None or msg.error():
                continue
            values.append(msg.value())
            last = time.monotonic()
    finally:
        c.close()
    return values


def java_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's Java producer picks for ``key``: murmur2 (seed
    0x9747b28c), made positive, modulo the partition count."""
    m = 0x5BD1E995
    h = (0x9747B28C ^ len(key)) & 0xFFFFFFFF
    whole = len(key) // 4 * 4
    for i in range(0, whole, 4):
        k = (int.from_bytes(key[i : i + 4], "little") * m) & 0xFFFFFFFF
        k = ((k ^ (k >> 24)) * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = key[whole:]
    for shift in range(len(tail) - 1, 0, -1):
        h ^= tail[shift] << (8 * shift)
    if tail:
        h = ((h ^ tail[0]) * m) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * m) & 0xFFFFFFFF
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


def zombie_in_a_transaction(bootstrap: str, transactional_id: str, topic: str) -> Producer:
    """A producer left mid-transaction (a record sent, nothing committed): what a
    paused or partitioned writer looks like. Its ``commit_transaction`` raises once the
    id was fenced."""
    zombie = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, b"late")
    zombie.flush(30)
    return zombie


def authenticated_listener() -> tuple[str, dict[str, str]]:
    """The broker's SASL-over-TLS listener on the node network and librdkafka settings
    for it (scripts/kafka.sh). Root makes the network, so there a missing listener is a
    failure; elsewhere the test is skipped."""
    try:
        bootstrap = script_value("scripts/kafka.sh", "node-bootstrap")
        settings: dict[str, str] = json.loads(
            Path(script_value("scripts/kafka.sh", "node-client")).read_text()
        )
    except RuntimeError as error:
        if os.geteuid() == 0:
            raise
        pytest.skip(f"the broker has no authenticated listener without root ({error})")
    return bootstrap, settings


def broker_pid() -> int:
    """The test bed's broker, from the pid file ``scripts/kafka.sh up`` writes (the
    fixtures start it that way)."""
    state = Path(os.environ.get("ONCEFLOW_STATE", str(ROOT / ".onceflow")))
    pid = int((state / "kafka" / "broker.pid").read_text())
    os.kill(pid, 0)  # alive, or ProcessLookupError names the problem
    return pid


@contextmanager
def frozen_broker() -> Iterator[int]:
    """The broker SIGSTOPped (an outage its clients see as silence: requests and
    commits block instead of failing fast) and resumed on leaving, whatever happens."""
    pid = broker_pid()
    os.kill(pid, signal.SIGSTOP)
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGCONT)


def offsets_written(bootstrap: str, topic: str) -> int:
    """The topic's end offsets summed (records and transaction markers: an upper bound
    of the records written); 0 while no writer has created the topic yet."""
    try:
        return sum(end_offsets(bootstrap, topic).values())
    except LookupError:
        return 0


def aborted_records(bootstrap: str, topic: str) -> int:
    """How many records of ``topic`` belong to aborted transactions: readable
    ``read_uncommitted`` but not ``read_committed``. Both reads stop at the same end
    offsets, taken once, so records written in between count in neither; the committed
    read waits out the transactions still open below that end."""
    span = {p: (0, end) for p, end in end_offsets(bootstrap, topic).items()}

    def readable(isolation: str) -> int:
        return sum(1 for _ in read_to_end(bootstrap, topic, isolation=isolation, span=span))

    return readable("read_uncommitted") - readable("read_committed")


def latest_offsets(
    admin: AdminClient, partitions: list[TopicPartition], isolation: IsolationLevel
) -> dict[int, int]:
    """Each partition's end (READ_UNCOMMITTED) or last stable offset (READ_COMMITTED)."""
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    futures = admin.list_offsets({tp: latest for tp in partitions}, isolation_level=isolation)
    return {tp.partition: future.result(30).offset for tp, future in futures.items()}


class TransactionWatch:
    """What a topic shows of its writers right now: how far it was written, and whether
    a transaction is open in it (a partition whose last stable offset, what
    ``read_committed`` may read up to, is behind its end)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        described = self.admin.list_topics(topic, timeout=30).topics[topic]
        self.partitions = [TopicPartition(topic, p) for p in described.partitions]

    def _offsets(self, isolation: IsolationLevel) -> dict[int, int]:
        return latest_offsets(self.admin, self.partitions, isolation)

    def written(self) -> int:
        """The end offsets summed: it grows with every record and transaction marker."""
        return sum(self._offsets(IsolationLevel.READ_UNCOMMITTED).values())

    def open(self) -> bool:
        """Asked end first: a transaction begun and committed between the two questions
        can then not pass for an open one."""
        end = self._offsets(IsolationLevel.READ_UNCOMMITTED)
        stable = self._offsets(IsolationLevel.READ_COMMITTED)
        return any(stable[p] < end[p] for p in end)


class CommittedTail:
    """A topic's committed records as they come: each ``read`` returns those committed
    since the previous one, read up to the last stable offsets, so it never waits on an
    open transaction. A test polling a growing topic this way pays for what it grew by;
    reading it whole every poll (20,000 records, about a second of this process's core)
    starved the writers the test was waiting for."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.consumer: Consumer | None = None
        self.read_to: dict[int, int] = {}

    def _stable_ends(self) -> dict[int, int]:
        described = self.admin.list_topics(self.topic, timeout=30).topics.get(self.topic)
        if described is None or described.error is not None or not described.partitions:
            raise LookupError(f"topic {self.topic!r} does not exist (yet)")
        partitions = [TopicPartition(self.topic, p) for p in described.partitions]
        return latest_offsets(self.admin, partitions, IsolationLevel.READ_COMMITTED)

    def read(self) -> list[Any]:
        """The records committed since the last read (LookupError: no such topic yet);
        none while the broker cannot answer (a new topic's leaders being elected):
        asked again at the next read."""
        try:
            ends = self._stable_ends()
        except KafkaException:
            return []
        if self.consumer is None:
            self.consumer = span_reader(self.bootstrap, None, "read_committed", self.topic)
        span = {p: (self.read_to.get(p, 0), end) for p, end in ends.items()}
        records = list(read_to_end(self.bootstrap, self.topic, span=span, consumer=self.consumer))
        self.read_to.update(ends)
        return records

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
