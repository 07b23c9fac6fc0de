"""The campaign's faults: each one aimed (a task with a transaction of its own open, a
driver inside a batch, the broker that leads or coordinates), struck, and reported
with the evidence that it landed where it was aimed, read after the strike where it
can be. Each fault starts from a whole system (all brokers in sync, every task
running), so faults do not pile up into an outage no real cluster would survive (two
of three brokers down is unavailability, not a test of exactly-once)."""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import psycopg

from tests.campaign.java_clients import Coordinators
from tests.campaign.kinds import FaultKind, Strike
from tests.campaign.rig import TRANSACTION_TIMEOUT_MS, Rig, SourceTask
from tests.support.checkpoint import batch_in_flight
from tests.support.kafka_cluster import coordinator_partition
from tests.support.proc import kill_process_tree, signal_process, started_at
from tests.support.testbed import ROOT, restart_postgres
from tests.support.waiting import holds_within, wait_for

LOGS = ROOT / ".onceflow" / "kafka-cluster"
ROLLED_BACK = "Completed rollback of ongoing transaction for transactionalId {} due to timeout"
"""What a coordinator logs when it aborts a transaction its producer let time out."""
TIMED_OUT_S = 3 * TRANSACTION_TIMEOUT_MS / 1000
"""Long enough for a coordinator to have given up on a silent producer."""
ZOMBIE_TRIES = 3
LOST_TASK = (b"Lost task", b"Python worker exited unexpectedly")
"""What a driver logs when an executor's task died under it."""


class BrokerLogs:
    """The brokers' logs read from a mark on: what the coordinators did meanwhile."""

    def mark(self) -> dict[Path, int]:
        return {log: log.stat().st_size for log in LOGS.glob("*/broker.log")}

    def rolled_back(self, since: dict[Path, int], transactional_id: str) -> bool:
        wanted = ROLLED_BACK.format(transactional_id).encode()
        for log in LOGS.glob("*/broker.log"):
            with log.open("rb") as file:
                file.seek(since.get(log, 0))
                if wanted in file.read():
                    return True
        return False


@dataclass
class Arena:
    """What every strike works with."""

    rig: Rig
    rng: random.Random
    logs: BrokerLogs
    coordinators: Coordinators

    def topic_transaction_open(self, partition: int, within_s: float = 15) -> bool:
        """Waits for a transaction open on a partition of the source topic."""
        cluster, topic = self.rig.cluster, self.rig.counts
        return holds_within(lambda: cluster.open_transaction_on(topic, partition), within_s, 0.05)

    def own_transaction_open(self, task: SourceTask) -> bool:
        """Whether the task's id has a transaction Ongoing that its process began: one
        open under the id since before is a predecessor's."""
        try:
            transactional_id = self.rig.transactional_id(task)
            state = self.coordinators.states([transactional_id])[transactional_id]
            return state.open_since(started_at(task.pid))
        except (LookupError, FileNotFoundError, KeyError):  # no answer, or the task ended
            return False

    def tasks_with_their_own_open(self) -> list[SourceTask]:
        """Every live task whose own transaction is open, asked of the coordinators at
        once for all of them."""
        ids: dict[SourceTask, str] = {}
        for task in self.rig.source_tasks():
            with suppress(LookupError, FileNotFoundError, KeyError):  # not recorded yet
                ids[task] = self.rig.transactional_id(task)
        try:
            states = self.coordinators.states(sorted(set(ids.values())))
        except LookupError:  # no answer (a coordinator being elected): none found
            return []
        found = []
        for task, transactional_id in ids.items():
            with suppress(FileNotFoundError, KeyError):  # the task ended meanwhile
                if states[transactional_id].open_since(started_at(task.pid)):
                    found.append(task)
        return found

    def aim_at_a_task(self, within_s: float = 15, prefer_s: float = 2) -> SourceTask | None:
        """A running task with a transaction of its own open: of a source drawn at
        random if one of its tasks has one within ``prefer_s`` (the kit sources' loads
        come in bursts, so their transactions are open less often than ``counter``'s,
        which would otherwise take nearly every aim), else of any source."""
        preferred = self.rng.choice(["counter", *(k.workload for k in self.rig.kits)])
        found: list[SourceTask] = []

        def open_one(workloads: set[str] | None) -> bool:
            found[:] = [
                t
                for t in self.tasks_with_their_own_open()
                if workloads is None or t.workload in workloads
            ]
            return bool(found)

        if not holds_within(lambda: open_one({preferred}), prefer_s, 0.05):
            holds_within(lambda: open_one(None), within_s, 0.05)
        return self.rng.choice(found) if found else None


