"""The sink handover: a new set of sink producers starts only after the driver of the
old set is stopped and the old ids are fenced; a rename is remembered for the batch
that may be in flight."""

from __future__ import annotations

from onceflow.logic.sink_handover import (
    FenceSink,
    KeepSink,
    RecordSink,
    SinkProducers,
    StopDriver,
    sink_handover,
)

JOB = "agg"


def test_a_first_start_records_the_producers_and_fences_nothing() -> None:
    wanted = SinkProducers("p", 2)
    assert sink_handover(None, wanted, driver_running=False, job=JOB) == RecordSink(wanted)


def test_a_running_driver_with_nothing_recorded_is_stopped_before_recording() -> None:
    """A lost status: whose ids the running driver writes with is unknown."""
    step = sink_handover(None, SinkProducers("p", 2), driver_running=True, job=JOB)
    assert isinstance(step, StopDriver)


def test_the_same_set_keeps_what_is_recorded_with_its_previous_prefix() -> None:
    recorded = SinkProducers("p", 2, previous_prefix="old")
    step = sink_handover(recorded, SinkProducers("p", 2), driver_running=True, job=JOB)
    assert step == KeepSink(recorded)


def test_a_repartition_stops_the_driver_then_fences_the_old_ids() -> None:
    recorded, wanted = SinkProducers("p", 2, previous_prefix="old"), SinkProducers("p", 3)
    assert isinstance(sink_handover(recorded, wanted, driver_running=True, job=JOB), StopDriver)
    step = sink_handover(recorded, wanted, driver_running=False, job=JOB)
    assert isinstance(step, FenceSink)
    assert step.ids == ("p/sink/agg/0", "p/sink/agg/1")
    assert step.then == SinkProducers("p", 3, previous_prefix="old"), "a rename is not forgotten"


def test_a_rename_fences_the_old_prefixs_ids_and_remembers_it() -> None:
    recorded, wanted = SinkProducers("p", 2), SinkProducers("q", 2)
    assert isinstance(sink_handover(recorded, wanted, driver_running=True, job=JOB), StopDriver)
    step = sink_handover(recorded, wanted, driver_running=False, job=JOB)
    assert isinstance(step, FenceSink)
    assert step.ids == ("p/sink/agg/0", "p/sink/agg/1")
    assert step.then == SinkProducers("q", 2, previous_prefix="p")
    assert "prefix 'p' -> 'q'" in step.reason


def test_a_crash_after_fencing_repeats_the_fence_until_the_new_set_is_recorded() -> None:
    """Fencing is idempotent; what moves the handover on is the record, written after."""
    recorded, wanted = SinkProducers("p", 2), SinkProducers("q", 2)
    first = sink_handover(recorded, wanted, driver_running=False, job=JOB)
    again = sink_handover(recorded, wanted, driver_running=False, job=JOB)
    assert first == again
    assert isinstance(first, FenceSink)
    assert sink_handover(first.then, wanted, driver_running=False, job=JOB) == KeepSink(first.then)
