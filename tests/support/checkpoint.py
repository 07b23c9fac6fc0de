"""What a Structured Streaming checkpoint says about the batches a driver ran, and the
same for the metadata log of Spark's file sink, which has the checkpoint's shape."""

from __future__ import annotations

import json
from pathlib import Path


def last_batch(checkpoint: Path, log: str) -> int:
    """The newest batch id in the checkpoint's ``offsets`` (planned) or ``commits``
    (committed) log; -1 for none."""
    ids = [int(p.name) for p in (checkpoint / log).glob("[0-9]*")]
    return max(ids, default=-1)


def batch_in_flight(checkpoint: Path) -> bool:
    """A batch is planned (in the offset log) but not committed (in the commit log):
    a driver killed now leaves it for the next one to replay."""
    return last_batch(checkpoint, "offsets") > last_batch(checkpoint, "commits")


def planned_ends(checkpoint: Path, batch: int) -> dict[str, dict[int, int]]:
    """Per source topic and partition, the offset ``batch`` reads up to (exclusive):
    every input record below it belongs to batch ``batch`` or an earlier one. An offset
    log entry is a version line, a metadata line, then one line per source (``-`` for a
    source without offsets)."""
    lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    ends: dict[str, dict[int, int]] = {}
    for line in lines[2:]:
        if line.strip() in ("", "-"):
            continue
        for topic, partitions in json.loads(line).items():
            ends[topic] = {int(p): int(offset) for p, offset in partitions.items()}
    return ends


def forget_batch(checkpoint: Path, log: str, batch: int) -> None:
    """Removes ``batch`` from the checkpoint's ``log`` as if it had never been written,
    its checksum file too: Spark writes a log entry to a temporary file and renames it
    into place, so a driver that died before the rename left neither. A stale checksum
    would break the rename of the entry written again."""
    (checkpoint / log / str(batch)).unlink()
    (checkpoint / log / f".{batch}.crc").unlink(missing_ok=True)


def query_id(checkpoint: Path) -> str:
    """The streaming query's id: the same for every driver of this checkpoint, new for
    a new checkpoint. The sinks' markers name it."""
    identity: str = json.loads((checkpoint / "metadata").read_text())["id"]
    return identity


def last_file_sink_batch(output: Path) -> int:
    """The newest batch Spark's file sink committed to ``output`` (its ``_spark_metadata``
    log, where every tenth entry is compacted into ``<batch>.compact``); -1 for none."""
    ids = [int(p.name.split(".")[0]) for p in (output / "_spark_metadata").glob("[0-9]*")]
    return max(ids, default=-1)
