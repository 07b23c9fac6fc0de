"""The replay rules: a batch is skipped only when its own query committed it in this
layout, and an in-flight batch is finished in the layout it started in."""

from __future__ import annotations

import pytest

from onceflow.logic.sink_markers import Layout, SinkMarker, already_written, started_layout

OLD, NEW = Layout("out", 2), Layout("out-v2", 3)


@pytest.mark.parametrize(
    ("marker", "batch", "skip"),
    [
        (None, 0, False),
        (SinkMarker(3, "q1", OLD), 3, True),  # replay of the last batch
        (SinkMarker(3, "q1", OLD), 2, True),
        (SinkMarker(3, "q1", OLD), 4, False),
        (SinkMarker(3, "q0", OLD), 0, False),  # a reset checkpoint: new data
        (SinkMarker(3, None), 3, True),  # before markers named queries: the in-flight one
        (SinkMarker(5, None), 3, False),  # ... never a reset checkpoint's lower batch ids
        (SinkMarker(3, "q1", NEW), 3, False),  # another layout's partition of that number
    ],
)
def test_only_the_same_query_and_layout_skips(
    marker: SinkMarker | None, batch: int, skip: bool
) -> None:
    assert already_written(marker, "q1", batch, OLD) is skip


@pytest.mark.parametrize("raw", [b"7", SinkMarker(7, "q", OLD).encode()])
def test_markers_old_and_new_decode(raw: bytes) -> None:
    assert SinkMarker.decode(raw).batch == 7


def test_a_batch_in_flight_at_a_repartition_is_finished_in_its_old_layout() -> None:
    markers = [SinkMarker(5, "q", OLD), SinkMarker(4, "q", OLD)]
    assert started_layout(markers, "q", 5) == OLD
    assert started_layout(markers, "q", 6) is None, "later batches: the current layout"
    assert started_layout(markers, "other", 5) is None, "another query's batch 5"
