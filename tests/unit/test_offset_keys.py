"""Remembered offset keys are the keys ``offset_key`` computes, partition by partition."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from onceflow.eos import offsets
from onceflow.eos.offsets import OffsetKeys, offset_key

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.sampled_from([0.0, 1.0, -1.0]),
    st.text(max_size=3),
)
PARTITIONS = st.dictionaries(st.sampled_from(["a", "b", "stream"]), SCALARS, max_size=3)


@settings(deadline=None)  # timing is not what these check; CI machines are loaded
@given(st.lists(PARTITIONS, max_size=40))
def test_every_key_equals_the_computed_one_even_when_values_compare_equal(
    partitions: list[dict[str, Any]],
) -> None:
    # 1, True and 1.0 are equal dict values but different JSON: a cache keyed on
    # equality would store one partition's offsets under another's key.
    keys = OffsetKeys("ns/src")
    for partition in partitions:
        assert keys.of(partition) == offset_key("ns/src", partition)


class _Partition(Mapping[str, Any]):
    """A mapping that is not a dict: its repr says nothing about its contents."""

    def __init__(self, **items: Any) -> None:
        self.items_ = items

    def __getitem__(self, key: str) -> Any:
        return self.items_[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.items_)

    def __len__(self) -> int:
        return len(self.items_)


def test_other_mappings_and_a_full_memory_still_get_their_own_keys(monkeypatch: Any) -> None:
    monkeypatch.setattr(offsets, "OFFSET_KEYS_REMEMBERED", 2)
    keys = OffsetKeys("o")
    for n in range(5):
        assert keys.of({"n": n}) == offset_key("o", {"n": n})
        assert keys.of(_Partition(n=n)) == offset_key("o", {"n": n})
    assert keys.of({"n": 0}) == offset_key("o", {"n": 0})
