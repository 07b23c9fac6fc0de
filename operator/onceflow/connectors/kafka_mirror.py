"""``kafka``: mirrors topics of a Kafka cluster (this one or another) into the
pipeline's topic, exactly once.

The source partition is the source cluster's id with the topic-partition, and the
offset the next offset to read, stored in the same transaction as the mirrored records
(Kafka Connect's MirrorMaker 2 keeps them in a separate offset commit, which is why it
duplicates).
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

import logging
import time
import uuid
import zlib
from collections.abc import Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from onceflow.api.connector import (
    Behind,
    ConfigProblem,
    ConnectorError,
    KafkaRead,
    OffsetRefusedError,
    SourceConnector,
    SourceOffset,
    SourcePartition,
    SourceRecord,
    SourceTask,
    TaskContext,
)
from onceflow.connectors.settings import (
    integer_problems,
    is_int,
    masked,
    same_config_per_task,
    unknown_settings,
)

log = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {
    "topics": None,
    "bootstrapServers": None,
    "keepPartition": False,
    "startingTimestampMs": None,
    "batchSize": 1000,
    "metadataRefreshMs": 30000,
}
POLL_TIMEOUT_S = 0.2
METADATA_TIMEOUT_S = 30.0
CHECK_TIMEOUT_S = 10.0
START_TIMEOUT_S = CHECK_TIMEOUT_S
"""A task that cannot get the source's metadata at its start exits naming the setting
(and is restarted with a backoff) as soon as the check before start would have; a
running task's refresh waits longer, since it reads on meanwhile."""
# The mirror's own consumer settings: exactly-once depends on them, so the connector's
# Secret may not change them.
CONSUMER_SETTINGS = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "isolation.level": "read_committed",
    "enable.partition.eof": False,
    # A stored offset the source no longer has (retention, a re-created topic) stops
    # the task: jumping to either end would lose or repeat records without a word.
    "auto.offset.reset": "error",
}
RESERVED_SECRET_KEYS = {"bootstrap.servers", "group.id", *CONSUMER_SETTINGS}


def owner_task(topic: str, partition: int, task_count: int) -> int:
    """The task that mirrors ``topic``/``partition`` (stable across processes)."""
    return (zlib.crc32(topic.encode()) + partition) % task_count


def source_consumer(bootstrap: str, secrets: Mapping[str, str]) -> Consumer:
    """The source cluster's credentials come from the connector's Secret, one
    librdkafka setting per key; offsets are never committed to the source."""
    if reserved := sorted(RESERVED_SECRET_KEYS & secrets.keys()):
        raise ConnectorError(
            f"connector.secretRef: key {reserved[0]!r} is set by the mirror itself "
            "(exactly-once depends on it); remove it from the Secret"
        )
    settings = {
        **secrets,
        **CONSUMER_SETTINGS,
        "bootstrap.servers": bootstrap,
        "group.id": f"onceflow-mirror-{uuid.uuid4().hex}",
    }
    try:
        return Consumer(settings)
    except KafkaException as error:
        raise ConnectorError(
            "connector.secretRef: the source cluster's client settings were refused: "
            + masked(str(error), secrets)
        ) from None


def _no_answer(bootstrap: str, error: KafkaException) -> str:
    """What a tenant is told of a cluster that did not answer. The operator asks from
    its own pod, so how a connection failed (refused, timed out, closed) would tell
    the tenant which of the operator's network's ports are open: only a broker's own
    refusal of the login, which takes a broker to say, is passed on."""
    code = error.args[0].code() if error.args and hasattr(error.args[0], "code") else None
    said = f" ({error})" if code == KafkaError._AUTHENTICATION else ""
    return (
        f"the source cluster at {bootstrap!r} did not answer as a Kafka cluster{said}; "
        "check the address and the connector's secretRef"
    )


def source_metadata(consumer: Consumer, bootstrap: str, timeout_s: float) -> Any:
    try:
        return consumer.list_topics(timeout=timeout_s)
    except KafkaException as error:
        raise ConnectorError(f"config.bootstrapServers: {_no_answer(bootstrap, error)}") from error


def unreadable_topic(metadata: Any, topic: str, bootstrap: str) -> str | None:
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return (
            f"{topic!r} is not readable on {bootstrap} "
            f"({found.error if found else 'no such topic'}); create it or fix the name"
        )
    return None


