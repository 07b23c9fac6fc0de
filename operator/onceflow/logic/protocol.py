"""The generation protocol, written once: given what is recorded, what the spec wants
and what runs, the one next step. The operator executes the steps against a
KafkaSource's status and pods, ``onceflow run`` against its state file and child
processes (DESIGN 3.2b).

The invariant: no task of generation N starts while a producer of an earlier one could
still commit. Every producer of the predecessor is either fenced (its transactional
ids, as recorded, initialised by someone else) or confirmed gone (a non-transactional
predecessor, or one whose ids are unknown). The intent is recorded before anything is
stopped, so a driver that crashes after any step finds the same pending record and
repeats the remaining steps (each is idempotent).

Order within a pending generation: stop the others -> wait until they are gone where
fencing cannot cover them -> fence the predecessor's ids and carry its offsets to a
renamed offsets topic -> record "fenced" -> start the tasks.

States (``spec.state``) are steps of the same walk and keep the generation, its ids
and its offsets: the new state is recorded first (tasks read it: a paused one stops
polling at its next boundary, one of a stopped source ends without writing), then a
stop stops every task -> fences the generation's ids (or, without transactions, waits
until the tasks are gone) -> records "stop fenced", the proof that nothing of the
source can write any more. Resuming records ``running`` and starts the tasks, whose
initialisation fences whatever a stopped task left.

An offsets change (KIP-875) of a stopped source: the connector checks it -> the
checked offsets are recorded as ``Applying`` -> they are written in one transaction ->
``Applied``. Nothing else moves while a change is ``Applying`` (not a resume, not a new
generation), so a driver that crashed after writing, or inside the transaction, writes
the same change again (aborting what it left open) before any task reads offsets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from onceflow.api.pipeline import WorkloadState
from onceflow.api.source import OffsetsChangeResult
from onceflow.logic.fence_backoff import FenceFailures
from onceflow.logic.generations import GenerationRecord, OffsetsOutcome
from onceflow.model.tasks import DesiredGeneration, OffsetsRequest


@dataclass(frozen=True)
class Worker:
    """One running (or finished, not yet removed) task: a pod or a process."""

    name: str
    generation: int | None
    """None when it cannot be told (a pod without the label): treated as another's."""
    task: int | None
    incarnation: str | None = None
    """None when not recorded (workers of older versions): the generation decides."""
    stopping: bool = False
    """Asked to stop already (a terminating pod)."""
    finished: bool = False
    """Exited and not restarted in place (a Succeeded/Failed pod)."""
    template: str | None = None
    """What the worker was made from beyond its task config (a pod's image, resources);
    None where that cannot change (processes of ``onceflow run``)."""


@dataclass(frozen=True)
class Keep:
    """Nothing to do: the recorded generation runs every task."""


@dataclass(frozen=True)
class RecordIntent:
    """Persist ``record`` (guarded write) before anything else happens."""

    record: GenerationRecord


