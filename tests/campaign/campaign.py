"""One campaign: the rig started, watched, struck by every fault of the schedule,
caught up, audited and reported."""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.campaign.audits import Verdict, changes_verdict, rows_verdict, sequences_verdict
from tests.campaign.faults import Arena, BrokerLogs, strike
from tests.campaign.kinds import FaultKind, available
from tests.campaign.recovery import KindRecovery, Strike
from tests.campaign.report import write_report
from tests.campaign.rig import CampaignSize, Rig
from tests.campaign.schedule import fault_schedule
from tests.campaign.watch import TableWatch, Timeline, TopicWatch, Watch
from tests.support.kafka_cluster import KafkaCluster
from tests.support.netns import Namespace, network_namespace
from tests.support.testbed import script_value
from tests.support.waiting import wait_for

QUIET_S = 20
"""The CDC topic is caught up once it has grown by nothing this long after the load."""


@dataclass(frozen=True)
class CampaignResult:
    strikes: list[Strike]
    verdicts: list[Verdict]
    recovery: list[KindRecovery]
    folder: Path
    kinds: tuple[FaultKind, ...]
    stalled: str | None
    """Why the schedule ended early: the system did not become whole again."""

    @property
    def exact(self) -> bool:
        return self.stalled is None and all(v.ok for v in self.verdicts)


@contextmanager
def _namespace(root: bool) -> Iterator[Namespace | None]:
    if not root:
        yield None
        return
    with network_namespace(0) as namespace:
        yield namespace


def _watches(rig: Rig) -> list[Watch]:
    watches: list[Watch] = [
        TopicWatch("counter", rig.bootstrap, rig.counts),
        TopicWatch("changes", rig.bootstrap, rig.changes),
    ]
    if rig.size.spark:
        watches += [
            TopicWatch("copier", rig.bootstrap, rig.copied),
            TableWatch("rows", rig.dsn, rig.rows_table),
        ]
    return watches


def _seen(watch: Watch) -> int:
    progress = watch.timeline.progress
    return progress[-1][1] if progress else 0


def _await_caught_up(rig: Rig, watches: Sequence[Watch]) -> None:
    """Every pipeline's output complete: the counts through each sink, and the CDC
    topic grown by nothing for QUIET_S since the load ended. A run that never gets
    there is judged all the same (the verdicts say what is missing)."""
    counted = [w for w in watches if w.timeline.pipeline != "changes"]
    total = rig.size.records
    with suppress(AssertionError):
        wait_for(lambda: all(_seen(w) >= total for w in counted), 1200, "every output complete")
    (changes,) = [w for w in watches if w.timeline.pipeline == "changes"]
    last, since = -1, time.monotonic()
    deadline = time.monotonic() + 600
    while time.monotonic() - since < QUIET_S and time.monotonic() < deadline:
        if _seen(changes) != last:
            last, since = _seen(changes), time.monotonic()
        time.sleep(1)


def _visible_by(timeline: Timeline, moment: float) -> int:
    """The source's records visible when the last fault was over: those the faults
    struck among (the rest came after, unpaced)."""
    return max((seen for t, seen in timeline.progress if t <= moment), default=0)


def _verdicts(rig: Rig) -> list[Verdict]:
    size = rig.size
    verdicts = [
        sequences_verdict("counter", rig.bootstrap, rig.counts, size.streams, size.per_stream),
        changes_verdict("changes", rig.bootstrap, rig.changes, rig.dsn, rig.cdc_table),
    ]
    if size.spark:
        verdicts += [
            sequences_verdict("copier", rig.bootstrap, rig.copied, size.streams, size.per_stream),
            rows_verdict("rows", rig.dsn, rig.rows_table, size.streams, size.per_stream),
        ]
    return verdicts


def run_campaign(
    cluster: KafkaCluster,
    dsn: str,
    workdir: Path,
    folder: Path,
    size: CampaignSize,
    faults: int | None,
    seed: int,
    say: Callable[[str], None] = print,
    pause_s: tuple[float, float] = (0.2, 1.5),
) -> CampaignResult:
    """``faults``: how many (None: each kind once); ``pause_s``: the range of the random
    pause between faults."""
    root = os.geteuid() == 0
    kinds = available(root, size.spark)
    schedule = fault_schedule(kinds, faults or len(kinds), seed)
    strikes: list[Strike] = []
    stalled: str | None = None
    folder.mkdir(parents=True, exist_ok=True)
    with _namespace(root) as namespace:
        inside = script_value("scripts/kafka-cluster.sh", "netns-bootstrap") if root else None
        rig = Rig(cluster, dsn, workdir, size, namespace, inside)
        watches = _watches(rig)
        start = time.time()
        try:
            rig.start()
            for watch in watches:
                watch.start()
            wait_for(
                lambda: rig.running() and all(_seen(w) for w in watches),
                600,
                "every pipeline's output",
            )
            say(f"{rig.name}: every pipeline delivering after {time.time() - start:.0f} s")
            arena = Arena(rig, random.Random(seed), BrokerLogs())
            with (folder / "strikes.jsonl").open("a") as written:
                for number, kind in enumerate(schedule, 1):
                    try:
                        struck = strike(kind, arena)
                    except AssertionError as error:
                        stalled = f"before fault {number} ({kind.value}): {error}"
                        say(f"STALLED {stalled}")
                        break
                    strikes.append(struck)
                    written.write(json.dumps({**asdict(struck), "number": number}) + "\n")
                    written.flush()
                    mark = "landed" if struck.landed else "MISSED"
                    say(f"{number}/{len(schedule)} {kind.value} {mark}: {struck.evidence}")
                    time.sleep(arena.rng.uniform(*pause_s))
            rig.sprint()
            rig.end_load()
            _await_caught_up(rig, watches)
        finally:
            timelines = [watch.stop() for watch in watches]
            rig.stop()
        try:
            verdicts = _verdicts(rig)
        finally:
            rig.drop_tables()
    facts = {
        "seed": seed,
        "faults": len(strikes),
        "kinds": len({s.kind for s in strikes}),
        "records": size.records,
        "records_while_struck": _visible_by(timelines[0], strikes[-1].cleared_at if strikes else 0),
        "minutes": round((time.time() - start) / 60, 1),
        "stalled": stalled,
    }
    recovery = write_report(folder, timelines, strikes, verdicts, start, facts)
    return CampaignResult(strikes, verdicts, recovery, folder, kinds, stalled)
