"""The test helper that says where Java's producer puts a key, against the murmur2
values Kafka's own utility tests publish."""

from __future__ import annotations

import pytest

from tests.support.kafka import java_partition


@pytest.mark.parametrize(
    ("key", "signed_hash"),
    [
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"", 275646681),
    ],
)
def test_java_partition_uses_kafkas_murmur2(key: bytes, signed_hash: int) -> None:
    partitions = 2**31 - 1
    assert java_partition(key, partitions) == (signed_hash & 0x7FFFFFFF) % partitions
