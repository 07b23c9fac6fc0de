"""``kafka``: mirrors topics of a Kafka cluster (this one or another) into the
pipeline's topic, exactly once.

The source partition is the source topic-partition and the offset the next offset to
read, stored in the same transaction as the mirrored records (Kafka Connect's
MirrorMaker 2 keeps them in a separate offset commit, which is why it duplicates).
Records are read ``read_committed``: an aborted source transaction is never mirrored,
and a record is mirrored once whatever the source producer retried. Keys, values,
headers and timestamps are copied as they are; ``keepPartition`` also keeps the
partition number (the destination topic then needs at least as many partitions).

Tasks split the source partitions between them by a hash of topic and partition, each
finding its own in the source's metadata, so the task configs depend on the config
alone (a change of them starts a new generation) and partitions added to a source
topic are picked up without one.
"""

from __future__ import annotations

import time
import uuid
import zlib
from collections.abc import Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from onceflow.api.connector import (
    ConfigProblem,
    SourceConnector,
    SourceRecord,
    SourceTask,
    TaskContext,
)

DEFAULTS: dict[str, Any] = {
    "topics": None,
    "bootstrapServers": None,
    "keepPartition": False,
    "startingOffsets": "earliest",
    "batchSize": 1000,
    "metadataRefreshMs": 30000,
}
STARTING_OFFSETS = {"earliest": OFFSET_BEGINNING, "latest": OFFSET_END}
"""Where a partition with no stored offset starts (a first run, or a new partition)."""
POLL_TIMEOUT_S = 0.2
METADATA_TIMEOUT_S = 30.0


class MirrorSourceError(RuntimeError):
    """The source cluster or topic cannot be read; the message names the setting."""


def owner_task(topic: str, partition: int, task_count: int) -> int:
    """The task that mirrors ``topic``/``partition`` (stable across processes)."""
    return (zlib.crc32(topic.encode()) + partition) % task_count


class KafkaMirrorTask(SourceTask):
    """Reads its share of the source partitions from the stored next offsets."""

    def start(self, context: TaskContext) -> None:
        super().start(context)
        config = {**DEFAULTS, **context.config}
        self.topics: list[str] = list(config["topics"])
        self.bootstrap: str = config["bootstrapServers"]
        self.keep_partition: bool = config["keepPartition"]
        self.batch_size: int = config["batchSize"]
        self.refresh_s = int(config["metadataRefreshMs"]) / 1000
        self.task_count: int = config["taskCount"]
        self.starting: int = STARTING_OFFSETS[config["startingOffsets"]]
        # The source cluster's credentials come from the connector's Secret, one
        # librdkafka setting per key; offsets are never committed to the source.
        self.consumer = Consumer(
            {
                **context.secrets,
                "bootstrap.servers": self.bootstrap,
                "group.id": f"onceflow-mirror-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": False,
            }
        )
        self.assigned: set[tuple[str, int]] = set()
        self.refreshed_at = float("-inf")
        self._assign_new_partitions()

    def _assign_new_partitions(self) -> None:
        self.refreshed_at = time.monotonic()
        try:
            metadata = self.consumer.list_topics(timeout=METADATA_TIMEOUT_S)
        except KafkaException as error:
            raise MirrorSourceError(
                f"config.bootstrapServers {self.bootstrap!r}: the source cluster did not "
                f"answer ({error}); check the address and the connector's secretRef"
            ) from error
        new: list[TopicPartition] = []
        for topic in self.topics:
            found = metadata.topics.get(topic)
            if found is None or found.error is not None:
                raise MirrorSourceError(
                    f"config.topics: {topic!r} is not readable on {self.bootstrap} "
                    f"({found.error if found else 'no such topic'}); create it or fix the name"
                )
            for partition in sorted(found.partitions):
                mine = owner_task(topic, partition, self.task_count) == self.context.task_id
                if not mine or (topic, partition) in self.assigned:
                    continue
                stored = self.context.offsets.offset({"topic": topic, "partition": partition})
                start = int(stored["offset"]) if stored else self.starting
                new.append(TopicPartition(topic, partition, start))
                self.assigned.add((topic, partition))
        if new:
            self.consumer.incremental_assign(new)

    def poll(self) -> list[SourceRecord]:
        if time.monotonic() - self.refreshed_at >= self.refresh_s:
            self._assign_new_partitions()
        messages = self.consumer.consume(self.batch_size, POLL_TIMEOUT_S)
        return [self._record(message) for message in messages if self._readable(message)]

    @staticmethod
    def _readable(message: Message) -> bool:
        error = message.error()
        if error is None:
            return True
        if error.code() == KafkaError._PARTITION_EOF:
            return False
        raise MirrorSourceError(f"reading {message.topic()}/{message.partition()}: {error}")

    def _record(self, message: Message) -> SourceRecord:
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        if topic is None or partition is None or offset is None:
            raise MirrorSourceError(f"a message without a topic, partition or offset: {message}")
        kind, timestamp = message.timestamp()
        return SourceRecord(
            source_partition={"topic": topic, "partition": partition},
            source_offset={"offset": offset + 1},
            key=message.key(),
            value=message.value(),
            headers=_headers(message),
            timestamp_ms=None if kind == TIMESTAMP_NOT_AVAILABLE else timestamp,
            partition=partition if self.keep_partition else None,
        )

    def stop(self) -> None:
        self.consumer.close()


