"""The campaign's verdicts, read once the faults are over and the pipelines caught up:
every stream exact through the source and the Kafka sink (read by librdkafka and by
Kafka's Java client, which must read the very same records), the Postgres sink's table
and the file sink's committed files holding each record once, the CDC topic following
the table change by change to its final state, and each kit source's topic passing its
conformance audit against its source system (both clients agreeing on it too)."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg

from onceflow.eos.consume import read_to_end
from onceflow.logic.audit import audit_sequences
from tests.campaign.file_sink_output import committed_values
from tests.campaign.java_clients import Read, read_with_java
from tests.campaign.kit_sources import KitSource
from tests.support.cdc import audit_changes, final_versions, read_changes

if TYPE_CHECKING:
    from tests.campaign.rig import Rig

JAVA_READER = Path(__file__).with_name("ReadCommitted.java")


@dataclass(frozen=True)
class Verdict:
    pipeline: str
    ok: bool
    detail: str


def read_with_librdkafka(bootstrap: str, topic: str) -> Read:
    messages = read_to_end(bootstrap, topic, isolation="read_committed", timeout_s=300)
    return sorted((m.partition() or 0, m.offset() or 0, m.key(), m.value()) for m in messages)


def clients_agree(bootstrap: str, topic: str) -> tuple[Read, str | None]:
    """librdkafka's read, and what the Java client read differently (None: nothing)."""
    ours = read_with_librdkafka(bootstrap, topic)
    with tempfile.TemporaryDirectory() as scratch:
        java = read_with_java(bootstrap, topic, Path(scratch) / "read.tsv")
    if ours == java:
        return ours, None
    only_ours, only_java = Counter(ours) - Counter(java), Counter(java) - Counter(ours)
    return ours, (
        f"librdkafka read {len(ours)} records, the Java client {len(java)}: "
        f"{sum(only_ours.values())} only by librdkafka, {sum(only_java.values())} only by Java"
    )


def _pairs(read: Read) -> Iterable[tuple[str, int]]:
    for _, _, _, value in read:
        body = json.loads(value or b"null")
        yield str(body["stream"]), int(body["seq"])


def sequences_verdict(
    pipeline: str, bootstrap: str, topic: str, streams: int, per_stream: int
) -> Verdict:
    """Every stream's numbers 1..per_stream once each, in order, both clients agreeing."""
    read, disagreement = clients_agree(bootstrap, topic)
    report = audit_sequences(
        _pairs(read), expect=per_stream, expected_keys=[f"s{i}" for i in range(streams)]
    )
    problems = [p for p in (disagreement, None if report.ok else str(report)) if p]
    return Verdict(
        pipeline,
        not problems,
        "; ".join(problems)
        or f"{len(read)} records, {streams} streams exact, both clients read the same",
    )


def held_once_verdict(
    pipeline: str, held: Counter[tuple[str, int]], streams: int, per_stream: int
) -> Verdict:
    """A sink's output holds every (stream, seq) once."""
    expected = Counter((f"s{s}", seq) for s in range(streams) for seq in range(1, per_stream + 1))
    missing, extra = expected - held, held - expected
    ok = not missing and not extra
    return Verdict(
        pipeline,
        ok,
        f"{sum(held.values())} rows, each record once"
        if ok
        else f"{sum(missing.values())} rows missing, {sum(extra.values())} extra "
        f"(e.g. {sorted(extra)[:3]} extra, {sorted(missing)[:3]} missing)",
    )


def table_rows(dsn: str, table: str) -> Counter[tuple[str, int]]:
    with psycopg.connect(dsn) as conn:
        return Counter(conn.execute(f"SELECT stream, seq FROM {table}").fetchall())


def archived_rows(output: Path) -> Counter[tuple[str, int]]:
    held: Counter[tuple[str, int]] = Counter()
    for value in committed_values(output):
        body = json.loads(value)
        held[(str(body["stream"]), int(body["seq"]))] += 1
    return held


def kit_verdict(kit: KitSource, bootstrap: str) -> Verdict:
    """The kit's own audit of the source's topic against its source system."""
    _, disagreement = clients_agree(bootstrap, kit.topic)
    audit = kit.audit(bootstrap)
    problems = [disagreement, *audit.problems[:5], *audit.behind[:5]]
    shown = [p for p in problems if p]
    return Verdict(
        kit.workload,
        not shown,
        "; ".join(shown)
        or f"{audit.records} records, each once and in the source's order, both clients "
        "read the same",
    )


def changes_verdict(pipeline: str, bootstrap: str, topic: str, dsn: str, table: str) -> Verdict:
    """Each key's changes consecutive and ending at the table's final state."""
    read, disagreement = clients_agree(bootstrap, topic)
    changes = [
        (json.loads(key or b"null")["id"], json.loads(value or b"null"))
        for _, _, key, value in read
    ]
    report = audit_changes(changes, final_versions(dsn, table))
    problems = [disagreement, *report.problems[:5], *report.behind[:5]]
    shown = [p for p in problems if p]
    return Verdict(
        pipeline,
        not shown,
        "; ".join(shown)
        or f"{report.records} changes of {report.keys} rows, at the table's final state, "
        "both clients read the same",
    )


def changes_caught_up(rig: Rig) -> bool:
    """The CDC topic at the table's final state (librdkafka's read alone: it is asked
    again and again while the source catches up)."""
    final = final_versions(rig.dsn, rig.cdc_table)
    return audit_changes(read_changes(rig.bootstrap, rig.changes), final).caught_up


def verdicts(rig: Rig) -> list[Verdict]:
    """Every pipeline's verdict; one whose audit could not even read is a failed one,
    naming the error, not the end of the campaign's report."""
    streams, per_stream = rig.size.streams, rig.size.per_stream

    def sequences(pipeline: str, topic: str) -> Callable[[], Verdict]:
        return lambda: sequences_verdict(pipeline, rig.bootstrap, topic, streams, per_stream)

    judges: dict[str, Callable[[], Verdict]] = {
        "counter": sequences("counter", rig.counts),
        "changes": lambda: changes_verdict(
            "changes", rig.bootstrap, rig.changes, rig.dsn, rig.cdc_table
        ),
    }
    for kit in rig.kits:
        judges[kit.workload] = partial(kit_verdict, kit, rig.bootstrap)
    if rig.size.spark:
        judges["copier"] = sequences("copier", rig.copied)
        judges["rows"] = lambda: held_once_verdict(
            "rows", table_rows(rig.dsn, rig.rows_table), streams, per_stream
        )
        judges["archive"] = lambda: held_once_verdict(
            "archive", archived_rows(rig.archive), streams, per_stream
        )
    found = []
    for pipeline, judge in judges.items():
        try:
            found.append(judge())
        except Exception as error:
            found.append(Verdict(pipeline, False, f"its audit failed: {error!r}"[:500]))
    return found
