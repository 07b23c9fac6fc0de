"""What a change of a SparkJob's spec asks of its running driver, as one of a few
kinds, for the operator and ``onceflow run`` alike (``logic.spark_plan`` acts on it).

Two things can differ between what runs and what the spec asks, and each is compared
on its own:
- the sink's producers (the transactional-id prefix and the output partition count of
  an exactly-once Kafka sink), against the set the job's record names: a new set is a
  new sink identity, handed over (``logic.sink_handover``);
- everything else the driver is started from (mode and isolation level, the driver's
  settings and code, image, resources, sparkConf, checkpoint), as one value: what the
  operator rendered (the driver object's spec hash) or the job ``onceflow run``
  planned, compared for equality only.

Any difference of the second kind restarts the driver from its checkpoint, whatever
the field: no change is rolled in place. The driver reads its settings once, when it
starts, so an object patched under it would run on the old ones; a replaced object
starts without status, so the rollout never takes an old ``RUNNING`` for the new mode
running (it gates on the mode a driver reports); and a restart loses nothing, since
the query resumes from the batch its checkpoint names.
"""

from __future__ import annotations

from enum import Enum

from onceflow.logic.sink_handover import SinkProducers


class SpecChange(Enum):
    """Ordered by severity: a change of both kinds is handed over, and the new driver
    starts from the whole spec."""

    NONE = "none"
    """Nothing the driver is started from changed."""
    RESTART = "restart"
    """Restart from the checkpoint: the driver is replaced, its producers stay."""
    HAND_OVER = "handOver"
    """A new sink identity (or none recorded): the old producers must be unable to
    commit before a driver with the new ones starts."""


def classify_change(
    recorded: SinkProducers | None,
    wanted: SinkProducers | None,
    running: object | None,
    desired: object,
    *,
    driver_runs: bool,
) -> SpecChange:
    """``recorded`` and ``wanted``: the sink's producers as recorded and as the spec
    asks (``wanted`` None: no exactly-once Kafka sink, nothing to hand over).
    ``running``: what the running driver was started from (None: unknown, as for a
    driver object whose annotation someone removed, which is replaced since nothing
    vouches for what it runs); ``desired``: what one would be started from now;
    ``driver_runs``: whether a driver runs at all (none: nothing to replace)."""
    if wanted is not None and (recorded is None or not recorded.same_set(wanted)):
        return SpecChange.HAND_OVER
    if driver_runs and running != desired:
        return SpecChange.RESTART
    return SpecChange.NONE
