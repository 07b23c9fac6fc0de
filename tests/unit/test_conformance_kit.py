"""The source conformance kit's own logic, without a service: its fault schedule, the
fault evidence it demands (each check can fail), its comparisons with a source's
truth, and its sizes. The runs themselves are tests/conformance."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from onceflow.logic.audit import audit_sequences
from tests.conformance.source_kit import (
    GENERATION_CHANGE,
    KILL_ALL,
    KILL_ONE,
    FaultEvent,
    KitAudit,
    KitReport,
    KitSize,
    fault_evidence_problems,
    fault_schedule,
)
from tests.conformance.truth import in_order_audit, sequence_audit


@pytest.mark.parametrize("faults", [4, 10, 31])
@pytest.mark.parametrize("own", [[], ["terminate"], ["terminate", "restart"]])
def test_the_schedule_mixes_every_fault_with_the_generation_change_halfway(
    faults: int, own: list[str]
) -> None:
    steps = fault_schedule(faults, own, random.Random(1))
    assert len(steps) == faults + 1
    assert steps.index(GENERATION_CHANGE) == faults // 2
    assert steps.count(KILL_ALL) >= 1 and steps.count(KILL_ONE) >= 1
    assert all(steps.count(name) >= 1 for name in own)
    assert steps == fault_schedule(faults, own, random.Random(1)), "seeded"


def test_a_schedule_with_too_few_kills_is_refused() -> None:
    with pytest.raises(ValueError, match="ONCEFLOW_CHAOS_KILLS"):
        fault_schedule(4, ["a", "b", "c"], random.Random(1))


PROVEN = KitReport(
    subject="s",
    audit=KitAudit(records=10),
    events=(
        FaultEvent("sigkill", KILL_ONE, hit=True, during_load=True),
        FaultEvent("generation", GENERATION_CHANGE, hit=True, during_load=True),
        FaultEvent("source", "terminate", hit=False, during_load=True),
        FaultEvent("source", "terminate", hit=True, during_load=True),
    ),
    aborted_by_kills=3,
    aborted_at_generation_change=5,
)


def test_proven_faults_pass() -> None:
    assert fault_evidence_problems(PROVEN, ["terminate"]) == []


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (FaultEvent("sigkill", KILL_ONE, hit=True, during_load=False), "after the load"),
        (FaultEvent("sigkill", KILL_ALL, hit=False, during_load=True), "already gone"),
        (FaultEvent("generation", GENERATION_CHANGE, hit=False, during_load=True), "SIGTERM"),
    ],
)
def test_each_unproven_fault_fails_the_run(event: FaultEvent, expected: str) -> None:
    report = replace(PROVEN, events=(*PROVEN.events, event))
    (problem,) = fault_evidence_problems(report, ["terminate"])
    assert expected in problem


def test_a_source_fault_that_never_hit_fails_the_run() -> None:
    (problem,) = fault_evidence_problems(PROVEN, ["terminate", "restart"])
    assert "'restart' never hit" in problem


def test_no_aborted_record_outside_the_generation_change_fails_the_run() -> None:
    report = replace(PROVEN, aborted_by_kills=0)
    (problem,) = fault_evidence_problems(report, ["terminate"])
    assert "open transaction" in problem


def test_in_order_audit_names_each_kind_of_wrong_record() -> None:
    truth = {"a": [1, 2, 3, 4]}

    def problem(delivered: list[int]) -> str:
        (found,) = in_order_audit({"a": delivered}, truth).problems
        return found

    assert "duplicate" in problem([1, 2, 2])
    assert "1 record(s) before it lost or reordered" in problem([1, 3])
    assert "does not hold" in problem([1, 9])
    assert "duplicate" in problem([1, 2, 3, 4, 4])  # past the source's end


def test_in_order_audit_is_behind_until_every_key_is_delivered() -> None:
    audit = in_order_audit({"a": [1]}, {"a": [1, 2], "b": [7]})
    assert not audit.problems and audit.records == 1
    assert len(audit.behind) == 2 and not audit.caught_up
    assert in_order_audit({"a": [1, 2]}, {"a": [1, 2]}).caught_up


def test_sequence_audit_tells_losses_from_records_still_to_come() -> None:
    def audit(pairs: list[tuple[str, int]]) -> KitAudit:
        report = audit_sequences(pairs, expected_keys=["s0", "s1"], key_count=2)
        return sequence_audit(report, limit=3)

    assert audit([("s0", 1), ("s0", 2), ("s0", 3), ("s1", 1), ("s1", 2), ("s1", 3)]).caught_up
    behind = audit([("s0", 1), ("s1", 1)])
    assert not behind.problems and len(behind.behind) == 2
    assert "lost" in audit([("s0", 1), ("s0", 3)]).problems[0]
    assert "duplicate" in audit([("s0", 1), ("s0", 1)]).problems[0]
    assert "ends at 3" in " ".join(audit([("s0", 4)]).problems)
    assert "expected 2 keys" in audit([("s9", 1)]).problems[0]


def test_sizes_come_from_the_chaos_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ONCEFLOW_CHAOS_KILLS", raising=False)
    monkeypatch.delenv("ONCEFLOW_CHAOS_RECORDS", raising=False)
    assert KitSize.from_env() == KitSize(faults=5, records=3000)
    monkeypatch.setenv("ONCEFLOW_CHAOS_KILLS", "60")
    monkeypatch.setenv("ONCEFLOW_CHAOS_RECORDS", "20000")
    assert KitSize.from_env() == KitSize(faults=15, records=20000)
    monkeypatch.setenv("ONCEFLOW_CHAOS_KILLS", "2")
    assert KitSize.from_env().faults == 4
    with pytest.raises(ValueError, match="at least"):
        KitSize(faults=3, records=10)
