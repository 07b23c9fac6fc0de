"""What a driver makes sure of before it starts a query on a reset's checkpoint.

Applying an input reset (``logic.input_reset``) writes nothing but status; the checkpoints
themselves live here, under ``<checkpoint>/resets/<n>-<id>``:

- **The newest one runs.** ``resets/current`` names the newest reset checkpoint a driver
  started on. A driver told an older one (a status lost with a re-created SparkJob,
  whose settings then name the job's own checkpoint) follows it instead: going back
  would replay everything since the reset.
- **Partitions a reset does not name go on where the job stopped**: the last finished
  batch of the newest earlier checkpoint that planned any (a reset applied on top of
  one that never ran is skipped over, not taken for "nothing read yet").
- **No batch is left half written.** A batch the stopped query planned but did not
  finish may be in the output already (the Kafka sink commits each output partition
  before Spark's commit log records the batch); a new query cannot finish it (the
  sinks tell queries apart), so the old one does first, alone, with a single trigger.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onceflow.api.driver import SparkJobSettings
from onceflow.api.input_reset import RESETS_DIRECTORY
from onceflow.spark.hadoop_files import exists, last_batch, names_in, read_text, replace_text

log = logging.getLogger(__name__)

POINTER = "current"
ResetCheckpoint = tuple[int, str]
"""(number, directory name) of a reset checkpoint; (0, "") is the job's own."""


def _split(location: str) -> tuple[str, ResetCheckpoint]:
    marker = f"/{RESETS_DIRECTORY}/"
    if marker not in location:
        return location.rstrip("/"), (0, "")
    base, name = location.rstrip("/").rsplit(marker, 1)
    return base, (_number(name), name)


def _number(name: str) -> int:
    head = name.split("-", 1)[0]
    return int(head) if head.isdigit() else -1


def _path(base: str, checkpoint: ResetCheckpoint) -> str:
    return f"{base}/{RESETS_DIRECTORY}/{checkpoint[1]}" if checkpoint[0] else base


def _planned(spark: Any, location: str) -> int:
    return last_batch(spark, f"{location}/offsets")


@dataclass(frozen=True)
class QueryStart:
    """What the driver starts its query with: its settings (perhaps pointed at another
    checkpoint), and its own note of where partitions go on from."""

    settings: SparkJobSettings
    continue_from_checkpoint: str | None = None
    """The checkpoint whose last finished batch the partitions an input reset does not
    name go on from (``spark.input_position``). The driver's own finding, never told:
    so it is not part of the settings the operator writes."""


def prepare_checkpoint(
    spark: Any, settings: SparkJobSettings, finish: Callable[[SparkJobSettings], None]
) -> QueryStart:
    """What to start the query with. ``finish`` runs a query of the given settings for
    one trigger and waits for it (the old checkpoint's batch in flight)."""
    base, told = _split(settings.checkpoint_location)
    pointer = f"{base}/{RESETS_DIRECTORY}/{POINTER}"
    newest = (0, "")
    if exists(spark, pointer):
        name = read_text(spark, pointer).strip()
        newest = (_number(name), name)
    if newest[0] > told[0]:
        log.warning(
            "the checkpoint %s was reset to %s since; running on that one (the job's "
            "status may have been lost)", settings.checkpoint_location, newest[1],
        )  # fmt: skip
        return QueryStart(_without_reset(settings, _path(base, newest)))
    if told[0] == 0 or _planned(spark, settings.checkpoint_location) >= 0:
        # the job's own checkpoint, or a reset's that has run: resumed
        return QueryStart(settings)
    replace_text(spark, pointer, told[1])
    if not settings.starting_partition_offsets:
        return QueryStart(settings)
    earlier = _newest_planned_before(spark, base, told)
    if earlier is None:
        return QueryStart(settings)
    if last_batch(spark, f"{earlier}/commits") < _planned(spark, earlier):
        log.warning("finishing the batch the stopped query left in flight on %s", earlier)
        finish(_without_reset(settings, earlier))
    return QueryStart(settings, continue_from_checkpoint=earlier)


def _newest_planned_before(spark: Any, base: str, told: ResetCheckpoint) -> str | None:
    """The newest checkpoint before ``told`` that planned a batch."""
    names = [n for n in names_in(spark, f"{base}/{RESETS_DIRECTORY}") if 0 < _number(n) < told[0]]
    for name in sorted(names, key=_number, reverse=True):
        location = _path(base, (_number(name), name))
        if _planned(spark, location) >= 0:
            return location
    return base if _planned(spark, base) >= 0 else None


def _without_reset(settings: SparkJobSettings, checkpoint: str) -> SparkJobSettings:
    return settings.model_copy(
        update={
            "checkpoint_location": checkpoint,
            "starting_timestamp": None,
            "starting_partition_offsets": None,
        }
    )