def _whole(arena: Arena) -> None:
    """Every broker in sync and every task running: what each strike starts from
    (AssertionError when it never gets there: a stall)."""
    rig = arena.rig
    rig.cluster.await_fully_replicated(rig.counts)
    wait_for(rig.running, 180, "every source's tasks")


def _named(task: SourceTask | None) -> str:
    return f"{task.workload}'s task {task.number}" if task else "no task"


def task_kill(arena: Arena) -> Strike:
    aimed = arena.aim_at_a_task()
    now = time.time()
    killed = aimed is not None and signal_process(aimed.pid, signal.SIGKILL)
    return Strike(
        FaultKind.TASK_KILL, aimed.workload if aimed else "counter", now, now, killed,
        f"{_named(aimed)} SIGKILLed with a transaction of its own open: {killed}",
    )  # fmt: skip


def task_zombie(arena: Arena) -> Strike:
    """Stopped inside a transaction of its own (asked of its coordinator once stopped)
    until the coordinator logs rolling it back for timeout. A task found stopped with
    none open is woken and another aimed at, up to ZOMBIE_TRIES times: that was no
    zombie."""
    tries = []
    for _ in range(ZOMBIE_TRIES):
        _whole(arena)
        landed, said, struck, cleared, workload = _stopped_past_its_timeout(arena)
        tries.append(said)
        if landed:
            break
    return Strike(
        FaultKind.TASK_ZOMBIE, workload, struck, cleared, landed,
        f"{'; '.join(tries)}; rolled back by its coordinator for timeout: {landed}",
    )  # fmt: skip


def _stopped_past_its_timeout(arena: Arena) -> tuple[bool, str, float, float, str]:
    """One try: (landed, what happened, stopped at, woken at, its source)."""
    task = arena.aim_at_a_task()
    struck = time.time()
    if task is None:
        return False, "no task with a transaction of its own open", struck, struck, "counter"
    transactional_id = arena.rig.transactional_id(task)
    since = arena.logs.mark()
    signal_process(task.pid, signal.SIGSTOP)
    try:
        held = arena.own_transaction_open(task)
        landed = held and holds_within(
            lambda: arena.logs.rolled_back(since, transactional_id), TIMED_OUT_S
        )
    finally:
        signal_process(task.pid, signal.SIGCONT)
    cleared = time.time()
    return (
        landed,
        f"{_named(task)} stopped {cleared - struck:.0f} s (one open: {held})",
        struck,
        cleared,
        task.workload,
    )


JOBS = ("copier", "rows", "archive")
PYTHON_SINKS = ("copier", "rows")
"""The jobs whose sinks run in Python workers (``archive``'s file sink is Spark's own,
all in the JVM): what an executor kill aims at."""


def _a_job(arena: Arena, jobs: tuple[str, ...] = JOBS) -> str:
    return arena.rng.choice(jobs)


def _driver_in_a_batch(arena: Arena, job: str) -> bool:
    rig = arena.rig
    return holds_within(
        lambda: rig.driver_pid(job) is not None and batch_in_flight(rig.host.checkpoint(job)),
        180,
        0.005,
    )


