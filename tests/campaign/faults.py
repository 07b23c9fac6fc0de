"""The campaign's faults: each one aimed (a task with a transaction open, a driver
inside a batch, the broker that leads or coordinates), struck, and reported with the
evidence that it landed where it was aimed. A strike also waits until the system is
whole again where the next fault needs it (all brokers in sync, every task running),
so faults do not pile up into an outage no real cluster would survive (two of three
brokers down is unavailability, not a test of exactly-once)."""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg

from tests.campaign.kinds import FaultKind
from tests.campaign.recovery import Strike
from tests.campaign.rig import TRANSACTION_TIMEOUT_MS, Rig, signal_process
from tests.support.checkpoint import batch_in_flight
from tests.support.kafka_cluster import coordinator_partition
from tests.support.proc import descendants, ended
from tests.support.testbed import ROOT, restart_postgres
from tests.support.waiting import wait_for

LOGS = ROOT / ".onceflow" / "kafka-cluster"
ROLLED_BACK = "Completed rollback of ongoing transaction for transactionalId {} due to timeout"
"""What a coordinator logs when it aborts a transaction its producer let time out."""


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

    def transaction_open(self, within_s: float = 15) -> bool:
        """Waits for a transaction open on the source topic; whether one was. Asked
        afresh each time (a client kept across broker faults answers late)."""
        rig = self.rig
        partitions = range(rig.cluster.partitions(rig.counts))
        return soon(
            lambda: any(rig.cluster.open_transaction_on(rig.counts, p) for p in partitions),
            within_s,
            interval_s=0.05,
        )


def soon(condition: Callable[[], bool], within_s: float, interval_s: float = 0.1) -> bool:
    """Whether ``condition`` holds within ``within_s``: a strike that cannot aim says so
    in its evidence instead of failing the campaign."""
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval_s)
    return True


def _whole(arena: Arena) -> None:
    """Every broker in sync and every task running: what each strike starts from."""
    rig = arena.rig
    rig.cluster.await_fully_replicated(rig.counts)
    wait_for(rig.running, 180, f"{rig.tasks} source tasks")


def _a_task(arena: Arena) -> tuple[int, int]:
    return arena.rng.choice(sorted(arena.rig.task_pids().items()))


def task_kill(arena: Arena) -> Strike:
    opened = arena.transaction_open()
    task, pid = _a_task(arena)  # now: a task that ended while we waited is not aimed at
    now = time.time()
    killed = signal_process(pid, signal.SIGKILL)
    return Strike(
        FaultKind.TASK_KILL, "counter", now, now, opened and killed,
        f"task {task} (pid {pid}) SIGKILLed, a transaction open on the topic: {opened}",
    )  # fmt: skip


def task_zombie(arena: Arena) -> Strike:
    """Stopped until its coordinator rolls its transaction back: only a transaction the
    task had open when stopped can time out while it is stopped. A task stopped with
    none open (one just restarted, still starting its producer) is woken after three
    timeouts and another aimed at, up to ZOMBIE_TRIES times: that was no zombie."""
    tries = []
    for _ in range(ZOMBIE_TRIES):
        _whole(arena)
        task, pid = _a_task(arena)
        transactional_id = arena.rig.transactional_id(task)
        struck = time.time()
        aborted = _stopped_until_rolled_back(arena, pid, transactional_id)
        cleared = time.time()
        tries.append(f"task {task} stopped {cleared - struck:.0f} s")
        if aborted:
            break
    return Strike(
        FaultKind.TASK_ZOMBIE, "counter", struck, cleared, aborted,
        f"{', then '.join(tries)}; its coordinator rolled back {transactional_id}'s open "
        f"transaction: {aborted}",
    )  # fmt: skip


ZOMBIE_TRIES = 3


def _stopped_until_rolled_back(arena: Arena, pid: int, transactional_id: str) -> bool:
    """SIGSTOPs the task and wakes it once its id's coordinator logs the rollback (or
    after three timeouts); whether it did."""
    arena.transaction_open()
    since = arena.logs.mark()
    signal_process(pid, signal.SIGSTOP)
    try:
        return soon(
            lambda: arena.logs.rolled_back(since, transactional_id),
            3 * TRANSACTION_TIMEOUT_MS / 1000,
        )
    finally:
        signal_process(pid, signal.SIGCONT)


