"""Output partitioning matches Kafka's default partitioner bit for bit."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onceflow.logic.partitioning import murmur2, partition_for

# Printed by org.apache.kafka.common.utils.Utils.murmur2 from kafka-clients 4.1.1.
KAFKA_VECTORS = {
    "s0": -2024570260,
    "s1": 322709757,
    "abc": 479470107,
    "21": -973932308,
    "": 275646681,
    "hello-world-key": -132601508,
    "x": 2121525046,
}


@pytest.mark.parametrize(("key", "expected"), sorted(KAFKA_VECTORS.items()))
def test_murmur2_matches_kafka(key: str, expected: int) -> None:
    assert murmur2(key.encode()) == expected


@given(key=st.binary(max_size=64), partitions=st.integers(1, 1000))
def test_partition_is_in_range_and_stable(key: bytes, partitions: int) -> None:
    chosen = partition_for(key, partitions)
    assert 0 <= chosen < partitions
    assert chosen == partition_for(bytes(key), partitions)