@dataclass(frozen=True)
class Stop:
    """Ask these workers to stop (graceful, bounded by the driver's grace period)."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class WaitGone:
    """Come back later: these must be gone first, and fencing cannot replace that."""

    names: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class Fence:
    """Fence ``ids`` (all or nothing), carry the offsets if the topic was renamed, then
    persist ``then``. On failure the driver records ``FenceFailures.after_failure``."""

    ids: tuple[str, ...]
    carry_offsets: tuple[str, str] | None
    """(from, to) offsets topics, when the generation renamed it."""
    then: GenerationRecord


@dataclass(frozen=True)
class BackOff:
    delay_s: float
    reason: str


@dataclass(frozen=True)
class Start:
    """Start these tasks of ``generation`` (none of them has a worker)."""

    generation: int
    tasks: tuple[int, ...]


@dataclass(frozen=True)
class CheckOffsets:
    """Have the connector check ``request`` (against its source system too), then
    persist ``record`` with the outcome: ``Applying`` with the offsets to write, or
    ``Refused``. Only ever asked of a stopped source."""

    request: OffsetsRequest
    record: GenerationRecord


@dataclass(frozen=True)
class WriteOffsets:
    """Write the ``Applying`` change of ``record`` to the offsets topic in one
    transaction, then persist ``record`` with the change ``Applied``."""

    record: GenerationRecord


Step = Keep | RecordIntent | Stop | WaitGone | Fence | BackOff | Start | CheckOffsets | WriteOffsets


@dataclass(frozen=True)
class Observed:
    workers: tuple[Worker, ...] = field(default_factory=tuple)
    template: str | None = None
    """What workers should be made from now: one made otherwise is rolled (stopped and
    started again in the same generation)."""


def ids_to_fence(record: GenerationRecord) -> tuple[str, ...]:
    """The predecessor's ids that need fencing before ``record``'s tasks start.

    Only producers with transactional ids can be fenced; a non-transactional
    predecessor's recorded ids are fenced anyway when the successor is transactional
    (a zombie of an even older transactional generation may hold one). One task whose
    id stays the same is skipped when the successor is transactional: its own
    initialisation fences the only id before it reads offsets; not when the offsets
    topic moved too, since the offsets are copied before the successor exists, and the
    predecessor must be unable to commit to the old topic by then."""
    previous_transactional = record.previous_mode is None or record.previous_mode.transactional
    if not record.previous_ids or not (previous_transactional or record.mode.transactional):
        return ()
    if (
        len(record.previous_ids) == 1
        and record.previous_ids == record.ids
        and record.mode.transactional
        and record.previous_offsets_topic in (None, record.offsets_topic)
    ):
        return ()
    return record.previous_ids


def _unfenceable_predecessor(record: GenerationRecord) -> bool:
    """A predecessor that had no ids (or unknown ones): only "gone" is proof that
    nothing of it writes any more (KIP-618's non-compliant worker, made visible). That
    holds for an at-least-once successor too: a stopping task flushes its final offsets
    on the way out, and a successor that read the offsets before that flush would write
    the same records again on every planned change (`disabled` -> `preparing`, a
    resize), where Connect's own at-least-once mode writes them once."""
    return record.previous_mode is None or not record.previous_mode.transactional


def next_step(
    record: GenerationRecord | None,
    desired: DesiredGeneration,
    observed: Observed,
    failures: FenceFailures,
    now: float,
) -> Step:
    if record is None:
        return RecordIntent(GenerationRecord.first(desired))
    if (recorded := _record_step(record, desired)) is not None:
        return recorded
    own = [w for w in observed.workers if _belongs(w, record)]
    others = [w for w in observed.workers if not _belongs(w, record)]
    running = tuple(w.name for w in others if not w.stopping)
    if record.fencing_pending:
        return _finish_pending(record, others, running, failures, now)
    if record.state is WorkloadState.STOPPED:
        return _stopped(record, observed.workers, failures, now)
    return _steady(record, own, others, running, observed.template)


def _record_step(record: GenerationRecord, desired: DesiredGeneration) -> Step | None:
    """What changes the record before any task is looked at: an offsets change being
    applied is finished first (nothing may read offsets half written), then the spec's
    next generation or state, then a new offsets change."""
    if record.offsets_change is not None and record.offsets_change.applying:
        return WriteOffsets(record)
    if (moved := _moved_on(record, desired)) is not None:
        return RecordIntent(moved)
    return _offsets_change(record, desired)


def _moved_on(record: GenerationRecord, desired: DesiredGeneration) -> GenerationRecord | None:
    """The record the spec asks for next, one change at a time: a new generation, or a
    new state of the same one; None while the record is what the spec asks."""
    if record.fingerprint != desired.fingerprint:
        # A pending generation (the spec moved on before it started) is re-planned in place.
        if record.fencing_pending:
            return record.with_replanned(desired)
        return record.with_new_generation(desired)
    if record.state is not desired.state:
        return record.with_state(desired.state)
    return None


REFUSED_WHILE_NOT_STOPPED = (
    "offsets change only while the source is stopped (KIP-875): this change was asked of "
    "a source in state {state} and is never applied; set spec.state: stopped, then give "
    "the change a new id"
)


def _offsets_change(record: GenerationRecord, desired: DesiredGeneration) -> Step | None:
    """A change of offsets not handled yet: refused at once unless the spec stops the
    source (kept for later, it would fire at some unrelated stop), applied once the
    record proves the source stopped, and meanwhile left to the stop's own steps."""
    request = desired.offsets_change
    if request is None or (record.offsets_change and record.offsets_change.handled(request.id)):
        return None
    if desired.state is not WorkloadState.STOPPED:
        why = REFUSED_WHILE_NOT_STOPPED.format(state=desired.state)
        refused = OffsetsOutcome(request.id, OffsetsChangeResult.REFUSED, why)
        return RecordIntent(record.with_offsets_change(refused))
    if record.stopped:
        return CheckOffsets(request, record)
    return None


def _belongs(worker: Worker, record: GenerationRecord) -> bool:
    """A worker of the recorded generation, and of this incarnation of the record."""
    return worker.generation == record.generation and worker.incarnation in (
        None,
        record.incarnation,
    )


def _finish_pending(
    record: GenerationRecord,
    others: Sequence[Worker],
    running: tuple[str, ...],
    failures: FenceFailures,
    now: float,
) -> Step:
    if running:
        return Stop(running)
    if others and _unfenceable_predecessor(record):
        what = (
            "earlier tasks (another incarnation's, or ids not recorded)"
            if record.previous_mode is None
            else f"generation {record.generation - 1} (not transactional)"
        )
        return WaitGone(
            tuple(w.name for w in others),
            f"{what} cannot be fenced: waiting until those tasks are gone",
        )
    if now < failures.retry_at:
        return BackOff(failures.retry_at - now, "fencing failed; retrying")
    previous = record.previous_offsets_topic
    carry = (
        (previous, record.offsets_topic) if previous not in (None, record.offsets_topic) else None
    )
    return Fence(ids_to_fence(record), carry, record.with_fenced())


def _stopped(
    record: GenerationRecord,
    workers: Sequence[Worker],
    failures: FenceFailures,
    now: float,
) -> Step:
    """Every task stopped, then the generation's ids fenced, always (fencing a pending
    generation may have left one unchanged id to a successor that a stop never
    starts): a task that outlives its stop (a pod on a lost node, a process that
    ignores SIGTERM) can then no longer commit, so the offsets are the source's
    alone. Without transactions there is nothing to fence and only "gone" proves it."""
    running = tuple(w.name for w in workers if not w.stopping)
    if running:
        return Stop(running)
    if record.stop_fenced:
        return Keep()
    if not record.mode.transactional:
        if workers:
            return WaitGone(
                tuple(w.name for w in workers),
                f"stopped in mode {record.mode} (no transactions): only gone proves that "
                "its tasks write no more",
            )
        return Fence((), None, record.with_stop_fenced())
    if now < failures.retry_at:
        return BackOff(failures.retry_at - now, "fencing failed; retrying")
    return Fence(record.ids, None, record.with_stop_fenced())


def _steady(
    record: GenerationRecord,
    own: Sequence[Worker],
    others: Sequence[Worker],
    running: tuple[str, ...],
    template: str | None,
) -> Step:
    # A finished task of the current generation was stopped from outside (a source
    # task never ends by itself): remove it, then start it again in the same generation.
    # A task made from an outdated template (image, resources) is rolled the same way:
    # its successor's initialisation fences it.
    stale = tuple(
        w.name
        for w in own
        if not w.stopping
        and (w.finished or (template is not None and w.template not in (None, template)))
    )
    if running or stale:
        return Stop(running + stale)
    # Another incarnation's task of the same number holds the same pod name until gone.
    taken = {w.task for w in (*own, *others) if w.generation == record.generation}
    missing = tuple(t for t in range(record.task_count) if t not in taken)
    if missing:
        return Start(record.generation, missing)
    return Keep()
