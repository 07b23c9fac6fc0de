"""The sink conformance kit: the run an exactly-once sink of Onceflow's Spark jobs must
pass, whatever it writes to.

A sink under test is described by a ``SinkSubject``: the job writing through it, the
change of its layout (what decides where a row goes: a topic's partitions, the Postgres
sink's slices), and an audit comparing exactly what the sink holds with the committed
input. ``run_sink_kit`` runs one job over one growing input through the faults a sink
must survive, in as few driver lives as they allow (a driver's start costs about 16 s
on two cores), in this order:

a. a driver dies between the sink's commit of a batch and the checkpoint's;
b. drivers are SIGKILLed at random moments, aimed inside batches;
c. a driver dies between the two commits again, and the job comes back on the same
   checkpoint with another layout, another name and another transactional-id prefix
   at once (a SparkJob renamed and moved to another Pipeline, as a GitOps rename
   does), draining its input: the batch in flight must be finished in the layout,
   under the name and under the ids it started with;
d. the checkpoint is lost while the old query's markers stay, markers of an earlier
   sink version planted again beside them, and the job starts over from ``earliest``
   with larger batches over more input: no batch of the new query may be taken for
   written, and what the old query wrote is written once more (the price of losing a
   checkpoint, which is the user's to pay).

After each stage the sink must hold exactly what the checkpoint says was written, and
never a record of an aborted input transaction; a fault that did not land fails the
run. Driver lives: 1 (a) + kills (b) + 2 (c) + 1 (d).
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from onceflow.api.driver import SparkJobSettings
from tests.support.checkpoint import last_batch, planned_ends
from tests.support.copy_job import (
    DRIVER_KILLS,
    POISON,
    RECORDS,
    CommittedInput,
    Record,
    produce_input,
)
from tests.support.drivers import (
    DRAIN,
    die_between_sink_commit_and_checkpoint,
    drain,
    driver_log,
    kill_drivers,
    start_driver,
)
from tests.support.kafka import new_topic

SEED = 42
RESET_BATCH_OFFSETS = 1_000_000
"""Stage d's batches: the new query's batch 0 holds all the input, old and new, so a
sink that took it for the old query's batch 0 would drop everything."""
SHOWN = 5

Expected = Counter[Record]
"""How many times each committed input record must have reached the sink."""
Item = TypeVar("Item", bound=tuple[Any, ...])


@dataclass(frozen=True)
class SinkKitSize:
    """How hard a run is."""

    kills: int
    """SIGKILLs of stage b."""
    records: int
    """Numbers per stream in the first input, and again in stage d's."""

    def __post_init__(self) -> None:
        if self.kills < 1:
            raise ValueError(f"stage b needs at least one kill, not {self.kills}")

    @classmethod
    def from_env(cls) -> SinkKitSize:
        """ONCEFLOW_CHAOS_DRIVER_KILLS (default 3) and the input that goes with it."""
        return cls(kills=DRIVER_KILLS, records=RECORDS)

    @property
    def driver_lives(self) -> int:
        return self.kills + 4

    @property
    def timeout_s(self) -> int:
        """A run's bound: a minute per driver life (a start, a few batches, a kill's
        wait for its moment) and five for the input and the audits."""
        return 60 * (self.driver_lives + 5)


@dataclass(frozen=True)
class SinkAudit:
    """What a sink holds against what it must hold, at one moment."""

    held: int
    """Records (rows, messages) the sink holds."""
    missing: int
    """Of what it must hold, how much it does not: a loss, or a key's last value lost."""
    surplus: int
    """What it holds beyond that: a record twice, a stale value, a poison record."""
    poison: int
    """Records of aborted input transactions among the held."""
    disorder: int = 0
    """For sinks that keep an order per key: records behind a later one of their key."""
    unreadable: int = 0
    """Held records the audit could not parse."""
    examples: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not (self.missing or self.surplus or self.poison or self.unreadable)

    def __str__(self) -> str:
        return (
            f"{self.held} held, {self.missing} missing, {self.surplus} surplus, "
            f"{self.poison} poison, {self.disorder} out of order, {self.unreadable} "
            f"unreadable; {', '.join(self.examples) or 'no difference'}"
        )


def compare(
    held: Counter[Item], truth: Counter[Item], *, disorder: int = 0, unreadable: int = 0
) -> SinkAudit:
    """A subject's audit from the items (tuples, the stream first) its sink holds and
    those it must hold."""
    missing, surplus = truth - held, held - truth
    examples = [f"missing {item}" for item in sorted(missing, key=str)[:SHOWN]]
    examples += [f"{n} surplus {item}" for item, n in sorted(surplus.items(), key=str)[:SHOWN]]
    return SinkAudit(
        held=sum(held.values()),
        missing=sum(missing.values()),
        surplus=sum(surplus.values()),
        poison=sum(n for item, n in held.items() if item[0] == POISON),
        disorder=disorder,
        unreadable=unreadable,
        examples=tuple(examples),
    )