def _a_job(arena: Arena) -> str:
    return arena.rng.choice(["copier", "rows"])


def _kill_tree(pid: int) -> None:
    """The driver and everything under it at once, as a pod's end takes them."""
    tree = [pid, *descendants(pid)]
    for each in tree:
        signal_process(each, signal.SIGKILL)
    soon(lambda: all(ended(each) for each in tree), 30, 0.05)


def _in_a_batch(arena: Arena, job: str) -> bool:
    rig = arena.rig
    return soon(
        lambda: rig.driver_pid(job) is not None and batch_in_flight(rig.host.checkpoint(job)),
        180,
        0.005,
    )


def driver_kill(arena: Arena) -> Strike:
    job = _a_job(arena)
    inside = _in_a_batch(arena, job)
    pid = arena.rig.driver_pid(job)
    now = time.time()
    if pid is not None:
        inside = inside and batch_in_flight(arena.rig.host.checkpoint(job))
        _kill_tree(pid)
    return Strike(
        FaultKind.DRIVER_KILL, job, now, now, inside and pid is not None,
        f"{job}'s driver (pid {pid}) SIGKILLed inside a batch: {inside}",
    )  # fmt: skip


def executor_kill(arena: Arena) -> Strike:
    job = _a_job(arena)
    rig = arena.rig
    soon(
        lambda: batch_in_flight(rig.host.checkpoint(job)) and bool(rig.python_workers(job)),
        180,
        0.005,
    )
    workers = rig.python_workers(job)
    inside = bool(workers) and batch_in_flight(rig.host.checkpoint(job))
    now = time.time()
    killed = sum(signal_process(pid, signal.SIGKILL) for pid in workers)
    return Strike(
        FaultKind.EXECUTOR_KILL, job, now, now, inside and killed > 0,
        f"{killed} Python workers of {job}'s executor SIGKILLed inside a batch: {inside}",
    )  # fmt: skip


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
    leader = cluster.leader(topic, partition)
    opened = soon(lambda: cluster.open_transaction_on(topic, partition), 15, 0.05)
    now = time.time()
    cluster.kill(leader)
    cluster.await_taken_over(leader, topic, partition)
    _down_for_a_while(arena, leader)
    return Strike(
        FaultKind.LEADER_KILL, "counter", now, now, opened,
        f"broker {leader}, leader of {topic}/{partition}, SIGKILLed with a transaction "
        f"open on it: {opened}",
    )  # fmt: skip


def coordinator_kill(arena: Arena) -> Strike:
    rig, cluster = arena.rig, arena.rig.cluster
    task, _ = _a_task(arena)
    transactional_id = rig.transactional_id(task)
    coordinator = cluster.coordinator(transactional_id)
    opened = arena.transaction_open()
    now = time.time()
    cluster.kill(coordinator)
    log_partition = coordinator_partition(
        transactional_id, cluster.partitions("__transaction_state")
    )
    cluster.await_taken_over(coordinator, "__transaction_state", log_partition)
    _down_for_a_while(arena, coordinator)
    return Strike(
        FaultKind.COORDINATOR_KILL, "counter", now, now, opened,
        f"broker {coordinator}, coordinator of {transactional_id}, SIGKILLed with a "
        f"transaction open on the topic: {opened}",
    )  # fmt: skip


def broker_pause(arena: Arena) -> Strike:
    cluster, topic = arena.rig.cluster, arena.rig.counts
    partition = _a_partition(arena)
    leader = cluster.leader(topic, partition)
    opened = soon(lambda: cluster.open_transaction_on(topic, partition), 15, 0.05)
    struck = time.time()
    cluster.pause(leader)
    cluster.await_taken_over(leader, topic, partition)
    cluster.resume(leader)
    cleared = time.time()
    cluster.await_fully_replicated(topic)
    return Strike(
        FaultKind.BROKER_PAUSE, "counter", struck, cleared, opened,
        f"broker {leader}, leader of {topic}/{partition}, paused {cleared - struck:.0f} s "
        f"until left out of the ISR, a transaction open on it: {opened}",
    )  # fmt: skip


