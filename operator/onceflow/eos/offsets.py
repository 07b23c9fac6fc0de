"""The source offsets store: a compacted Kafka topic in Kafka Connect's layout.

Key ``["<namespace>/<source>", {partition}]``, value ``{offset}``, both canonical JSON
so that compaction keeps exactly one entry per source partition. Keys written before
the namespace was part of them (``["<source>", …]``) are still read, and a namespaced
entry of the same partition wins over them. In ``enabled`` mode the
offsets are written in the same transaction as their records, so they become visible
if and only if the records do; they are read back ``read_committed`` to the end.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from onceflow.api.connector import SourceOffset, SourcePartition
from onceflow.eos.clients import admin_client, client_config
from onceflow.eos.consume import read_to_end
from onceflow.eos.topics import ensure_topic

log = logging.getLogger(__name__)

# Compaction keeps the store small; one partition keeps every source's offsets in one
# ordered log, which is what a read-to-end needs (across partitions an older offset
# could be read last and win).
OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact"}


class OffsetsTopicError(ValueError):
    """An existing offsets topic cannot keep offsets safely; nothing was read from it."""


class OffsetsCarryError(RuntimeError):
    """The broker refused offsets copied to a renamed offsets topic: the step that
    copies them (the fence of the old generation) has not happened."""


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def offset_key(owner: str, partition: SourcePartition) -> bytes:
    return _canonical([owner, dict(partition)])


def stored_partition(key: bytes) -> SourcePartition:
    """The partition a ``StoredOffsets`` key names."""
    partition: SourcePartition = json.loads(key)
    return partition


# Distinct partitions remembered by ``OffsetKeys``: a task reading more at once (a files
# connector over a large directory) still gets right keys, only computed again.
OFFSET_KEYS_REMEMBERED = 4096


class OffsetKeys:
    """``offset_key`` of one owner, remembered per partition. A task sends the same few
    partitions with every record, and canonical JSON per record was a fifth of a
    task's time. Only plain dicts are remembered, by their ``repr``: it tells ``1``,
    ``True`` and ``1.0`` apart, which the dicts' own equality does not, yet all three
    are different keys in JSON."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._known: dict[str, bytes] = {}

    def of(self, partition: SourcePartition) -> bytes:
        if type(partition) is not dict:
            return offset_key(self.owner, partition)
        probe = repr(partition)
        key = self._known.get(probe)
        if key is None:
            key = offset_key(self.owner, partition)
            if len(self._known) >= OFFSET_KEYS_REMEMBERED:
                self._known.clear()
            self._known[probe] = key
        return key


def offset_value(offset: SourceOffset) -> bytes:
    return _canonical(dict(offset))


def ensure_offsets_topic(
    bootstrap: str,
    topic: str,
    extra: Mapping[str, str] | None = None,
    admin: AdminClient | None = None,
) -> None:
    """Creates the offsets topic, or checks that an existing one (created by hand, or
    by a tool's defaults) has one partition and compaction."""
    if admin is None:
        admin = admin_client(bootstrap, extra)
    partitions = ensure_topic(bootstrap, topic, config=OFFSETS_TOPIC_CONFIG, admin=admin)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        configs = admin.describe_configs([resource])[resource].result(timeout=30)
        policy: str | None = configs["cleanup.policy"].value or ""
    except KafkaException as error:
        # Without DescribeConfigs on the topic (ACLs) the policy cannot be checked;
        # say so instead of refusing a topic that may well be right.
        log.warning("cannot check cleanup.policy of %r: %s", topic, error.args[0].str())
        policy = None
    problems = []
    if partitions > 1:
        problems.append(
            f"it has {partitions} partitions, and offsets read across partitions can "
            "resume from an older one (duplicates)"
        )
    if policy is not None and policy.split(",") != ["compact"]:
        problems.append(
            f"its cleanup.policy is {policy!r}, not 'compact', and retention would delete offsets "
            "(a replay from the start)"
        )
    if problems:
        raise OffsetsTopicError(
            f"offsets topic {topic!r} is unsafe: {'; '.join(problems)}. Point "
            "spec.offsetsTopic at a new topic (Onceflow creates it with one partition "
            "and compaction), or recreate this one so"
        )