def driver_kill(arena: Arena) -> Strike:
    """Landed if, after the kill, a batch is planned and not committed: a dead driver
    commits nothing, so it died inside that batch."""
    job = _a_job(arena)
    _driver_in_a_batch(arena, job)
    pid = arena.rig.driver_pid(job)
    now = time.time()
    if pid is not None:
        kill_process_tree(pid)
    inside = pid is not None and batch_in_flight(arena.rig.host.checkpoint(job))
    return Strike(
        FaultKind.DRIVER_KILL, job, now, now, inside,
        f"{job}'s driver (pid {pid}) SIGKILLed inside a batch: {inside}",
    )  # fmt: skip


def executor_kill(arena: Arena) -> Strike:
    """The driver JVM's Python workers, where the sinks write, SIGKILLed inside a batch;
    landed once the driver logs a task lost to it."""
    job, rig = _a_job(arena, PYTHON_SINKS), arena.rig
    holds_within(
        lambda: batch_in_flight(rig.host.checkpoint(job)) and bool(rig.python_workers(job)),
        180,
        0.005,
    )
    log = rig.host.state / f"default.{job}.log"
    since = log.stat().st_size if log.exists() else 0
    now = time.time()
    killed = sum(signal_process(pid, signal.SIGKILL) for pid in rig.python_workers(job))
    lost = killed > 0 and holds_within(lambda: _logged_since(log, since, LOST_TASK), 60)
    return Strike(
        FaultKind.EXECUTOR_KILL, job, now, now, lost,
        f"{killed} Python workers of {job}'s executor SIGKILLed; the driver lost a task "
        f"to it: {lost}",
    )  # fmt: skip


def _logged_since(log: Path, since: int, phrases: tuple[bytes, ...]) -> bool:
    with log.open("rb") as file:
        file.seek(since)
        written = file.read()
    return any(phrase in written for phrase in phrases)


def _a_partition(arena: Arena) -> int:
    return arena.rng.randrange(arena.rig.cluster.partitions(arena.rig.counts))


def _down_for_a_while(arena: Arena, broker: int) -> None:
    """A killed broker stays away a few seconds, starts on its data and catches up."""
    time.sleep(arena.rng.uniform(2, 6))
    arena.rig.cluster.start(broker)
    arena.rig.cluster.await_fully_replicated(arena.rig.counts)


def leader_kill(arena: Arena) -> Strike:
    cluster, topic = arena.rig.cluster, arena.rig.counts
    partition = _a_partition(arena)
    opened = arena.topic_transaction_open(partition)
    leader = cluster.leader(topic, partition)  # now: leadership moves back after restarts
    now = time.time()
    cluster.kill(leader)
    cluster.await_taken_over(leader, topic, partition)
    _down_for_a_while(arena, leader)
    return Strike(
        FaultKind.LEADER_KILL, "counter", now, now, opened and leader > 0,
        f"broker {leader}, leader of {topic}/{partition}, SIGKILLed with a transaction "
        f"open on it: {opened}",
    )  # fmt: skip


def coordinator_kill(arena: Arena) -> Strike:
    rig, cluster = arena.rig, arena.rig.cluster
    aimed = arena.aim_at_a_task()
    task = aimed or arena.rng.choice(rig.source_tasks())
    transactional_id = rig.transactional_id(task)
    coordinator = cluster.coordinator(transactional_id)
    now = time.time()
    cluster.kill(coordinator)
    log_partition = coordinator_partition(
        transactional_id, cluster.partitions("__transaction_state")
    )
    cluster.await_taken_over(coordinator, "__transaction_state", log_partition)
    _down_for_a_while(arena, coordinator)
    return Strike(
        FaultKind.COORDINATOR_KILL, task.workload, now, now, aimed is not None,
        f"broker {coordinator}, coordinator of {transactional_id}, SIGKILLed with that "
        f"task's own transaction open: {aimed is not None}",
    )  # fmt: skip


