"""Exactly-once audit of a keyed sequence: duplicates, gaps and order per key.

The Debezium exactly-once test's check (seed 004), as a pure function: feed it
``(key, seq)`` pairs in the order a ``read_committed`` consumer saw them. Every key
must read 1..N once each, increasing.

A verifier must not pass what it cannot see: a report that expects a number per key
also knows which keys (or how many) must exist, so an empty topic or a stream that
never delivered anything fails instead of passing vacuously.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class KeyAudit:
    key: str
    count: int
    distinct: int
    duplicates: int
    order_violations: int
    missing: tuple[tuple[int, int], ...]
    """Inclusive ranges of numbers never seen between 1 and the expected end."""
    highest: int
    duplicated: tuple[tuple[int, int], ...] = ()
    """Inclusive ranges of numbers seen more than once: where they lie tells which
    fault (a restart, a generation change) wrote them twice."""

    @property
    def missing_count(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.missing)

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.order_violations or self.missing)


@dataclass(frozen=True)
class AuditReport:
    keys: tuple[KeyAudit, ...]
    expect: int | None
    unparsable: int
    key_count: int | None = None
    """How many keys must exist; None when only the named keys are required."""

    @property
    def key_problem(self) -> str | None:
        """Why the set of keys is wrong, or None when it is what was expected."""
        if self.key_count is not None and len(self.keys) != self.key_count:
            return f"expected {self.key_count} keys, found {len(self.keys)}"
        if self.expect is not None and not self.keys:
            return "no records: an empty topic cannot pass an audit that expects records"
        return None

    @property
    def ok(self) -> bool:
        return self.unparsable == 0 and self.key_problem is None and all(k.ok for k in self.keys)

    @property
    def records(self) -> int:
        return sum(k.count for k in self.keys)

    @property
    def duplicates(self) -> int:
        return sum(k.duplicates for k in self.keys)

    @property
    def missing(self) -> int:
        return sum(k.missing_count for k in self.keys)

    @property
    def order_violations(self) -> int:
        return sum(k.order_violations for k in self.keys)


def _ranges(numbers: list[int]) -> tuple[tuple[int, int], ...]:
    ranges: list[tuple[int, int]] = []
    for n in numbers:
        if ranges and ranges[-1][1] == n - 1:
            ranges[-1] = (ranges[-1][0], n)
        else:
            ranges.append((n, n))
    return tuple(ranges)


def audit_key(key: str, sequence: list[int], expect: int | None) -> KeyAudit:
    seen: set[int] = set()
    repeated: set[int] = set()
    duplicates = order_violations = 0
    highest = 0
    for seq in sequence:
        if seq in seen:
            duplicates += 1
            repeated.add(seq)
            continue
        if seq < highest:
            order_violations += 1
        seen.add(seq)
        highest = max(highest, seq)
    end = expect if expect is not None else highest
    missing = sorted(set(range(1, end + 1)) - seen)
    return KeyAudit(
        key=key,
        count=len(sequence),
        distinct=len(seen),
        duplicates=duplicates,
        order_violations=order_violations,
        missing=_ranges(missing),
        highest=highest,
        duplicated=_ranges(sorted(repeated)),
    )


def audit_sequences(
    pairs: Iterable[tuple[str, int]],
    *,
    expect: int | None = None,
    expected_keys: Iterable[str] = (),
    key_count: int | None = None,
    unparsable: int = 0,
) -> AuditReport:
    """Audits every key seen, plus ``expected_keys`` (a key never seen is all gap);
    with ``key_count`` the number of distinct keys must match it too."""
    by_key: dict[str, list[int]] = {key: [] for key in expected_keys}
    for key, seq in pairs:
        by_key.setdefault(key, []).append(seq)
    return AuditReport(
        keys=tuple(audit_key(k, by_key[k], expect) for k in sorted(by_key)),
        expect=expect,
        unparsable=unparsable,
        key_count=key_count,
    )
