"""One campaign: the rig started, watched, struck by every fault of the schedule,
caught up, audited and reported. Whatever goes wrong on the way (a system that never
became whole again, a run that ended, an audit that could not read) ends the
schedule as a stall, and the verdicts and the report are still written: a campaign
that found something says what, rather than dying with a traceback."""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.campaign.audits import Verdict, changes_caught_up, verdicts
from tests.campaign.faults import Arena, BrokerLogs, strike
from tests.campaign.java_clients import Coordinators
from tests.campaign.kinds import FaultKind, Strike, available
from tests.campaign.recovery import KindRecovery
from tests.campaign.report import write_report
from tests.campaign.rig import CampaignSize, Rig
from tests.campaign.schedule import fault_schedule
from tests.campaign.watch import FileSinkWatch, TableWatch, TopicWatch, Watch
from tests.support.kafka_cluster import KafkaCluster
from tests.support.netns import Namespace, network_namespace
from tests.support.testbed import script_value
from tests.support.waiting import holds_within, wait_for

CAUGHT_UP_S = 1200
"""How long the outputs may take to complete once the faults are over."""
COUNTED = ("counter", "copier", "rows", "archive")
"""The pipelines holding the sequence source's records, each once when complete."""


@dataclass(frozen=True)
class CampaignResult:
    strikes: list[Strike]
    verdicts: list[Verdict]
    recovery: list[KindRecovery]
    folder: Path
    kinds: tuple[FaultKind, ...]
    stalled: str | None
    """Why the schedule ended early (the system never became whole again, a run
    ended), or a watch died: None for a campaign that ran its course."""

    @property
    def exact(self) -> bool:
        return self.stalled is None and all(v.ok for v in self.verdicts)

    @property
    def missed(self) -> list[Strike]:
        return [s for s in self.strikes if not s.landed]


@contextmanager
def _namespace(root: bool) -> Iterator[Namespace | None]:
    if not root:
        yield None
        return
    with network_namespace(0) as namespace:
        yield namespace


def _watches(rig: Rig) -> dict[str, Watch]:
    watches: list[Watch] = [
        TopicWatch("counter", rig.bootstrap, rig.counts),
        TopicWatch("changes", rig.bootstrap, rig.changes),
        *(TopicWatch(kit.workload, rig.bootstrap, kit.topic) for kit in rig.kits),
    ]
    if rig.size.spark:
        watches += [
            TopicWatch("copier", rig.bootstrap, rig.copied),
            TableWatch("rows", rig.dsn, rig.rows_table),
            FileSinkWatch("archive", rig.archive),
        ]
    return {watch.timeline.pipeline: watch for watch in watches}


def _kits_caught_up(rig: Rig) -> bool:
    """Every kit source's topic holding all its source system does (or wrong already,
    which no waiting mends)."""
    audits = [kit.audit(rig.bootstrap) for kit in rig.kits]
    return all(audit.caught_up or audit.problems for audit in audits)


def _await_caught_up(rig: Rig, watches: dict[str, Watch]) -> None:
    """Every output complete: the counts through each sink, the CDC topic at the
    table's final state, each kit source's topic at its source system's. A run that
    never gets there is judged all the same (the verdicts say what is missing)."""
    counted = [watches[name] for name in COUNTED if name in watches]
    total = rig.size.records
    holds_within(lambda: all(w.seen() >= total for w in counted), CAUGHT_UP_S, 1)
    holds_within(lambda: changes_caught_up(rig), CAUGHT_UP_S / 2, 15)
    holds_within(lambda: _kits_caught_up(rig), CAUGHT_UP_S / 2, 15)


def _struck_by(progress: list[tuple[float, int]], moment: float) -> int:
    """Records visible when the last fault was over: those the faults struck among
    (the rest came after, unpaced)."""
    return max((seen for t, seen in progress if t <= moment), default=0)


def _schedule(
    arena: Arena,
    schedule: list[FaultKind],
    folder: Path,
    say: Callable[[str], None],
    pause_s: tuple[float, float],
) -> tuple[list[Strike], str | None]:
    """Strikes in order, each written down as it lands; (strikes, why it stalled)."""
    strikes: list[Strike] = []
    with (folder / "strikes.jsonl").open("a") as written:
        for number, kind in enumerate(schedule, 1):
            try:
                struck = strike(kind, arena)
            except Exception as error:
                stalled = f"before fault {number} ({kind.value}): {error!r}"[:1000]
                say(f"STALLED {stalled}")
                return strikes, stalled
            strikes.append(struck)
            written.write(json.dumps({**asdict(struck), "number": number}) + "\n")
            written.flush()
            mark = "landed" if struck.landed else "MISSED"
            say(f"{number}/{len(schedule)} {kind.value} {mark}: {struck.evidence}")
            time.sleep(arena.rng.uniform(*pause_s))
    return strikes, None


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
    folder.mkdir(parents=True, exist_ok=True)
    strikes: list[Strike] = []
    stalled: str | None = None
    with _namespace(root) as namespace:
        inside = script_value("scripts/kafka-cluster.sh", "netns-bootstrap") if root else None
        rig = Rig(cluster, dsn, workdir, size, namespace, inside)
        watches = _watches(rig)
        coordinators = Coordinators(cluster.bootstrap)
        start = time.time()
        try:
            rig.start(len(schedule))
            for watch in watches.values():
                watch.start()
            wait_for(
                lambda: rig.running() and all(w.seen() for w in watches.values()),
                600,
                "every pipeline's output",
            )
            say(f"{rig.name}: every pipeline delivering after {time.time() - start:.0f} s")
            arena = Arena(rig, random.Random(seed), BrokerLogs(), coordinators)
            strikes, stalled = _schedule(arena, schedule, folder, say, pause_s)
            rig.sprint()
            try:
                rig.end_load()
            except RuntimeError as error:  # a load that failed: its source's truth is short
                stalled = "; ".join(filter(None, [stalled, f"{error}: {error.__cause__!r}"]))
            _await_caught_up(rig, watches)
        finally:
            coordinators.close()
            timelines = [watch.stop() for watch in watches.values()]
            rig.stop()
        dead = [
            f"the watch of {w.timeline.pipeline} died: {w.error!r}"
            for w in watches.values()
            if w.error
        ]
        stalled = "; ".join(filter(None, [stalled, *dead])) or None
        try:
            judged = verdicts(rig)
        finally:
            rig.drop_tables()
    last = strikes[-1].cleared_at if strikes else start
    facts = {
        "seed": seed,
        "faults": len(strikes),
        "landed": sum(s.landed for s in strikes),
        "kinds": len({s.kind for s in strikes}),
        "records": size.records,
        "records_while_struck": _struck_by(watches["counter"].timeline.progress, last),
        "minutes": round((time.time() - start) / 60, 1),
        "stalled": stalled,
    }
    recovery = write_report(folder, timelines, strikes, judged, start, facts)
    return CampaignResult(strikes, judged, recovery, folder, kinds, stalled)