class KafkaMirrorTask(SourceTask):
    """Reads its share of the source partitions from the stored next offsets."""

    def start(self, context: TaskContext) -> None:
        super().start(context)
        config = {**DEFAULTS, **context.config}
        self.topics: list[str] = list(config["topics"])
        self.bootstrap: str = config["bootstrapServers"]
        self.keep_partition: bool = config["keepPartition"]
        self.starting_ms: int | None = config["startingTimestampMs"]
        self.batch_size: int = config["batchSize"]
        self.refresh_s = int(config["metadataRefreshMs"]) / 1000
        self.task_count: int = config["taskCount"]
        self.consumer = source_consumer(self.bootstrap, context.secrets)
        self.assigned: set[tuple[str, int]] = set()
        self.copied_to: dict[tuple[str, int], int] = {}
        """The next offset to copy, per partition that has had a record."""
        try:
            metadata = source_metadata(self.consumer, self.bootstrap, START_TIMEOUT_S)
            # Offsets belong to one cluster: pointing the mirror at another one (a new
            # bootstrapServers) starts it afresh there instead of at foreign offsets.
            self.cluster = str(metadata.cluster_id or "unknown")
            self._assign_new_partitions(metadata)
        except BaseException:
            self.consumer.close()
            raise

    def _assign_new_partitions(self, metadata: Any) -> None:
        self.refreshed_at = time.monotonic()
        new: list[TopicPartition] = []
        for topic in self.topics:
            if problem := unreadable_topic(metadata, topic, self.bootstrap):
                raise ConnectorError(f"config.topics: {problem}")
            found = metadata.topics[topic]
            for partition in sorted(found.partitions):
                mine = owner_task(topic, partition, self.task_count) == self.context.task_id
                if mine and (topic, partition) not in self.assigned:
                    new.append(
                        TopicPartition(topic, partition, self._start_offset(topic, partition))
                    )
                    self.assigned.add((topic, partition))
        if new:
            self.consumer.incremental_assign(new)

    def _start_offset(self, topic: str, partition: int) -> int:
        """The stored next offset; for a partition never mirrored, its beginning or the
        first record at ``startingTimestampMs``, and for one set to a time (``offsets
        alter``), the first record at that time: fixed points, so a task that restarts
        before its first commit starts at the same record (a "latest" end would move)."""
        stored = self.context.offsets.offset(self._partition_key(topic, partition))
        if stored is not None and "offset" in stored:
            return int(stored["offset"])
        at = int(stored["timestamp"]) if stored is not None else self.starting_ms
        if at is None:
            return int(OFFSET_BEGINNING)
        setting = "the offset set as a timestamp" if stored else "config.startingTimestampMs"
        where = f"{setting}: finding it in {topic}/{partition}"
        try:
            (found,) = self.consumer.offsets_for_times(
                [TopicPartition(topic, partition, at)], timeout=METADATA_TIMEOUT_S
            )
            if found.error is not None:
                raise ConnectorError(f"{where} failed ({found.error})")
            if found.offset >= 0:
                return int(found.offset)
            # No record at or after the time yet: everything written from now on is.
            ends = self.consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=METADATA_TIMEOUT_S
            )
        except KafkaException as error:
            raise ConnectorError(f"{where} failed ({error})") from error
        if ends is None:
            raise ConnectorError(f"{where}: the partition's end offset did not come back")
        return int(ends[1])

    def _partition_key(self, topic: str, partition: int) -> dict[str, Any]:
        return {"cluster": self.cluster, "topic": topic, "partition": partition}

    def poll(self) -> list[SourceRecord]:
        if time.monotonic() - self.refreshed_at >= self.refresh_s:
            self._refresh()
        messages = self.consumer.consume(self.batch_size, POLL_TIMEOUT_S)
        return [self._record(message) for message in messages if self._readable(message)]

    def _refresh(self) -> None:
        """New partitions, when the source answers; a slow answer is asked again later
        rather than ending a task that is reading fine."""
        try:
            metadata = self.consumer.list_topics(timeout=METADATA_TIMEOUT_S)
            self._assign_new_partitions(metadata)
        except (KafkaException, ConnectorError) as error:
            log.warning("source partitions not refreshed (%s); retrying later", error)
            self.refreshed_at = time.monotonic()

    @staticmethod
    def _readable(message: Message) -> bool:
        error = message.error()
        if error is None:
            return True
        if error.code() == KafkaError._PARTITION_EOF:
            return False
        raise ConnectorError(
            f"config.topics: reading {message.topic()}/{message.partition()} at its stored "
            f"offset failed ({error}); an offset out of range means the source lost records "
            "the mirror had not copied (retention, a re-created topic)"
        )

    def _record(self, message: Message) -> SourceRecord:
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        if topic is None or partition is None or offset is None:
            raise ConnectorError(f"a message without a topic, partition or offset: {message}")
        kind, timestamp = message.timestamp()
        self.copied_to[(topic, partition)] = offset + 1
        return SourceRecord(
            source_partition=self._partition_key(topic, partition),
            source_offset={"offset": offset + 1},
            key=message.key(),
            value=message.value(),
            headers=_headers(message),
            timestamp_ms=None if kind == TIMESTAMP_NOT_AVAILABLE else timestamp,
            partition=partition if self.keep_partition else None,
        )

    def behind(self) -> Behind | None:
        """Records of the task's partitions not copied yet, from the end offsets the
        consumer's last fetches brought (cached: no request between polls)."""
        lag = 0
        for (topic, partition), copied in self.copied_to.items():
            _, end = self.consumer.get_watermark_offsets(
                TopicPartition(topic, partition), cached=True
            )
            if end >= 0:
                lag += max(0, end - copied)
        return Behind(records=lag) if self.copied_to else None

    def stop(self) -> None:
        self.consumer.close()


