"""The audit finds every kind of exactly-once violation, and nothing else."""

from __future__ import annotations

import pytest

from onceflow.logic.audit import audit_sequences


@pytest.mark.parametrize(
    ("sequence", "expect", "duplicates", "order", "missing"),
    [
        ([1, 2, 3], None, 0, 0, ()),
        ([1, 2, 3], 3, 0, 0, ()),
        ([1, 2, 3], 5, 0, 0, ((4, 5),)),
        ([1, 2, 2, 3], None, 1, 0, ()),
        ([1, 3, 2], None, 0, 1, ()),
        ([1, 4], None, 0, 0, ((2, 3),)),
        ([2, 3], None, 0, 0, ((1, 1),)),
        ([1, 2, 3, 2, 3, 4], None, 2, 0, ()),  # at-least-once replay
        ([], 2, 0, 0, ((1, 2),)),
    ],
)
def test_key_audit_counts_each_violation(
    sequence: list[int],
    expect: int | None,
    duplicates: int,
    order: int,
    missing: tuple[tuple[int, int], ...],
) -> None:
    report = audit_sequences([("k", n) for n in sequence], expect=expect, expected_keys=["k"])
    (key,) = report.keys
    assert (key.duplicates, key.order_violations, key.missing) == (duplicates, order, missing)
    assert report.ok == (not duplicates and not order and not missing)


def test_expected_key_never_seen_is_reported_missing() -> None:
    report = audit_sequences([("a", 1)], expect=1, expected_keys=["a", "b"])
    assert not report.ok
    assert report.missing == 1
    assert [k.key for k in report.keys] == ["a", "b"]


def test_unparsable_values_fail_the_audit() -> None:
    assert not audit_sequences([("a", 1)], unparsable=1).ok


def test_an_empty_topic_never_passes_an_audit_that_expects_records() -> None:
    report = audit_sequences([], expect=100)
    assert not report.ok
    assert report.key_problem is not None and "no records" in report.key_problem


@pytest.mark.parametrize(("keys", "ok"), [(["a", "b"], True), (["a"], False), ([], False)])
def test_key_count_must_match_the_keys_seen(keys: list[str], ok: bool) -> None:
    report = audit_sequences([(k, 1) for k in keys], expect=1, key_count=2)
    assert report.ok is ok


def test_duplicates_are_reported_as_the_ranges_written_twice() -> None:
    report = audit_sequences([("k", n) for n in [1, 2, 3, 4, 2, 3, 4, 5, 9, 9]], expect=9)
    (key,) = report.keys
    assert key.duplicated == ((2, 4), (9, 9))
    assert key.duplicates == 4
