"""Carrying offsets to a renamed offsets topic finishes only when every record landed:
a delivery the broker refused is not "carried" (flush() does not count it), and the
error names the topic and the broker's answer. The real broker's refusal is in
tests/integration/test_source_runtime.py."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from onceflow.eos.offsets import OffsetsCarryError, carry_failure

TOO_LARGE = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
NOT_ALLOWED = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)


@pytest.mark.parametrize(
    ("refused", "unsent", "failure", "words"),
    [
        ([], 0, None, []),
        ([TOO_LARGE], 0, OffsetsCarryError, ["1 of 3", "MSG_SIZE_TOO_LARGE", "too large"]),
        (
            [NOT_ALLOWED, NOT_ALLOWED],
            0,
            OffsetsCarryError,
            ["2 of 3", "TOPIC_AUTHORIZATION_FAILED", "WRITE ACL"],
        ),
        # A refusal wins over what is still queued: waiting longer would not help.
        ([NOT_ALLOWED], 2, OffsetsCarryError, ["TOPIC_AUTHORIZATION_FAILED"]),
        ([], 2, TimeoutError, ["did not finish in 30 s", "2 of 3"]),
    ],
)
def test_a_copy_counts_as_carried_only_when_every_record_landed(
    refused: list[KafkaError],
    unsent: int,
    failure: type[Exception] | None,
    words: list[str],
) -> None:
    found = carry_failure("orders-offsets-v2", 3, refused, unsent)
    if failure is None:
        assert found is None
        return
    assert type(found) is failure
    assert "'orders-offsets-v2'" in str(found)
    for word in words:
        assert word in str(found)


def test_a_refused_copy_is_not_taken_for_a_passing_network_blip() -> None:
    """The operator retries an OSError quietly (control/failures.describe_failure) and
    reports anything else as Degraded: a refusal must be the second kind."""
    found = carry_failure("t", 1, [NOT_ALLOWED], 0)
    assert not isinstance(found, OSError)
    assert isinstance(carry_failure("t", 1, [], 1), OSError)