@dataclass(frozen=True)
class StoredOffsets:
    """Committed offsets of one source, keyed by canonical partition JSON."""

    by_partition: Mapping[bytes, SourceOffset] = field(default_factory=dict)

    def offset(self, partition: SourcePartition) -> SourceOffset | None:
        return self.by_partition.get(_canonical(dict(partition)))


def read_offsets(
    bootstrap: str,
    topic: str,
    owner: str,
    *,
    legacy_owner: str | None = None,
    extra: Mapping[str, str] | None = None,
    isolation: str = "read_committed",
    timeout_s: float = 120,
    admin: AdminClient | None = None,
) -> StoredOffsets:
    """The last committed offset of every partition of ``owner``; tombstones delete.
    ``legacy_owner``: the key's first element before it named the namespace."""
    found: dict[str, dict[bytes, SourceOffset]] = {owner: {}}
    if legacy_owner is not None:
        found[legacy_owner] = {}
    for message in read_to_end(
        bootstrap, topic, extra=extra, isolation=isolation, timeout_s=timeout_s, admin=admin
    ):
        key = json.loads(message.key() or b"null")
        if not (isinstance(key, list) and len(key) == 2 and key[0] in found):
            continue
        partition = _canonical(key[1])
        value = message.value()
        if value is None:
            found[key[0]].pop(partition, None)
        else:
            found[key[0]][partition] = json.loads(value)
    legacy = found.get(legacy_owner, {}) if legacy_owner is not None else {}
    return StoredOffsets({**legacy, **found[owner]})


def carry_offsets(
    bootstrap: str,
    old_topic: str,
    new_topic: str,
    owner: str,
    *,
    legacy_owner: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> int:
    """Copies ``owner``'s committed offsets from ``old_topic`` to ``new_topic`` (a
    renamed offsets topic), so the next generation resumes where the last one stopped
    instead of replaying from the start. Run only once the old generation can no longer
    write (fenced or gone); repeating it is harmless. Returns the partitions copied."""
    stored = read_offsets(bootstrap, old_topic, owner, legacy_owner=legacy_owner, extra=extra)
    ensure_offsets_topic(bootstrap, new_topic, extra)
    # A refused record comes back through its delivery report, not through flush():
    # flush only counts what is still queued, and a refused record is not.
    refused: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            refused.append(error)

    producer = Producer(
        {**client_config(bootstrap, extra), "enable.idempotence": True, "on_delivery": delivered}
    )
    for partition, offset in stored.by_partition.items():
        key = _canonical([owner, json.loads(partition)])
        producer.produce(new_topic, value=offset_value(offset), key=key)
    # 30 s: the copy is a handful of small records. Whatever fails, the fence is not
    # recorded, and the next try (the operator's next pass, or `onceflow run` started
    # again) repeats the whole copy, which is idempotent.
    failure = carry_failure(new_topic, len(stored.by_partition), refused, producer.flush(30))
    if failure is not None:
        raise failure
    return len(stored.by_partition)


def carry_failure(
    topic: str, copied: int, refused: Sequence[KafkaError], unsent: int
) -> Exception | None:
    """Why copying ``copied`` offset records to ``topic`` did not finish, given the
    delivery errors and what ``flush`` left queued; None when every record landed. A
    refusal is named (``OffsetsCarryError``): counting it as carried would record the
    fence as done and start the next generation from an empty topic (a replay from the
    beginning). Records only still queued are a ``TimeoutError``: the broker was slow."""
    if refused:
        first = refused[0]
        return OffsetsCarryError(
            f"copying offsets to {topic!r}: the broker refused {len(refused)} of {copied} "
            f"offset record(s) ({first.name()}: {first.str()}); the old generation is not "
            "recorded as fenced and the next try copies again: fix what refuses the write "
            "(a missing WRITE ACL on the topic for this client, the topic's "
            "max.message.bytes, a topic policy)"
        )
    if unsent > 0:
        return TimeoutError(
            f"copying offsets to {topic!r} did not finish in 30 s ({unsent} of {copied} "
            "offset record(s) still queued)"
        )
    return None
