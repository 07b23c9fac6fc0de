"""Reading a topic's end offsets against the real broker while its partitions are not
all answerable: the callers (the Spark sink's marker read, audits waiting for a sink's
first batch) tell "not there yet" from a failure by LookupError."""

from __future__ import annotations

import time

import pytest

from onceflow.eos.consume import end_offsets
from tests.support.kafka import new_topic

pytestmark = pytest.mark.kafka


def test_a_partition_that_never_answers_is_a_lookup_error_naming_it(kafka_bootstrap: str) -> None:
    topic = new_topic(kafka_bootstrap, "ends", partitions=2)
    started = time.monotonic()
    with pytest.raises(LookupError, match=r"partitions not ready after 2s \(5: "):
        end_offsets(kafka_bootstrap, topic, timeout_s=2, partitions=[0, 5])
    assert time.monotonic() - started >= 2, "asked again until the timeout"


def test_answerable_partitions_are_read(kafka_bootstrap: str) -> None:
    topic = new_topic(kafka_bootstrap, "ends", partitions=3)
    assert end_offsets(kafka_bootstrap, topic) == {0: 0, 1: 0, 2: 0}
