"""Offsets a user asks to set, as each connector checks them (KIP-875's alterOffsets):
the shapes `onceflow offsets list` prints are taken, anything else is refused with the
entry's index and the shape that would do, and one refusal refuses the whole change."""

from __future__ import annotations

import re
from typing import Any

import pytest

from onceflow.api.connector import OffsetRefusedError, SourceConnector
from onceflow.api.source import OffsetsChangeResult, OffsetsChangeStatus
from onceflow.connectors.files import FilesConnector
from onceflow.connectors.kafka_mirror import KafkaMirrorConnector
from onceflow.connectors.sequence import SequenceConnector
from onceflow.logic.generations import OffsetsOutcome
from onceflow.logic.offsets_change import applied, checked
from onceflow.model.tasks import OffsetsRequest

MIRROR = {"bootstrapServers": "127.0.0.1:9", "topics": ["orders"]}
FILES = {"paths": ["/data/*.log"]}
FIXED = {"paths": ["/data/*.bin"], "format": "fixed", "recordBytes": 8}
AT = {"cluster": "c1", "topic": "orders", "partition": 0}


@pytest.mark.parametrize(
    ("connector", "config", "partition", "offset", "stored"),
    [
        (SequenceConnector(), {"streams": 3}, {"stream": "s2"}, {"seq": 100}, {"seq": 100}),
        (SequenceConnector(), {"streams": 3}, {"stream": "s0"}, {"seq": 0}, {"seq": 0}),
        (KafkaMirrorConnector(), MIRROR, AT, {"offset": 7}, {"offset": 7}),
        (KafkaMirrorConnector(), MIRROR, AT, {"timestamp": 1700000000000},
         {"timestamp": 1700000000000}),
        (FilesConnector(), FILES, {"file": "/data/a.log"}, {"position": 120}, {"position": 120}),
        (FilesConnector(), FIXED, {"file": "/data/a.bin"}, {"position": 64}, {"position": 64}),
        # Edited from `offsets list`: the identity of the old position goes.
        (FilesConnector(), FILES, {"file": "/data/a.log"},
         {"position": 7, "inode": 5, "tail": 1, "tailBytes": 9}, {"position": 7}),
    ],
)  # fmt: skip
def test_offsets_in_the_listed_shape_are_taken(
    connector: SourceConnector,
    config: dict[str, Any],
    partition: dict[str, Any],
    offset: dict[str, Any],
    stored: dict[str, Any],
) -> None:
    assert connector.alter_offset(config, partition, offset) == stored


@pytest.mark.parametrize(
    ("connector", "config", "partition", "offset", "says"),
    [
        (SequenceConnector(), {"streams": 3}, {"stream": "s3"}, {"seq": 1}, "below streams"),
        (SequenceConnector(), {"streams": 3}, {"stream": "s0"}, {"seq": -1}, "n >= 0"),
        (SequenceConnector(), {"streams": 3}, {"stream": "s0"}, {"position": 1}, "{seq: n}"),
        (KafkaMirrorConnector(), MIRROR, {**AT, "topic": "other"}, {"offset": 1}, "config.topics"),
        (KafkaMirrorConnector(), MIRROR, AT, {"offset": 1, "timestamp": 2}, "either"),
        (KafkaMirrorConnector(), MIRROR, AT, {"offset": "1"}, "either"),
        (FilesConnector(), FILES, {"file": "a.log"}, {"position": 1}, "/absolute/path"),
        (FilesConnector(), FILES, {"file": "/data/a.txt"}, {"position": 1}, "none of config.paths"),
        (FilesConnector(), FILES, {"file": "/data/x/a.log"}, {"position": 1}, "none of config"),
        (FilesConnector(), FIXED, {"file": "/data/a.bin"}, {"position": 12}, "multiple of"),
    ],
)
def test_anything_else_is_refused_with_the_shape_that_would_do(
    connector: SourceConnector,
    config: dict[str, Any],
    partition: dict[str, Any],
    offset: dict[str, Any],
    says: str,
) -> None:
    with pytest.raises(OffsetRefusedError, match=re.escape(says)):
        connector.alter_offset(config, partition, offset)


def test_one_refused_entry_refuses_the_change_and_names_its_index() -> None:
    request = OffsetsRequest(
        "c1",
        False,
        (({"stream": "s0"}, {"seq": 5}), ({"stream": "s1"}, None), ({"stream": "s9"}, {"seq": 1})),
    )
    outcome = checked(SequenceConnector(), {"streams": 3}, request)
    assert outcome.result is OffsetsChangeResult.REFUSED and not outcome.writing
    assert outcome.message.startswith("spec.offsetsChange.offsets[2]: partition {'stream': 's9'}")
    assert outcome.message.endswith("nothing was written")


def test_forgetting_needs_no_connector_and_every_entry_is_kept_in_order() -> None:
    request = OffsetsRequest("c1", True, (({"stream": "s1"}, None), ({"stream": "s0"}, {"seq": 3})))
    applying = checked(SequenceConnector(), {"streams": 2}, request)
    assert applying.result is OffsetsChangeResult.APPLYING and applying.reset
    assert applying.writing == (({"stream": "s1"}, None), ({"stream": "s0"}, {"seq": 3}))
    done = applied(applying, 2)
    assert done.result is OffsetsChangeResult.APPLIED and done.partitions == 2 and not done.writing
    assert "every stored offset forgotten" in done.message


def test_a_change_being_applied_survives_the_status_round_trip() -> None:
    """The record is the status on a cluster: an operator that restarts reads back the
    very offsets it was writing."""
    request = OffsetsRequest("c1", True, (({"stream": "s1"}, None), ({"stream": "s0"}, {"seq": 3})))
    applying = checked(SequenceConnector(), {"streams": 2}, request)
    wire = OffsetsChangeStatus.model_validate(applying.to_json()).to_wire()
    assert OffsetsOutcome.from_json(wire) == applying


def test_a_connector_that_says_nothing_refuses_to_set_offsets_but_forgets_them() -> None:
    class Silent(SequenceConnector):
        alter_offset = SourceConnector.alter_offset

    refused = checked(Silent(), {}, OffsetsRequest("c", False, (({"k": 1}, {"o": 1}),)))
    assert refused.result is OffsetsChangeResult.REFUSED and "forgetting them" in refused.message
    forgotten = checked(Silent(), {}, OffsetsRequest("c", False, (({"k": 1}, None),)))
    assert forgotten.writing == (({"k": 1}, None),)