def broker_pause(arena: Arena) -> Strike:
    cluster, topic = arena.rig.cluster, arena.rig.counts
    partition = _a_partition(arena)
    opened = arena.topic_transaction_open(partition)
    leader = cluster.leader(topic, partition)
    struck = time.time()
    cluster.pause(leader)
    cluster.await_taken_over(leader, topic, partition)
    cluster.resume(leader)
    cleared = time.time()
    cluster.await_fully_replicated(topic)
    return Strike(
        FaultKind.BROKER_PAUSE, "counter", struck, cleared, opened and leader > 0,
        f"broker {leader}, leader of {topic}/{partition}, paused {cleared - struck:.0f} s "
        f"until left out of the ISR, a transaction open on it: {opened}",
    )  # fmt: skip


def network_partition(arena: Arena) -> Strike:
    """Cut off until a coordinator rolls back a transaction one of the tasks began
    before the cut: the tasks reach no broker, so only the timeout can have ended it."""
    rig = arena.rig
    assert rig.namespace is not None
    tasks = rig.source_tasks(rig.source)
    arena.aim_at_a_task()
    since = arena.logs.mark()
    struck = time.time()
    rig.namespace.partition()
    try:
        held = [rig.transactional_id(t) for t in tasks if arena.own_transaction_open(t)]
        aborted = bool(held) and holds_within(
            lambda: any(arena.logs.rolled_back(since, i) for i in held), TIMED_OUT_S
        )
        dropped = rig.namespace.dropped()
    finally:
        rig.namespace.heal()
    cleared = time.time()
    return Strike(
        FaultKind.PARTITION, "counter", struck, cleared, aborted and dropped > 0,
        f"cut off {cleared - struck:.0f} s, {dropped} packets dropped; {len(held)} tasks "
        f"held a transaction of their own, rolled back for timeout: {aborted}",
    )  # fmt: skip


def lossy_link(arena: Arena) -> Strike:
    rig = arena.rig
    assert rig.namespace is not None
    loss = arena.rng.choice([5, 10, 20])
    struck = time.time()
    rig.namespace.degrade(rate_kbit=arena.rng.choice([256, 1024]), loss_pct=loss)
    try:
        time.sleep(arena.rng.uniform(5, 15))
        dropped = rig.namespace.dropped()
    finally:
        rig.namespace.restore_link()
    cleared = time.time()
    return Strike(
        FaultKind.LOSSY_LINK, "counter", struck, cleared, dropped > 0,
        f"{cleared - struck:.0f} s on a slow link losing {loss} %: {dropped} packets dropped",
    )  # fmt: skip


