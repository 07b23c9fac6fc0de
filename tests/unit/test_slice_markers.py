"""The Postgres sink's replay rules: a batch is written in the layout recorded for it
(so one in flight at a `parallelism` or `key` change is finished as it started), and
markers from before markers named their query are taken as a query's own only for the
one batch the old format can identify, then retired."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onceflow.logic.slice_markers import (
    LayoutUnavailableError,
    LegacyAdoption,
    LegacyMarkers,
    SliceLayout,
    adopt_legacy_markers,
    layout_to_write,
)

COLUMNS = ("id", "n", "note")


@pytest.mark.parametrize(
    ("slices", "key", "layout"),
    [
        (4, ("id",), SliceLayout(4, ("id",))),  # an upsert splits by its key
        (2, ("n", "id"), SliceLayout(2, ("n", "id"))),  # ... in the key's order
        (8, (), SliceLayout(8, COLUMNS)),  # an append by the whole row
    ],
)
def test_the_layout_asked_for_splits_by_the_key_or_the_whole_row(
    slices: int, key: tuple[str, ...], layout: SliceLayout
) -> None:
    assert SliceLayout.of_sink(slices, key, COLUMNS) == layout


WANTED = SliceLayout(2, ("id",))


@pytest.mark.parametrize(
    "recorded",
    [
        WANTED,  # recorded by this driver a moment ago: a new batch, or an unchanged job
        SliceLayout(4, ("id",)),  # in flight at a parallelism change: its old slices
        SliceLayout(8, COLUMNS),  # in flight at a key change (append -> upsert)
        SliceLayout(4, ("note", "id")),  # columns the output still has, in any order
    ],
)
def test_a_batch_is_written_in_the_layout_recorded_for_it(recorded: SliceLayout) -> None:
    assert layout_to_write(recorded, 7, COLUMNS, WANTED) == recorded


def test_a_batch_started_by_columns_the_output_lost_is_refused_by_name() -> None:
    """Its committed slices' rows cannot be told apart from the rest: writing it in
    any layout would lose or duplicate rows, so the driver stops and says why."""
    recorded = SliceLayout(4, ("id", "gone"))
    with pytest.raises(LayoutUnavailableError) as refused:
        layout_to_write(recorded, 7, COLUMNS, WANTED)
    message = str(refused.value)
    assert "batch 7" in message
    assert "4 slices by (id, gone)" in message
    assert "'gone'" in message
    assert "Restore those columns" in message


Q = "q-new"


@pytest.mark.parametrize(
    ("found", "batch", "adoption"),
    [
        # No bare markers (left): nothing to do, nothing to scan.
        (LegacyMarkers(None, named_elsewhere=False), 0, LegacyAdoption(None, retire=False)),
        (LegacyMarkers(None, named_elsewhere=True), 3, LegacyAdoption(None, retire=False)),
        # The upgraded query replays the batch the old format left in flight: kept.
        (LegacyMarkers(3, named_elsewhere=False), 3, LegacyAdoption(3, retire=True)),
        # The upgraded query's first batch is the next one (the last was recorded), or a
        # checkpoint reset with the upgrade starts at 0: retired, never matched later.
        (LegacyMarkers(3, named_elsewhere=False), 4, LegacyAdoption(None, retire=True)),
        (LegacyMarkers(3, named_elsewhere=False), 0, LegacyAdoption(None, retire=True)),
        # Markers naming a query exist: the upgrade is behind the job, so a reset
        # checkpoint's batch 3 is new data, not the bare batch 3 (the LOSS of eos-review 4).
        (LegacyMarkers(3, named_elsewhere=True), 3, LegacyAdoption(None, retire=True)),
        (LegacyMarkers(57, named_elsewhere=True), 57, LegacyAdoption(None, retire=True)),
    ],
)
def test_bare_markers_are_adopted_only_for_the_batch_in_flight_and_always_retired(
    found: LegacyMarkers, batch: int, adoption: LegacyAdoption
) -> None:
    assert adopt_legacy_markers(found, Q, batch) == adoption


@given(
    last=st.none() | st.integers(min_value=0, max_value=10**6),
    named_elsewhere=st.booleans(),
    batch=st.integers(min_value=0, max_value=10**6),
)
def test_bare_markers_never_outlive_a_first_batch_nor_stand_for_another_batch(
    last: int | None, named_elsewhere: bool, batch: int
) -> None:
    adoption = adopt_legacy_markers(LegacyMarkers(last, named_elsewhere), Q, batch)
    assert adoption.retire is (last is not None)
    if adoption.adopt_batch is not None:
        assert adoption.adopt_batch == batch == last
        assert not named_elsewhere


def test_a_reset_made_with_the_upgrade_after_one_old_batch_is_taken_for_its_replay() -> None:
    """The one case the bare format cannot tell apart (module docstring): a checkpoint
    reset together with the upgrade when the old query's last batch was 0."""
    assert adopt_legacy_markers(LegacyMarkers(0, named_elsewhere=False), Q, 0).adopt_batch == 0
