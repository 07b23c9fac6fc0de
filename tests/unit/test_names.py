"""One transactional-id scheme for every producer: two different producers never get
the same id, whatever dashes their names and prefixes hold."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from onceflow.model.names import SINK_PARTITION, SOURCE_TASK, producer_id

# Kubernetes object names (DNS labels: dashes, dots, no slashes); any prefix text.
names = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,12}[a-z0-9])?", fullmatch=True)
prefixes = st.text(min_size=1, max_size=12)
producers = st.tuples(
    prefixes, st.sampled_from([SOURCE_TASK, SINK_PARTITION]), names, st.integers(0, 99)
)


@given(producers, producers)
def test_different_producers_get_different_ids(
    a: tuple[str, str, str, int], b: tuple[str, str, str, int]
) -> None:
    if a != b:
        assert producer_id(*a) != producer_id(*b)


def test_the_lookalikes_that_once_collided_do_not() -> None:
    assert producer_id("ns.p", SOURCE_TASK, "x-sink", 0) != producer_id(
        "ns.p", SINK_PARTITION, "x", 0
    )
    assert producer_id("ns.p", SOURCE_TASK, "a-b", 0) != producer_id("ns.p-a", SOURCE_TASK, "b", 0)
