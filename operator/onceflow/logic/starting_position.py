"""Where the first driver on a reset's checkpoint starts each input partition.

Spark's Kafka source takes explicit starting offsets only for every partition it
reads at once (it refuses a partial map), and a user who sets one partition expects
the others to go on where the job stopped (Connect's alterOffsets leaves unnamed
partitions alone). The stopped job's position is its last finished batch: the end
offsets its offset log (``offsets/<batch>``) recorded for the batch its commit log
(``commits/<batch>``) has. Reading them is the driver's job; this is the arithmetic.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Literal

from onceflow.api.input_reset import InputOffset

Positions = dict[str, dict[int, int]]
EARLIEST, LATEST = -2, -1
"""Spark's own markers for "the partition's start" and "its end" in startingOffsets."""


class OffsetLogError(ValueError):
    """An offset log entry this driver cannot read: it must not guess a position."""


def batch_end_offsets(log_entry: str, topics: Sequence[str], where: str) -> Positions:
    """The end offsets of ``topics`` in one entry of Spark's offset log: a version
    line, the batch's metadata, then one line per source (``{topic: {partition:
    offset}}`` for Kafka; a newer format puts the source's name and a colon first).
    Raises naming ``where`` when it holds none of them: read wrong, every partition
    would start over (a topic the job reads since its stop is new to it, and may)."""
    lines = log_entry.splitlines()
    if not lines or not lines[0].startswith("v"):
        raise OffsetLogError(f"{where}: not a Spark offset log entry")
    found: Positions = {}
    for line in lines[2:]:
        body = line if line.startswith("{") else line.partition(":")[2]
        try:
            source = json.loads(body)
        except json.JSONDecodeError:
            continue
        if not isinstance(source, dict):
            continue
        for topic, offsets in source.items():
            if topic in topics and isinstance(offsets, dict):
                found[topic] = {int(p): int(o) for p, o in offsets.items()}
    if not found:
        raise OffsetLogError(
            f"{where}: no offsets of {', '.join(topics)} (format {lines[0]}); the stopped "
            "job's position of the partitions the reset does not name is unknown"
        )
    return found


def starting_offsets(
    partitions: Mapping[str, Sequence[int]],
    given: Sequence[InputOffset],
    resumed: Positions,
    otherwise: Literal["earliest", "latest"],
) -> str:
    """Spark's ``startingOffsets`` JSON for every partition of every input topic: the
    offset given, else where the stopped job's last batch ended, else ``otherwise``."""
    named = {(entry.topic, entry.partition): entry.offset for entry in given}
    fallback = EARLIEST if otherwise == "earliest" else LATEST
    chosen = {
        topic: {
            str(partition): named.get(
                (topic, partition), resumed.get(topic, {}).get(partition, fallback)
            )
            for partition in sorted(numbers)
        }
        for topic, numbers in partitions.items()
    }
    return json.dumps(chosen, sort_keys=True)


def unknown_partitions(
    partitions: Mapping[str, Sequence[int]], given: Sequence[InputOffset]
) -> list[str]:
    """Given offsets of partitions the topics do not have, named for the refusal."""
    return [
        f"spec.inputReset.offsets[{index}]: {entry.topic} has no partition {entry.partition}"
        for index, entry in enumerate(given)
        if entry.partition not in partitions.get(entry.topic, ())
    ]