def _streaming_backends(dsn: str, slot: str) -> list[int]:
    """The backend streaming the CDC slot, if a task holds it."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            rows = conn.execute(
                "SELECT active_pid FROM pg_replication_slots"
                " WHERE slot_name = %s AND active_pid IS NOT NULL",
                (slot,),
            ).fetchall()
    except psycopg.Error:
        return []
    return [pid for (pid,) in rows]


def _terminated(dsn: str, backend: int) -> bool:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute("SELECT pg_terminate_backend(%s)", (backend,)).fetchone()
    return bool(row and row[0])


def backend_kill(arena: Arena) -> Strike:
    rig = arena.rig
    holds_within(lambda: bool(_streaming_backends(rig.dsn, rig.slot)), 60)
    backends = _streaming_backends(rig.dsn, rig.slot)
    now = time.time()
    ended_it = bool(backends) and _terminated(rig.dsn, backends[0])
    return Strike(
        FaultKind.DATABASE_BACKEND_KILL, "changes", now, now, ended_it,
        f"the backend streaming slot {rig.slot} terminated: {ended_it}",
    )  # fmt: skip


def database_restart(arena: Arena) -> Strike:
    rig = arena.rig
    streaming = holds_within(lambda: bool(_streaming_backends(rig.dsn, rig.slot)), 60)
    struck = time.time()
    back = restart_postgres("immediate")
    cleared = time.time()
    return Strike(
        FaultKind.DATABASE_RESTART, "changes", struck, cleared, streaming and back,
        f"PostgreSQL crashed and started again ({cleared - struck:.1f} s) while the slot "
        f"streamed: {streaming}",
    )  # fmt: skip


def _other_task_count(arena: Arena) -> int:
    return 3 if arena.rig.tasks == 2 else 2


def _generation(arena: Arena) -> tuple[int, int]:
    """(generation, fenced generation) as the run recorded them."""
    record = arena.rig.source.record("counter") or {}
    return int(record.get("generation", 0)), int(record.get("fencedGeneration", 0))


def supervisor_kill(arena: Arena) -> Strike:
    """The task count changed, and the run SIGKILLed as soon as it has recorded the
    new generation's intent: landed if the record it left shows that generation not
    yet fenced, so the next run must finish the rollout from the record alone."""
    rig = arena.rig
    before, _ = _generation(arena)
    struck = time.time()
    rig.set_tasks(_other_task_count(arena))
    holds_within(lambda: _generation(arena)[0] > before > 0, 30, 0.002)
    rig.source.kill()
    generation, fenced = _generation(arena)
    rig.source.start()
    cleared = time.time()
    landed = generation > before and fenced < generation
    return Strike(
        FaultKind.SUPERVISOR_KILL, "counter", struck, cleared, landed,
        f"onceflow run SIGKILLed at generation {generation} (fenced up to {fenced}) going "
        f"to {rig.tasks} tasks; in the middle of the rollout: {landed}",
    )  # fmt: skip


def generation_change(arena: Arena) -> Strike:
    rig = arena.rig
    before, _ = _generation(arena)
    now = time.time()
    rig.set_tasks(_other_task_count(arena))
    rolled = holds_within(
        lambda: (
            _generation(arena) == (before + 1, before + 1) and len(rig.task_pids()) == rig.tasks
        ),
        120,
    )
    return Strike(
        FaultKind.GENERATION_CHANGE, "counter", now, now, rolled,
        f"tasksMax to {rig.tasks}: generation {before} -> {_generation(arena)[0]}, "
        f"its tasks running: {rolled}",
    )  # fmt: skip


def spec_edit(arena: Arena) -> Strike:
    rig = arena.rig
    job = _a_job(arena)
    holds_within(lambda: rig.driver_pid(job) is not None, 180)
    old = rig.driver_pid(job)
    now = time.time()
    rig.set_trigger(2 if rig.trigger_s == 1 else 1)
    replaced = holds_within(lambda: rig.driver_pid(job) not in (None, old), 120)
    return Strike(
        FaultKind.SPEC_EDIT, job, now, now, replaced,
        f"trigger to {rig.trigger_s} s: {job}'s driver {old} replaced: {replaced}",
    )  # fmt: skip


STRIKES: dict[FaultKind, Callable[[Arena], Strike]] = {
    FaultKind.TASK_KILL: task_kill,
    FaultKind.TASK_ZOMBIE: task_zombie,
    FaultKind.DRIVER_KILL: driver_kill,
    FaultKind.EXECUTOR_KILL: executor_kill,
    FaultKind.LEADER_KILL: leader_kill,
    FaultKind.COORDINATOR_KILL: coordinator_kill,
    FaultKind.BROKER_PAUSE: broker_pause,
    FaultKind.PARTITION: network_partition,
    FaultKind.LOSSY_LINK: lossy_link,
    FaultKind.DATABASE_BACKEND_KILL: backend_kill,
    FaultKind.DATABASE_RESTART: database_restart,
    FaultKind.SUPERVISOR_KILL: supervisor_kill,
    FaultKind.GENERATION_CHANGE: generation_change,
    FaultKind.SPEC_EDIT: spec_edit,
}


def strike(kind: FaultKind, arena: Arena) -> Strike:
    """One fault of ``kind`` from a whole system (AssertionError: it never became whole
    again, a stall the campaign reports). A strike that failed on its own (a broker
    asked during an election, say) counts as missed, its error as its evidence, once
    whatever it left half done is undone."""
    _whole(arena)
    try:
        return STRIKES[kind](arena)
    except AssertionError:
        raise
    except Exception as error:
        now = time.time()
        arena.rig.mend()
        return Strike(kind, "-", now, now, False, f"the strike failed: {error!r}"[:500])
