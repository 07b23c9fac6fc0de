"""The replay rule: a batch is skipped only when its own query committed it."""

from __future__ import annotations

import pytest

from onceflow.logic.sink_markers import SinkMarker, already_written


@pytest.mark.parametrize(
    ("marker", "batch", "skip"),
    [
        (None, 0, False),
        (SinkMarker(batch=3, query="q1"), 3, True),  # replay of the last batch
        (SinkMarker(batch=3, query="q1"), 2, True),
        (SinkMarker(batch=3, query="q1"), 4, False),
        (SinkMarker(batch=3, query="q0"), 0, False),  # a reset checkpoint: new data
        (SinkMarker(batch=3, query=None), 3, True),  # written before markers named queries
    ],
)
def test_only_the_same_query_skips(marker: SinkMarker | None, batch: int, skip: bool) -> None:
    assert already_written(marker, "q1", batch) is skip


@pytest.mark.parametrize("raw", [b"7", SinkMarker(batch=7, query="q").encode()])
def test_markers_old_and_new_decode(raw: bytes) -> None:
    assert SinkMarker.decode(raw).batch == 7
