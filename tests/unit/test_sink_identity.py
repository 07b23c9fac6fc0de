"""Which identity a batch left in flight in a checkpoint may have been written under."""

from __future__ import annotations

import pytest

from onceflow.logic.sink_identity import SinkIdentity, SinkIdentityError, identity_in_flight

CURRENT = SinkIdentity("shop", "copier", "shop-eos", 3)


def test_a_checkpoint_written_by_this_sink_has_nothing_in_flight_elsewhere() -> None:
    repartitioned = SinkIdentity("shop", "copier", "shop-eos", 2)
    assert identity_in_flight(repartitioned, CURRENT, None) is None, "a layout, not a rename"
    assert identity_in_flight(CURRENT, CURRENT, "told-but-older") is None


@pytest.mark.parametrize(
    "earlier",
    [
        SinkIdentity("shop", "copier-old", "shop-eos", 3),  # renamed (a new object)
        SinkIdentity("shop", "copier", "other-pipeline", 3),  # moved to another Pipeline
        SinkIdentity("staging", "copier", "shop-eos", 3),  # moved to another namespace
    ],
)
def test_the_checkpoints_record_names_where_a_batch_in_flight_went(
    earlier: SinkIdentity,
) -> None:
    assert identity_in_flight(earlier, CURRENT, None) == earlier
    assert identity_in_flight(earlier, CURRENT, "what-the-supervisor-saw") == earlier, (
        "the record is what wrote"
    )


def test_a_checkpoint_without_a_record_falls_back_to_the_prefix_the_supervisor_told() -> None:
    assert identity_in_flight(None, CURRENT, None) is None
    assert identity_in_flight(None, CURRENT, CURRENT.prefix) is None
    told = identity_in_flight(None, CURRENT, "old-eos")
    assert told == SinkIdentity("shop", "copier", "old-eos", 3)


def test_a_record_reads_back_and_a_torn_one_is_refused_naming_it() -> None:
    assert SinkIdentity.decode(CURRENT.encode(), "x") == CURRENT
    with pytest.raises(SinkIdentityError, match="ckpt/onceflow-sink/4 does not name"):
        SinkIdentity.decode(b'{"namespace": "shop", "job"', "ckpt/onceflow-sink/4")
