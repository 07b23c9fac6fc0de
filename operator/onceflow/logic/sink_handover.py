"""Handing a Spark job's exactly-once Kafka sink from one set of producers to another:
the generation protocol's invariant for the sink, written once for the operator
(SparkJob status and driver object) and ``onceflow run`` (state file and driver
process).

The sink's producers are one transactional id per output partition under the
pipeline's prefix. A change of the partition count or of the prefix (a renamed
prefix, the job moved to another Pipeline) names a new set: no driver with the new
set starts while the old one could still commit. So the driver is stopped, the
recorded ids are fenced, and only then is the new set recorded and the driver
started -- a supervisor that crashes in between finds the old record and repeats the
remaining steps. The new driver is told the prefix it replaces, so a batch left in
flight under the old ids is finished there (``spark.kafka_sink.where_batch_started``).
"""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.model.spark_names import sink_transactional_ids


@dataclass(frozen=True)
class SinkProducers:
    """Who may write the sink: the ids' prefix and the output partition count."""

    prefix: str
    partitions: int
    previous_prefix: str | None = None
    """The prefix before the last rename, kept for the batch that may be in flight."""

    def ids(self, job: str) -> tuple[str, ...]:
        return tuple(sink_transactional_ids(self.prefix, job, self.partitions))

    def same_set(self, other: SinkProducers) -> bool:
        return (self.prefix, self.partitions) == (other.prefix, other.partitions)


@dataclass(frozen=True)
class KeepSink:
    """The recorded producers are the wanted ones: start or keep the driver with them."""

    producers: SinkProducers


@dataclass(frozen=True)
class RecordSink:
    """No producers recorded yet (a first start): persist these, nothing to fence."""

    producers: SinkProducers


@dataclass(frozen=True)
class StopDriver:
    """The running driver writes with the recorded producers: stop it first."""

    reason: str


@dataclass(frozen=True)
class FenceSink:
    """Fence ``ids`` (all or nothing), then persist ``then``; on failure the driver
    stays stopped and the step is tried again."""

    ids: tuple[str, ...]
    then: SinkProducers
    reason: str


SinkStep = KeepSink | RecordSink | StopDriver | FenceSink


def sink_handover(
    recorded: SinkProducers | None, wanted: SinkProducers, driver_running: bool, job: str
) -> SinkStep:
    if recorded is None:
        if driver_running:
            # Nothing says whose ids the running driver writes with (a lost status): it
            # stops, and its pods are confirmed gone, before anything is recorded.
            return StopDriver("no sink producers recorded for the running driver")
        return RecordSink(wanted)
    if recorded.same_set(wanted):
        return KeepSink(recorded)
    change = _describe(recorded, wanted)
    if driver_running:
        return StopDriver(f"{change}: waiting for the old driver to stop")
    renamed = recorded.prefix != wanted.prefix
    then = SinkProducers(
        wanted.prefix,
        wanted.partitions,
        recorded.prefix if renamed else recorded.previous_prefix,
    )
    return FenceSink(recorded.ids(job), then, change)


def _describe(recorded: SinkProducers, wanted: SinkProducers) -> str:
    parts = []
    if recorded.partitions != wanted.partitions:
        parts.append(f"sink partitions {recorded.partitions} -> {wanted.partitions}")
    if recorded.prefix != wanted.prefix:
        parts.append(f"transactional-id prefix {recorded.prefix!r} -> {wanted.prefix!r}")
    return "; ".join(parts)