def network_partition(arena: Arena) -> Strike:
    """Cut off until a coordinator rolls back one of the tasks' transactions: the
    tasks reach no broker, so only the timeout can have ended it."""
    rig = arena.rig
    assert rig.namespace is not None
    ids = [rig.transactional_id(task) for task in rig.task_pids()]
    arena.transaction_open()
    since = arena.logs.mark()
    struck = time.time()
    rig.namespace.partition()
    try:
        aborted = soon(
            lambda: any(arena.logs.rolled_back(since, i) for i in ids),
            3 * TRANSACTION_TIMEOUT_MS / 1000,
        )
        dropped = rig.namespace.dropped()
    finally:
        rig.namespace.heal()
    cleared = time.time()
    return Strike(
        FaultKind.PARTITION, "counter", struck, cleared, aborted and dropped > 0,
        f"cut off {cleared - struck:.0f} s, {dropped} packets dropped; a coordinator "
        f"rolled back a cut-off task's transaction: {aborted}",
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


def _slot_streamed(arena: Arena, end: bool) -> bool:
    """Whether a task streams the CDC slot (``end``: and that backend is ended)."""
    rig = arena.rig
    what = "pg_terminate_backend(active_pid)" if end else "true"

    def streamed() -> bool:
        try:
            with psycopg.connect(rig.dsn, autocommit=True, connect_timeout=5) as conn:
                rows = conn.execute(
                    f"SELECT {what} FROM pg_replication_slots"
                    " WHERE slot_name = %s AND active_pid IS NOT NULL",
                    (rig.slot,),
                ).fetchall()
        except psycopg.Error:
            return False
        return any(hit for (hit,) in rows)

    return soon(streamed, 60, 0.1)


def backend_kill(arena: Arena) -> Strike:
    now = time.time()
    ended_it = _slot_streamed(arena, end=True)
    return Strike(
        FaultKind.DATABASE_BACKEND_KILL, "changes", now, now, ended_it,
        f"the backend streaming slot {arena.rig.slot} terminated: {ended_it}",
    )  # fmt: skip


def database_restart(arena: Arena) -> Strike:
    streaming = _slot_streamed(arena, end=False)
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
    record = arena.rig.source.record("counter") or {}
    return int(record.get("generation", 0)), int(record.get("fencedGeneration", 0))


def supervisor_kill(arena: Arena) -> Strike:
    """The task count changed, and the run SIGKILLed as soon as it has recorded the
    new generation's intent and not yet started its tasks: the next run must finish
    the rollout (stop what is left, fence, start) from the record alone."""
    rig = arena.rig
    before, _ = _generation(arena)
    struck = time.time()
    rig.set_tasks(_other_task_count(arena))
    mid = soon(lambda: _generation(arena)[0] > before > 0 and _mid_rollout(arena), 30, 0.002)
    rig.source.kill()
    caught = _generation(arena)
    rig.source.start()
    cleared = time.time()
    return Strike(
        FaultKind.SUPERVISOR_KILL, "counter", struck, cleared, mid,
        f"onceflow run SIGKILLed at generation {caught[0]} (fenced up to {caught[1]}) "
        f"going to {rig.tasks} tasks; in the middle of the rollout: {mid}",
    )  # fmt: skip


def _mid_rollout(arena: Arena) -> bool:
    generation, fenced = _generation(arena)
    return fenced < generation


def generation_change(arena: Arena) -> Strike:
    rig = arena.rig
    before, _ = _generation(arena)
    now = time.time()
    rig.set_tasks(_other_task_count(arena))
    rolled = soon(
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
    soon(lambda: rig.driver_pid(job) is not None, 180)
    old = rig.driver_pid(job)
    now = time.time()
    rig.set_trigger(2 if rig.trigger_s == 1 else 1)
    replaced = soon(lambda: rig.driver_pid(job) not in (None, old), 120)
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
    asked during an election, say) counts as missed, its error as its evidence."""
    _whole(arena)
    try:
        return STRIKES[kind](arena)
    except Exception as error:
        now = time.time()
        arena.rig.mend()
        return Strike(kind, "-", now, now, False, f"the strike failed: {error!r}"[:500])
