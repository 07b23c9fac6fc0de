"""The operator's watch for hanging transactions (control/hanging_watch.py) with its
looks at the broker replaced: which bound each topic gets, when a Pipeline's loop is
woken, and that following something else starts the timing over."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from onceflow.control.hanging_watch import (
    CLEANUP_MARGIN_S,
    Followed,
    HangingWatch,
    forgotten_after_s,
)
from onceflow.logic.hanging_transactions import PartitionEnds
from onceflow.logic.requeue import RequeuePolicy

KEY = ("team", "orders")


class FakeBroker:
    """Partition ends as a test sets them, and a broker limit of 900 s."""

    def __init__(self) -> None:
        self.ends: dict[str, tuple[int, int]] = {}

    def look(
        self, bootstrap: str, topics: Sequence[str], settings: Mapping[str, str]
    ) -> list[PartitionEnds]:
        return [PartitionEnds(t, 0, *self.ends[t]) for t in topics if t in self.ends]

    def limit(self, bootstrap: str, settings: Mapping[str, str]) -> float:
        return 900.0


def _watch(broker: FakeBroker, woken: list[tuple[str, str]]) -> HangingWatch:
    watch = HangingWatch(look=broker.look, broker_limit_s=broker.limit)
    watch.changed = lambda namespace, name: woken.append((namespace, name))
    return watch


FOLLOWED = Followed("kafka:9092", ("orders.counts",), ("payments.in",), (), writers_s=60.0)


def test_own_topics_are_bounded_by_the_writers_timeout_and_read_ones_by_the_brokers() -> None:
    broker, woken = FakeBroker(), []
    watch = _watch(broker, woken)
    broker.ends = {"orders.counts": (10, 20), "payments.in": (5, 9)}
    watch.follow(*KEY, FOLLOWED)
    watch._look_at(KEY, FOLLOWED)
    assert watch._bounds[KEY] == {
        "orders.counts": 60.0 + CLEANUP_MARGIN_S,
        "payments.in": 900.0 + CLEANUP_MARGIN_S,
    }
    # 120 s later both stood still: only the own topic is past its bound.
    watch._take(
        KEY,
        FOLLOWED,
        watch._bounds[KEY],
        broker.look("", ["orders.counts", "payments.in"], {}),
        now=watch._stalls[KEY][("orders.counts", 0)].since + 120,
    )
    (found,) = watch.follow(*KEY, FOLLOWED)
    assert (found.topic, found.bound_s) == ("orders.counts", 90.0)
    assert woken == [KEY]


def test_one_bound_for_every_topic_when_the_operator_sets_it() -> None:
    broker = FakeBroker()
    watch = _watch(broker, [])
    forced = Followed("kafka:9092", ("a",), ("b",), (), writers_s=None, override_s=5.0)
    watch.follow(*KEY, forced)
    watch._look_at(KEY, forced)
    assert watch._bounds[KEY] == {"a": 5.0, "b": 5.0}


def test_following_something_else_or_nothing_starts_over() -> None:
    broker, woken = FakeBroker(), []
    watch = _watch(broker, woken)
    broker.ends = {"orders.counts": (10, 20)}
    watch.follow(*KEY, FOLLOWED)
    watch._look_at(KEY, FOLLOWED)
    assert KEY in watch._stalls
    more = Followed("kafka:9092", ("orders.counts", "orders.out"), (), (), writers_s=60.0)
    watch.follow(*KEY, more)
    assert KEY not in watch._stalls and KEY not in watch._bounds
    watch.follow(*KEY, None)
    assert KEY not in watch._followed and watch.follow(*KEY, None) == []


def test_the_broker_is_not_asked_when_the_pipeline_writes_all_it_watches() -> None:
    asked: list[str] = []
    broker = FakeBroker()
    watch = HangingWatch(look=broker.look, broker_limit_s=lambda b, s: asked.append(b) or 900.0)
    own = Followed("kafka:9092", ("orders.counts",), (), (), writers_s=60.0)
    watch.follow(*KEY, own)
    watch._look_at(KEY, own)
    assert watch._bounds[KEY] == {"orders.counts": 60.0 + CLEANUP_MARGIN_S} and asked == []


def test_a_settled_pipeline_stays_watched_longer_than_its_longest_resync() -> None:
    """The resync budget stretches a settled Pipeline's resync up to 660 s: forgotten at
    a fixed 600 s, every settled Pipeline past 3,000 objects would lose its stall timing
    each cycle, and a hang bounded at 930 s would never be reported."""
    policy = RequeuePolicy()
    assert forgotten_after_s(policy) > policy.longest_resync_s
    assert forgotten_after_s(policy) == 990.0
    assert forgotten_after_s(RequeuePolicy(resync_s=60.0, max_resync_s=120.0)) == 600.0
