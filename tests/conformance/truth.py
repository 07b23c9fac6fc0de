"""Comparisons of what a connector delivered with what its source system holds: the
building blocks of a subject's audit, for the two shapes most sources have."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from onceflow.logic.audit import AuditReport, KeyAudit
from tests.conformance.source_kit import KitAudit

Record = TypeVar("Record")

SHOWN_CHARS = 120


def in_order_audit(
    delivered: Mapping[str, Sequence[Record]],
    truth: Mapping[str, Sequence[Record]],
    show: Callable[[Record], str] = repr,
) -> KitAudit:
    """For sources that keep an order per key (a file's lines, a partition's records, a
    table's ids): each key's delivered records must be the start of what the source
    holds for it, each once, in the source's order. A record that is not the source's
    at its place is a problem, named by its kind; fewer records than the source holds
    are behind. ``truth`` must be read after ``delivered``, so that it holds
    everything delivered."""
    problems: list[str] = []
    behind: list[str] = []
    for key in sorted(set(delivered) | set(truth)):
        got, held = delivered.get(key, ()), truth.get(key, ())
        problem = _first_wrong(key, got, held, show)
        if problem is not None:
            problems.append(problem)
        elif len(got) < len(held):
            behind.append(f"{key}: {len(got)} of the source's {len(held)} delivered")
    return KitAudit(
        records=sum(len(records) for records in delivered.values()),
        problems=problems,
        behind=behind,
    )


def _first_wrong(
    key: str, got: Sequence[Record], held: Sequence[Record], show: Callable[[Record], str]
) -> str | None:
    """The first delivered record that is not the source's at its place, and why; only
    the first, as every later one is off by the same step."""
    for index, record in enumerate(got):
        if index < len(held) and record == held[index]:
            continue
        where = f"{key}: delivered record {index + 1} is {show(record)[:SHOWN_CHARS]}"
        if record in got[:index]:
            return f"{where}, delivered before (a duplicate)"
        if record in held[index + 1 :]:
            place = held.index(record, index + 1)
            return (
                f"{where}, the source's record {place + 1}: {place - index} record(s) "
                "before it lost or reordered"
            )
        return f"{where}, which the source does not hold"
    return None


def sequence_audit(report: AuditReport, limit: int) -> KitAudit:
    """For sources of numbered streams (``{"stream": ..., "seq": n}``, n from 1 up),
    from the product's own audit run without an expected end (``audit_sequences`` with
    its ``expected_keys``): a number missing below the highest delivered is lost, as a
    stream is delivered in order; a stream short of ``limit`` is behind."""
    problems: list[str] = []
    if report.unparsable:
        problems.append(f"{report.unparsable} record(s) without a stream and seq")
    if report.key_problem is not None:
        problems.append(report.key_problem)
    problems += [problem for key in report.keys for problem in _stream_problems(key, limit)]
    behind = [
        f"{key.key}: delivered up to {key.highest} of {limit}"
        for key in report.keys
        if key.highest < limit
    ]
    return KitAudit(records=report.records, problems=problems, behind=behind)


def _stream_problems(key: KeyAudit, limit: int) -> list[str]:
    problems: list[str] = []
    if key.highest > limit:
        problems.append(f"{key.key}: {key.highest} delivered, the source ends at {limit}")
    if key.duplicates:
        problems.append(f"{key.key}: {key.duplicates} duplicate(s) in {key.duplicated[:5]}")
    if key.order_violations:
        problems.append(f"{key.key}: {key.order_violations} record(s) out of order")
    if key.missing:
        problems.append(f"{key.key}: lost {key.missing[:5]} below {key.highest}")
    return problems