@dataclass(frozen=True)
class LayoutChange:
    """Stage c's change, for the subject to show where each batch went."""

    before: SparkJobSettings
    after: SparkJobSettings
    batch: int
    """In flight at the change: committed by the sink under ``before``, not recorded by
    the checkpoint."""
    through_batch: Expected
    """The input of batches 0 to ``batch``: where ``before`` put it."""
    later: Expected
    """The rest of the input before the reset: where ``after`` puts it."""


class SinkSubject(Protocol):
    """A sink under test. Subclass it to inherit the defaults: Onceflow's drill stops a
    driver between the two commits, and the sink has no older marker format to plant."""

    name: str
    """The test id."""
    reset_refusal: str | None = None
    """Words a driver stops with when its checkpoint is newer than what the sink holds
    (stage d), for a sink that cannot write safely after a reset and must refuse it,
    losing nothing; None for a sink that writes on."""

    def settings(self, bootstrap: str, source_topic: str, workdir: Path) -> SparkJobSettings:
        """Prepares what the sink writes into (a table; a topic or a directory the job
        makes itself) and returns the job (``copy_job_settings``, checkpointed in
        ``workdir``) with a transform fitting the sink. Called once."""
        ...

    def relayout(self, settings: SparkJobSettings) -> SparkJobSettings | None:
        """``settings`` with the sink's layout changed the way that would lose or
        duplicate a batch in flight finished in the new layout; None for a sink
        without a layout."""
        ...

    def audit(self, expected: Expected) -> SinkAudit:
        """Reads everything the sink holds, as its readers see it, and compares it with
        what ``expected`` says it must hold (``compare``)."""
        ...

    def die_between_commits(self, settings: SparkJobSettings, workdir: Path) -> int:
        """Leaves the job as a driver that died right after the sink's commit of a
        batch, before the checkpoint's, leaves it; returns the batch."""
        return die_between_sink_commit_and_checkpoint(settings, workdir)

    def layout_problems(self, change: LayoutChange) -> list[str]:
        """What shows that the batch in flight was not finished where it started, or
        that later batches did not follow the new layout; asked only of a subject whose
        ``relayout`` changed something."""
        raise NotImplementedError(f"{self.name}: a layout change must be shown to land")

    def plant_old_markers(self, settings: SparkJobSettings) -> Callable[[], int] | None:
        """Writes markers in a format of an earlier sink version, which the sink must
        never take as written by this query, and returns how to count those left; None
        for a sink without such a format."""
        return None


@dataclass(frozen=True)
class SinkKitReport:
    subject: str
    audit: SinkAudit
    """The final one, after the reset."""
    stopped_after_commit: int
    """Stage a's batch."""
    kills_inside: int
    in_flight_at_change: int
    """Stage c's batch."""
    old_markers: bool
    driver_lives: int

    def summary(self) -> str:
        planted = ", with an older format's markers planted" if self.old_markers else ""
        return (
            f"{self.subject}: stopped after the sink's commit of batch "
            f"{self.stopped_after_commit}, {self.kills_inside} kills inside a batch, batch "
            f"{self.in_flight_at_change} in flight at the layout and prefix change{planted}, "
            f"{self.driver_lives} driver lives; after the reset: {self.audit}"
        )


def _exactly(audit: SinkAudit, what: str) -> None:
    assert audit.ok, f"{what}: {audit}"


def _planned_input(source: CommittedInput, checkpoint: Path) -> Callable[[int], Expected]:
    """The input of batches 0 to a batch, as the checkpoint planned them."""
    return lambda batch: source.through(planned_ends(checkpoint, batch))


def _begun(
    subject: SinkSubject, through: Callable[[int], Expected], checkpoint: Path
) -> tuple[int, SinkAudit]:
    """The last batch planned and the sink against everything planned up to it, read
    again if the offset log moved during the audit: a SIGKILLed driver's JVM ends a
    moment after it (once it sees its parent's pipe close), in which Spark's own file
    sink can still write a batch."""
    planned = last_batch(checkpoint, "offsets")
    begun = subject.audit(through(planned))
    if last_batch(checkpoint, "offsets") > planned:
        planned = last_batch(checkpoint, "offsets")
        begun = subject.audit(through(planned))
    return planned, begun


