"""Changing a stopped source's offsets (KIP-875's alter and reset), in one transaction.

Run only once nothing of the source can write (its generation fenced or gone): the
change is then the offsets topic's last word for the source. Transactional, with an id
of its own under the pipeline's prefix, so a change is visible whole or not at all, and
a crash in the middle leaves an open transaction that the next attempt (same id)
aborts before writing the change again. Writing it again is harmless: a reset forgets
what is stored (the earlier attempt's values included), then the values are written.

A forgotten partition is a tombstone under the key's current and legacy owners both:
an entry under the legacy owner alone would otherwise show again once the current one
is gone (``read_offsets`` prefers the current owner, and falls back to the legacy one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from onceflow.api.connector import SourceConnector, SourceOffset, SourcePartition
from onceflow.eos.offsets import (
    ensure_offsets_topic,
    offset_key,
    offset_value,
    read_offsets,
    stored_partition,
)
from onceflow.eos.writer import TransactionalWriter
from onceflow.logic.generations import GenerationRecord, OffsetsOutcome
from onceflow.logic.offsets_change import applied, checked, refused_by_its_system
from onceflow.logic.protocol import CheckOffsets, WriteOffsets
from onceflow.model.names import offsets_change_transactional_id

OffsetEntries = Sequence[tuple[SourcePartition, SourceOffset | None]]


def change_offsets(
    bootstrap: str,
    topic: str,
    owner: str,
    *,
    legacy_owner: str,
    transactional_id: str,
    reset: bool,
    entries: OffsetEntries,
    extra: Mapping[str, str] | None = None,
) -> int:
    """Forgets every stored offset of ``owner`` when ``reset``, then writes ``entries``
    (None: forget that partition); returns how many partitions were written."""
    ensure_offsets_topic(bootstrap, topic, extra)
    writes: dict[bytes, tuple[SourcePartition, SourceOffset | None]] = {}
    if reset:
        stored = read_offsets(bootstrap, topic, owner, legacy_owner=legacy_owner, extra=extra)
        for key in stored.by_partition:
            partition = stored_partition(key)
            writes[offset_key(owner, partition)] = (partition, None)
    for partition, offset in entries:
        writes[offset_key(owner, partition)] = (partition, offset)
    writer = TransactionalWriter(bootstrap, transactional_id, extra=dict(extra or {}))
    try:
        writer.initialize(topic=topic)
        writer.begin()
        for partition, offset in writes.values():
            value = None if offset is None else offset_value(offset)
            writer.send(topic, offset_key(owner, partition), value)
            if offset is None:
                writer.send(topic, offset_key(legacy_owner, partition), None)
        writer.commit()
    finally:
        writer.close()
    return len(writes)


def write_offsets_change(
    step: WriteOffsets,
    *,
    bootstrap: str,
    namespace: str,
    source: str,
    prefix: str,
    extra: Mapping[str, str] | None = None,
) -> GenerationRecord:
    """The protocol's WriteOffsets step, for the operator and ``onceflow run`` alike:
    the record's ``Applying`` change written, and the record to persist next."""
    change = step.record.offsets_change
    assert change is not None and change.applying
    written = change_offsets(
        bootstrap,
        step.record.offsets_topic,
        f"{namespace}/{source}",
        legacy_owner=source,
        transactional_id=offsets_change_transactional_id(prefix, source),
        reset=change.reset,
        entries=change.writing,
        extra=extra,
    )
    return step.record.with_offsets_change(applied(change, written))


SystemVerdict = Mapping[int, str]
"""Why the source system refuses entries of a change, by index (``check_offsets``)."""


def judged_change(
    step: CheckOffsets,
    connector: SourceConnector,
    config: Mapping[str, Any],
    secrets: Mapping[str, str],
    ask: Callable[[Callable[[], SystemVerdict]], SystemVerdict],
    *,
    bootstrap: str,
    owner: str,
    legacy_owner: str,
    extra: Mapping[str, str] | None = None,
) -> OffsetsOutcome:
    """The protocol's CheckOffsets step, for the operator and ``onceflow run`` alike:
    the change as the connector judges it (what a reset would forget included), then
    its source system, through ``ask`` (the caller's way to call a tenant's system:
    on a thread of its own, within a deadline)."""
    stored = (
        stored_partitions(
            bootstrap, step.record.offsets_topic, owner, legacy_owner=legacy_owner, extra=extra
        )
        if step.request.reset
        else []
    )
    outcome = checked(connector, config, step.request, stored)
    if not outcome.applying:
        return outcome
    writing = outcome.writing
    return refused_by_its_system(
        outcome, ask(lambda: connector.check_offsets(config, secrets, writing))
    )


def stored_partitions(
    bootstrap: str,
    topic: str,
    owner: str,
    *,
    legacy_owner: str,
    extra: Mapping[str, str] | None = None,
) -> list[SourcePartition]:
    """The partitions with an offset now: what a reset would forget."""
    stored = read_offsets(bootstrap, topic, owner, legacy_owner=legacy_owner, extra=extra)
    return [stored_partition(key) for key in stored.by_partition]


def listed(stored: Mapping[bytes, SourceOffset]) -> list[dict[str, Any]]:
    """Stored offsets as ``spec.offsetsChange.offsets`` takes them, sorted by partition."""
    return [
        {"partition": stored_partition(key), "offset": dict(offset)}
        for key, offset in sorted(stored.items())
    ]