def _headers(message: Message) -> list[tuple[str, bytes | None]]:
    """A consumed message's headers as a list of pairs (the client's typing also allows
    the dict and str forms a producer may pass)."""
    found = message.headers() or []
    pairs = found.items() if isinstance(found, dict) else found
    return [(name, value.encode() if isinstance(value, str) else value) for name, value in pairs]


class KafkaMirrorConnector(SourceConnector):
    """Exactly-once mirroring: the next offset is stored with the records it follows."""

    task_class = KafkaMirrorTask
    secret_is_kafka_client_config = True

    def check(
        self,
        config: Mapping[str, Any],
        secrets: Mapping[str, str],
        *,
        shares_task_filesystem: bool,
    ) -> list[ConfigProblem]:
        """The cluster must answer; a topic it lacks yet is not refused, since another
        source of the pipeline may be about to create it (the task fails, naming it, and
        is restarted until it exists)."""
        bootstrap = config["bootstrapServers"]
        try:
            consumer = source_consumer(bootstrap, secrets)
        except ConnectorError as error:
            return [ConfigProblem("bootstrapServers", str(error))]
        try:
            consumer.list_topics(timeout=CHECK_TIMEOUT_S)
        except KafkaException as error:
            return [ConfigProblem("bootstrapServers", _no_answer(bootstrap, error))]
        finally:
            consumer.close()
        return []

    def validate(self, config: Mapping[str, Any]) -> list[ConfigProblem]:
        problems = unknown_settings(config, DEFAULTS)
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
        starting = merged["startingTimestampMs"]
        if starting is not None and not is_int(starting, 0):
            problems.append(ConfigProblem("startingTimestampMs", "epoch milliseconds, or omitted"))
        problems += integer_problems(merged, {"batchSize": 1, "metadataRefreshMs": 1000})
        return problems

    def task_configs(self, config: Mapping[str, Any], max_tasks: int) -> list[dict[str, Any]]:
        return same_config_per_task(DEFAULTS, config, max_tasks)

    def exactly_once_support(self, config: Mapping[str, Any]) -> bool:
        return True

    def alter_offset(
        self, config: Mapping[str, Any], partition: SourcePartition, offset: SourceOffset
    ) -> SourceOffset:
        """``{offset: n}``: the next source offset to copy; ``{timestamp: ms}``: the first
        record at or after that time, found when the task starts (until its first
        commit stores the offset it found)."""
        topics = config.get("topics") or []
        if (
            set(partition) != {"cluster", "topic", "partition"}
            or partition["topic"] not in topics
            or not is_int(partition["partition"], 0)
        ):
            raise OffsetRefusedError(
                f"partition {dict(partition)}: a partition is {{cluster, topic, partition}} "
                "as `onceflow offsets list` prints it, of one of config.topics"
            )
        if len(offset) == 1 and next(iter(offset)) in ("offset", "timestamp"):
            (name, value), *_ = offset.items()
            if is_int(value, 0):
                return {name: int(value)}
        raise OffsetRefusedError(
            f"offset {dict(offset)}: either {{offset: n}}, the next source offset to copy, "
            "or {timestamp: ms}, the first record at or after that time (n, ms >= 0)"
        )

    def kafka_reads(self, config: Mapping[str, Any]) -> list[KafkaRead]:
        """Each of ``topics`` on ``bootstrapServers``: mirrored into the pipeline's own
        cluster, a topic the pipeline writes would come back round. A malformed config
        reads what it names well (``validate`` refuses the rest)."""
        bootstrap, topics = config.get("bootstrapServers"), config.get("topics")
        if not (isinstance(bootstrap, str) and bootstrap.strip() and isinstance(topics, list)):
            return []
        return [
            KafkaRead(topic, bootstrap, f"topics[{i}]")
            for i, topic in enumerate(topics)
            if isinstance(topic, str) and topic
        ]
