"""The three-broker test bed (scripts/kafka-cluster.sh) as tests drive it: which broker
leads a partition or coordinates a transactional id, and that broker killed, paused,
resumed or started again on its data."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import IsolationLevel, KafkaException
from confluent_kafka.admin import AdminClient

from onceflow.eos.consume import end_offsets
from tests.support.testbed import ROOT
from tests.support.waiting import wait_for

BROKERS = (1, 2, 3)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: how Kafka places a transactional id."""
    value = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        value = (31 * value + int(unit, 16)) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def coordinator_partition(transactional_id: str, partitions: int) -> int:
    """The ``__transaction_state`` partition whose leader coordinates the id (Kafka's
    ``Utils.abs(id.hashCode) % partitions``)."""
    hashed = java_string_hash(transactional_id)
    return (0 if hashed == -(1 << 31) else abs(hashed)) % partitions


@dataclass
class KafkaCluster:
    bootstrap: str
    changed: set[int] = field(default_factory=set)
    """Brokers a test killed or paused: put back by ``restore``."""

    def _script(self, *args: str) -> str:
        done = subprocess.run(
            ["bash", str(ROOT / "scripts" / "kafka-cluster.sh"), *args],
            capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"kafka-cluster.sh {' '.join(args)}: {done.stderr[-2000:]}")
        return done.stdout.strip()

    def _admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 5000})

    def _partition(self, topic: str, partition: int) -> Any:
        return self._admin().list_topics(topic, timeout=30).topics[topic].partitions[partition]

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader; -1 during an election."""
        return int(self._partition(topic, partition).leader)

    def in_sync(self, topic: str, partition: int) -> list[int]:
        return [int(broker) for broker in self._partition(topic, partition).isrs]

    def partitions(self, topic: str) -> int:
        return len(self._admin().list_topics(topic, timeout=30).topics[topic].partitions)

    def coordinator(self, transactional_id: str) -> int:
        count = self.partitions("__transaction_state")
        return self.leader("__transaction_state", coordinator_partition(transactional_id, count))

    def await_taken_over(self, gone: int, topic: str, partition: int) -> None:
        """Returns once another broker leads the partition and ``gone`` is out of its
        ISR: the fault struck a broker the cluster had to replace."""

        def replaced() -> bool:
            try:
                return self.leader(topic, partition) not in (gone, -1) and gone not in (
                    self.in_sync(topic, partition)
                )
            except KafkaException:
                return False

        wait_for(replaced, 60, f"{topic}/{partition} led and kept in sync without {gone}")

    def open_transaction_on(self, topic: str, partition: int) -> bool:
        """Records sit above the partition's last stable offset: a transaction is open
        on it now."""
        try:
            ends = end_offsets(self.bootstrap, topic, partitions=[partition], timeout_s=5)
            stable = end_offsets(
                self.bootstrap, topic, partitions=[partition], timeout_s=5,
                isolation=IsolationLevel.READ_COMMITTED,
            )  # fmt: skip
        except (LookupError, KafkaException):  # leadership moving, a new leader catching up
            return False
        return stable[partition] < ends[partition]

    def await_fully_replicated(self, topic: str) -> None:
        """Returns once every broker answers and is in sync for ``topic`` and for the
        transaction log again: the next fault then meets a whole cluster, not one whose
        last broker standing holds every partition."""

        def in_sync() -> bool:
            try:
                found = self._admin().list_topics(timeout=5).topics
            except KafkaException:
                return False
            partitions = [
                partition
                for name in (topic, "__transaction_state")
                if name in found
                for partition in found[name].partitions.values()
            ]
            return bool(partitions) and all(len(p.isrs) == len(BROKERS) for p in partitions)

        wait_for(in_sync, 120, f"every broker in sync for {topic} and the transaction log")

    def kill(self, broker: int) -> None:
        self.changed.add(broker)
        self._script("kill", str(broker))

    def pause(self, broker: int) -> None:
        self.changed.add(broker)
        self._script("pause", str(broker))

    def resume(self, broker: int) -> None:
        self._script("resume", str(broker))

    def start(self, broker: int) -> None:
        self._script("start", str(broker))

    def restore(self) -> None:
        """Every broker a test stopped runs again (woken, or started on its data)."""
        for broker in sorted(self.changed):
            self._script("resume", str(broker)) if self._alive(broker) else self.start(broker)
        self.changed.clear()
        wait_for(self.all_answer, 120, "all three brokers back")

    def all_answer(self) -> bool:
        return len(self._admin().list_topics(timeout=5).brokers) == len(BROKERS)

    def _alive(self, broker: int) -> bool:
        try:
            pid = int(self._script("pid", str(broker)))
        except (RuntimeError, ValueError):
            return False
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return stat.read().split()[2] not in ("Z", "X")
        except FileNotFoundError:
            return False
