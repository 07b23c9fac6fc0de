"""The sink identity a checkpoint records, through Hadoop's file system as a driver
reads and writes it (spark/checkpoint_identity.py): who may have left a batch in
flight, across renames, torn records and the records kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from onceflow.logic.sink_identity import SinkIdentity
from onceflow.spark.checkpoint_identity import KEPT, RECORDS, CheckpointIdentity

FIRST = SinkIdentity("shop", "copier", "shop-eos", 2)
RENAMED = SinkIdentity("shop", "copier-v2", "shop-eos", 2)


def _records(checkpoint: Path) -> list[str]:
    return sorted(p.name for p in (checkpoint / RECORDS).iterdir() if p.name.isdigit())


def test_a_rename_finds_the_earlier_name_until_the_new_one_is_claimed(
    spark: Any, tmp_path: Path
) -> None:
    checkpoint = str(tmp_path)
    fresh = CheckpointIdentity(spark, checkpoint, FIRST)
    assert fresh.in_flight is None, "a new checkpoint has nothing in flight"
    fresh.claim()
    fresh.claim()  # once per driver
    assert _records(tmp_path) == ["0"]
    assert CheckpointIdentity(spark, checkpoint, FIRST).in_flight is None

    renamed = CheckpointIdentity(spark, checkpoint, RENAMED, told_previous_prefix="other")
    assert renamed.in_flight == FIRST, "the record wins over what the supervisor told"
    # A driver that dies before claiming leaves the earlier name in force.
    assert CheckpointIdentity(spark, checkpoint, RENAMED).in_flight == FIRST
    renamed.claim()
    assert CheckpointIdentity(spark, checkpoint, RENAMED).in_flight is None
    CheckpointIdentity(spark, checkpoint, FIRST).claim()
    CheckpointIdentity(spark, checkpoint, RENAMED).claim()
    assert len(_records(tmp_path)) == KEPT, "older records are removed"


def test_a_torn_record_falls_back_to_the_one_before_or_to_none(spark: Any, tmp_path: Path) -> None:
    checkpoint = str(tmp_path)
    (tmp_path / RECORDS).mkdir()
    (tmp_path / RECORDS / "0").write_bytes(b'{"namespace": "sh')  # died writing its first
    assert CheckpointIdentity(spark, checkpoint, RENAMED).in_flight is None
    CheckpointIdentity(spark, checkpoint, FIRST).claim()
    (tmp_path / RECORDS / "2").write_bytes(b"")  # and a later one
    assert CheckpointIdentity(spark, checkpoint, RENAMED).in_flight == FIRST