def _headers(message: Message) -> list[tuple[str, bytes | None]]:
    """A consumed message's headers as a list of pairs (the client's typing also allows
    the dict and str forms a producer may pass)."""
    found = message.headers() or []
    pairs = found.items() if isinstance(found, dict) else found
    return [(name, value.encode() if isinstance(value, str) else value) for name, value in pairs]


def _is_int(value: object, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


class KafkaMirrorConnector(SourceConnector):
    """Exactly-once mirroring: the next offset is stored with the records it follows."""

    task_class = KafkaMirrorTask

    def validate(self, config: Mapping[str, Any]) -> list[ConfigProblem]:
        problems = [
            ConfigProblem(key, "unknown setting; known: " + ", ".join(sorted(DEFAULTS)))
            for key in config
            if key not in DEFAULTS
        ]
        merged = {**DEFAULTS, **config}
        topics = merged["topics"]
        if not (
            isinstance(topics, list)
            and topics
            and all(isinstance(t, str) and t for t in topics)
            and len(set(topics)) == len(topics)
        ):
            problems.append(ConfigProblem("topics", "a non-empty list of distinct topic names"))
        bootstrap = merged["bootstrapServers"]
        if not (isinstance(bootstrap, str) and bootstrap):
            problems.append(
                ConfigProblem("bootstrapServers", "the source cluster's host:port list")
            )
        if not isinstance(merged["keepPartition"], bool):
            problems.append(ConfigProblem("keepPartition", "true or false"))
        elif merged["keepPartition"] and isinstance(topics, list) and len(topics) > 1:
            problems.append(
                ConfigProblem(
                    "keepPartition",
                    "keeps partition numbers of one source topic only: partition 0 of two "
                    "topics would interleave; mirror each topic with its own KafkaSource",
                )
            )
        if merged["startingOffsets"] not in STARTING_OFFSETS:
            problems.append(
                ConfigProblem("startingOffsets", "earliest or latest (for partitions never read)")
            )
        for key, minimum in (("batchSize", 1), ("metadataRefreshMs", 1000)):
            if not _is_int(merged[key], minimum):
                problems.append(ConfigProblem(key, f"must be an integer >= {minimum}"))
        return problems

    def task_configs(self, config: Mapping[str, Any], max_tasks: int) -> list[dict[str, Any]]:
        merged = {**DEFAULTS, **config}
        return [{**merged, "taskCount": max_tasks} for _ in range(max_tasks)]

    def exactly_once_support(self, config: Mapping[str, Any]) -> bool:
        return True
