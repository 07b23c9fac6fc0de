"""A SparkJob's input reset as decisions: refused unless stopped (and for the files
sink, whose own log would skip a new checkpoint's batches), applied once the job is
held with its sink fenced, once per id, each on a checkpoint never used before; and
the driver's starting position for every partition."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic import ValidationError

from onceflow.api.driver import SparkJobSettings
from onceflow.api.handled_requests import REMEMBERED_IDS
from onceflow.api.input_reset import InputOffset, InputReset, InputResetResult, InputResetStatus
from onceflow.api.pipeline import WorkloadState
from onceflow.api.spark import Sink, Transform
from onceflow.logic.input_reset import input_reset_outcome, with_input_reset
from onceflow.logic.starting_position import (
    OffsetLogError,
    batch_end_offsets,
    starting_offsets,
    unknown_partitions,
)

STOPPED, RUNNING = WorkloadState.STOPPED, WorkloadState.RUNNING
KAFKA = Sink.model_validate({"kafka": {"topic": "out", "partitions": 2}})
FILES = Sink.model_validate({"files": {"path": "/out"}})
TOPICS = ["in"]


def reset(reset_id: str = "r1", **position: Any) -> InputReset:
    wire = {
        "id": reset_id,
        "acknowledgeReplays": True,
        **(position or {"startingOffsets": "earliest"}),
    }
    return InputReset.model_validate(wire)


def test_a_reset_names_one_position_and_must_be_acknowledged() -> None:
    with pytest.raises(ValidationError, match="exactly one of startingOffsets"):
        InputReset.model_validate(
            {"id": "r", "acknowledgeReplays": True, "startingOffsets": "earliest",
             "startingTimestamp": 5}
        )  # fmt: skip
    with pytest.raises(ValidationError, match="acknowledgeReplays: set it to true"):
        InputReset.model_validate({"id": "r", "startingOffsets": "latest"})


def test_a_reset_asked_of_a_running_job_is_refused_for_good() -> None:
    refused = input_reset_outcome(reset(), None, RUNNING, False, KAFKA, TOPICS)
    assert refused is not None and refused.result is InputResetResult.REFUSED
    assert "only while the job is stopped" in refused.message and refused.checkpoint is None
    assert input_reset_outcome(reset(), refused, STOPPED, True, KAFKA, TOPICS) is None, (
        "the same id is never applied later"
    )


def test_a_reset_waits_for_the_stop_to_be_fenced_then_applies_once() -> None:
    assert input_reset_outcome(reset(), None, STOPPED, False, KAFKA, TOPICS) is None
    applied = input_reset_outcome(reset(), None, STOPPED, True, KAFKA, TOPICS)
    assert applied is not None and applied.result is InputResetResult.APPLIED
    assert applied.checkpoint == "resets/1-r1"
    assert input_reset_outcome(reset(), applied, STOPPED, True, KAFKA, TOPICS) is None


def test_an_earlier_reset_brought_back_from_git_is_not_applied_again() -> None:
    """A manifest re-applied with the reset before the last one (a rollback in Argo
    CD) would have replayed the input a second time when only the last id was kept."""
    first = input_reset_outcome(reset("a"), None, STOPPED, True, KAFKA, TOPICS)
    second = input_reset_outcome(reset("b"), first, STOPPED, True, KAFKA, TOPICS)
    assert second is not None and second.earlier == ["a"]
    assert input_reset_outcome(reset("a"), second, STOPPED, True, KAFKA, TOPICS) is None
    round_trip = InputResetStatus.model_validate(json.loads(json.dumps(second.to_wire())))
    assert input_reset_outcome(reset("a"), round_trip, STOPPED, True, KAFKA, TOPICS) is None


def test_each_reset_gets_a_checkpoint_never_used_before_even_for_an_id_used_again() -> None:
    """Only the last REMEMBERED_IDS ids are kept: an id older than that is a new reset,
    and still gets a checkpoint of its own."""
    last = input_reset_outcome(reset("a"), None, STOPPED, True, KAFKA, TOPICS)
    for number in range(REMEMBERED_IDS + 1):
        last = input_reset_outcome(reset(f"r{number}"), last, STOPPED, True, KAFKA, TOPICS)
    assert last is not None and len(last.earlier) == REMEMBERED_IDS and "a" not in last.earlier
    again = input_reset_outcome(reset("a"), last, STOPPED, True, KAFKA, TOPICS)
    assert again is not None and again.checkpoint == f"resets/{REMEMBERED_IDS + 3}-a"


def test_a_refusal_keeps_the_reset_in_force() -> None:
    applied = input_reset_outcome(reset("a"), None, STOPPED, True, KAFKA, TOPICS)
    refused = input_reset_outcome(reset("b"), applied, RUNNING, False, KAFKA, TOPICS)
    assert refused is not None and refused.result is InputResetResult.REFUSED
    assert refused.in_force == reset("a") and refused.checkpoint == "resets/1-a"


@pytest.mark.parametrize(
    ("sink", "position", "says"),
    [
        (FILES, {}, "files sink keeps its own log"),
        (KAFKA, {"offsets": [{"topic": "other", "partition": 0, "offset": 1}]},
         "offsets[0].topic: other is not an input of the job (in)"),
    ],
)  # fmt: skip
def test_a_reset_that_cannot_work_is_refused_naming_why(
    sink: Sink, position: dict[str, Any], says: str
) -> None:
    refused = input_reset_outcome(reset(**position), None, STOPPED, True, sink, TOPICS)
    assert refused is not None and refused.result is InputResetResult.REFUSED
    assert says in refused.message


def _settings() -> SparkJobSettings:
    return SparkJobSettings(
        job="j",
        mode="enabled",
        bootstrap_servers="127.0.0.1:9",
        transactional_id_prefix="p",
        topics=TOPICS,
        transform=Transform(sql="SELECT 1"),
        sink=KAFKA,
        checkpoint_location="/cp/",
    )


def test_the_driver_runs_on_the_reset_checkpoint_from_its_position() -> None:
    assert with_input_reset(_settings(), None) == _settings()
    by_time = input_reset_outcome(
        reset("a", startingTimestamp=1700), None, STOPPED, True, KAFKA, TOPICS
    )
    settings = with_input_reset(_settings(), by_time)
    assert settings.checkpoint_location == "/cp/resets/1-a"
    assert settings.starting_timestamp == 1700
    offsets = [{"topic": "in", "partition": 1, "offset": 7}]
    by_offsets = input_reset_outcome(reset("b", offsets=offsets), by_time, STOPPED, True, KAFKA,
                                     TOPICS)  # fmt: skip
    settings = with_input_reset(_settings(), by_offsets)
    assert settings.checkpoint_location == "/cp/resets/2-b"
    assert settings.starting_partition_offsets == [InputOffset(topic="in", partition=1, offset=7)]
    assert settings.starting_timestamp is None


def test_a_reset_in_force_survives_the_status_round_trip() -> None:
    applied = input_reset_outcome(reset("a"), None, STOPPED, True, KAFKA, TOPICS)
    assert applied is not None
    assert InputResetStatus.model_validate(json.loads(json.dumps(applied.to_wire()))) == applied


def test_partitions_not_named_go_on_where_the_last_finished_batch_ended() -> None:
    log_entry = "\n".join(
        [
            "v1",
            json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {}}),
            json.dumps({"in": {"0": 40, "1": 41, "2": 42}, "other": {"0": 9}}),
        ]
    )
    resumed = batch_end_offsets(log_entry, TOPICS, "offsets/7")
    assert resumed == {"in": {0: 40, 1: 41, 2: 42}}
    given = [InputOffset(topic="in", partition=1, offset=7)]
    chosen = json.loads(starting_offsets({"in": [0, 1, 2, 3]}, given, resumed, "earliest"))
    assert chosen == {"in": {"0": 40, "1": 7, "2": 42, "3": -2}}, "3 is new: from its start"
    assert json.loads(starting_offsets({"in": [0]}, [], {}, "latest")) == {"in": {"0": -1}}


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("", "not a Spark offset log entry"),
        ('v1\n{}\n{"other": {"0": 1}}', "no offsets of in (format v1)"),
    ],
)
def test_an_offset_log_entry_read_wrong_is_refused_not_guessed(entry: str, says: str) -> None:
    with pytest.raises(OffsetLogError, match=re.escape(says)):
        batch_end_offsets(entry, TOPICS, "offsets/3")


def test_a_newer_offset_log_naming_its_sources_is_read() -> None:
    entry = 'v2\n{}\nkafka:{"in": {"0": 5}}'
    assert batch_end_offsets(entry, TOPICS, "offsets/3") == {"in": {0: 5}}


def test_offsets_of_partitions_the_topic_lacks_are_named() -> None:
    given = [
        InputOffset(topic="in", partition=0, offset=1),
        InputOffset(topic="in", partition=5, offset=1),
    ]
    assert unknown_partitions({"in": [0, 1]}, given) == [
        "spec.inputReset.offsets[1]: in has no partition 5"
    ]
