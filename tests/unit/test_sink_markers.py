"""The replay rules beyond the shared contract (tests/fixtures/sink_marker_contract.json,
checked by test_sink_marker_contract.py): an in-flight batch is finished in the layout
it started in."""

from __future__ import annotations

from onceflow.logic.sink_markers import Layout, SinkMarker, started_layout

OLD = Layout("out", 2)


def test_a_batch_in_flight_at_a_repartition_is_finished_in_its_old_layout() -> None:
    markers = [SinkMarker(5, "q", OLD), SinkMarker(4, "q", OLD)]
    assert started_layout(markers, "q", 5) == OLD
    assert started_layout(markers, "q", 6) is None, "later batches: the current layout"
    assert started_layout(markers, "other", 5) is None, "another query's batch 5"
