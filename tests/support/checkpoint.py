"""What a Structured Streaming checkpoint says about the batch a driver is running."""

from __future__ import annotations

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