def _reset_checkpoint(
    subject: SinkSubject,
    settings: SparkJobSettings,
    first: CommittedInput,
    bootstrap: str,
    source: str,
    size: SinkKitSize,
    workdir: Path,
) -> SinkAudit:
    """Stage d; returns the final audit."""
    checkpoint = Path(settings.checkpoint_location)
    # Planted while the checkpoint still says how many batches the old query had: they
    # cover the new query's batch 0 as well.
    old_markers = subject.plant_old_markers(settings)
    shutil.rmtree(checkpoint)
    second = produce_input(bootstrap, source, first_seq=size.records + 1, records=size.records)
    reset = settings.model_copy(update={"max_offsets_per_trigger": RESET_BATCH_OFFSETS})
    if subject.reset_refusal is not None:
        refused = start_driver(reset.model_copy(update={"trigger": DRAIN}), workdir).wait(300)
        assert refused != 0, f"d: a reset checkpoint must be refused: {driver_log(workdir)}"
        assert subject.reset_refusal in driver_log(workdir), driver_log(workdir)
        final = subject.audit(first.records())
        _exactly(final, "d: refused after the checkpoint's reset, nothing lost or added")
        return final
    drain(reset, workdir)
    final = subject.audit(first.records() + first.records() + second.records())
    _exactly(final, "d: after the checkpoint's reset, the old input twice and the new once")
    if old_markers is not None:
        left = old_markers()
        assert left == 0, f"d: {left} markers of the older format outlived the reset"
    return final


def run_sink_kit(
    subject: SinkSubject, bootstrap: str, workdir: Path, size: SinkKitSize
) -> SinkKitReport:
    source = new_topic(bootstrap, f"sink-kit-{subject.name}", partitions=3)
    first = produce_input(bootstrap, source, records=size.records)
    settings = subject.settings(bootstrap, source, workdir)
    checkpoint = Path(settings.checkpoint_location)
    through = _planned_input(first, checkpoint)

    stopped = subject.die_between_commits(settings, workdir)
    _exactly(
        subject.audit(through(stopped)),
        f"a: stopped between the sink's commit of batch {stopped} and the checkpoint's, "
        f"the sink must hold batches 0-{stopped}",
    )

    inside = kill_drivers(settings, workdir, size.kills, seed=SEED)
    assert inside > 0, f"b: none of {size.kills} kills landed inside a batch"
    committed = last_batch(checkpoint, "commits")
    assert committed > stopped, "b: the killed drivers committed no batch"
    recorded = subject.audit(through(committed))
    assert recorded.missing == 0, f"b: batches 0-{committed} are recorded, not written: {recorded}"
    planned, begun = _begun(subject, through, checkpoint)
    assert not (begun.surplus or begun.unreadable), f"b: more than batches 0-{planned}: {begun}"

    old_markers_left = subject.plant_old_markers(settings)
    in_flight = subject.die_between_commits(settings, workdir)
    through_in_flight = through(in_flight)
    _exactly(
        subject.audit(through_in_flight),
        f"c: stopped between the commits of batch {in_flight}, the sink must hold batches "
        f"0-{in_flight}",
    )
    later = first.records() - through_in_flight
    assert later, f"c: no input left after batch {in_flight}: the kit needs more records"
    relaid = subject.relayout(settings)
    changed = (relaid or settings).model_copy(
        update={
            "job": f"{settings.job}-renamed",
            "transactional_id_prefix": f"{settings.transactional_id_prefix}-renamed",
            "previous_transactional_id_prefix": settings.transactional_id_prefix,
            # The batch in flight is replayed as planned, whatever this says; the rest
            # in two or three batches of the new layout and ids, not ten: a second one
            # shows the change held past its first batch.
            "max_offsets_per_trigger": max(1, sum(later.values()) // 2),
        }
    )
    drain(changed, workdir)
    drained = subject.audit(first.records())
    _exactly(drained, f"c: batch {in_flight} finished after the change, then the rest")
    # Only before the reset: the new query writes every key's numbers from 1 again.
    assert drained.disorder == 0, f"c: records out of their key's order: {drained}"
    if relaid is not None:
        change = LayoutChange(settings, changed, in_flight, through_in_flight, later)
        problems = subject.layout_problems(change)
        assert not problems, f"c: {problems}"
    if old_markers_left is not None:
        left = old_markers_left()
        assert left == 0, f"c: {left} markers of the older format outlived the restart"

    final = _reset_checkpoint(subject, changed, first, bootstrap, source, size, workdir)

    return SinkKitReport(
        subject=subject.name,
        audit=final,
        stopped_after_commit=stopped,
        kills_inside=inside,
        in_flight_at_change=in_flight,
        old_markers=old_markers_left is not None,
        driver_lives=len(list(workdir.glob("job-*.json"))),
    )
