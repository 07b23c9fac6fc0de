"""Spark drivers as their own processes (``onceflow spark-job``), and the ways the
tests stop them: between a sink commit and the checkpoint's, or SIGKILLed at random."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from onceflow.api.driver import SparkJobSettings
from onceflow.api.spark import Trigger
from onceflow.spark.job import CHAOS_EXIT_CODE
from tests.support.checkpoint import batch_in_flight, forget_batch, last_batch
from tests.support.proc import kill_process_tree
from tests.support.testbed import ROOT, jvm_writer_jars, spark_jars
from tests.support.waiting import wait_for

SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1"
"""The tests' drivers live for seconds over small inputs: the JIT's first tier alone
starts one to its first committed batch in about 16 s instead of 20 (measured on 2
cores), and 30-odd drivers start per suite. The product's drivers keep the default."""


def driver_log(workdir: Path) -> str:
    """The end of the drivers' shared log, for assertion messages."""
    return (workdir / "driver.log").read_text()[-3000:]


def start_driver(settings: SparkJobSettings, workdir: Path) -> subprocess.Popen[bytes]:
    config = workdir / f"job-{uuid.uuid4().hex[:6]}.json"
    config.write_text(json.dumps(settings.to_wire()))
    with (workdir / "driver.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "onceflow", "spark-job", "--config", str(config)],
            stdout=log,
            stderr=log,
            cwd=ROOT,
            env={
                **os.environ,
                "PYTHONPATH": str(ROOT),
                "ONCEFLOW_SPARK_JARS": str(Path(spark_jars()[0]).parent),
                "ONCEFLOW_WRITER_JARS": str(Path(jvm_writer_jars()[0]).parent),
                "JAVA_TOOL_OPTIONS": SHORT_LIVED_JVM,
            },
        )


DRAIN = Trigger(available_now=True)


def drain(settings: SparkJobSettings, workdir: Path) -> None:
    """A driver run to the end of its input (availableNow), which must exit cleanly."""
    driver = start_driver(settings.model_copy(update={"trigger": DRAIN}), workdir)
    assert driver.wait(300) == 0, driver_log(workdir)


def run_driver_until(
    settings: SparkJobSettings, workdir: Path, done: Callable[[], bool], within_s: float, what: str
) -> None:
    """A driver started, left to run until ``done`` holds, then stopped as its pod would
    be (SIGTERM), whether or not it got there."""
    driver = start_driver(settings, workdir)
    try:
        wait_for(done, within_s, what)
    finally:
        driver.terminate()
        driver.wait(60)


def die_between_sink_commit_and_checkpoint(settings: SparkJobSettings, workdir: Path) -> int:
    """Runs a driver that exits right after its first sink commit; returns the batch id
    the sink committed but the checkpoint's commit log does not record. A marker file
    of its own per call: the drill fires once per file, and a job may be stopped so
    more than once."""
    marker = workdir / f"exited-after-commit-{uuid.uuid4().hex[:6]}"
    driver = start_driver(
        settings.model_copy(update={"chaos_exit_after_sink_commit": str(marker)}), workdir
    )
    assert driver.wait(300) == CHAOS_EXIT_CODE, driver_log(workdir)
    batch = int(marker.read_text())
    checkpoint = Path(settings.checkpoint_location)
    assert (checkpoint / "offsets" / str(batch)).exists(), "the batch was planned"
    assert not (checkpoint / "commits" / str(batch)).exists(), "the checkpoint recorded it"
    return batch


def _wait_for_commits(checkpoint: Path, driver: subprocess.Popen[bytes], target: int) -> None:
    """Until the commit log reaches ``target``; bounded, as a driver that drained its
    input commits nothing more."""
    deadline = time.monotonic() + 120
    while (
        last_batch(checkpoint, "commits") < target
        and driver.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.02)


def kill_drivers(settings: SparkJobSettings, workdir: Path, kills: int, seed: int) -> int:
    """SIGKILLs ``kills`` drivers, each once it has committed batches of its own (a
    random one to three: the fault timing) and then, if one comes soon, inside a batch
    that is planned and not yet committed. Returns how many kills landed inside a batch
    (the ones that make the next driver replay it).

    Waiting on the checkpoint instead of a fixed delay strikes as soon as a driver is
    in its stride, however long its start took: a driver starts in about 20 s on an
    idle machine and much later on a busy one."""
    rng = random.Random(seed)
    checkpoint = Path(settings.checkpoint_location)
    inside = 0
    for _ in range(kills):
        target = last_batch(checkpoint, "commits") + rng.randint(1, 3)
        driver = start_driver(settings, workdir)
        _wait_for_commits(checkpoint, driver, target)
        # Then aim: a short batch (the sinks write fast) is rarely hit by chance.
        deadline = time.monotonic() + 20
        while not batch_in_flight(checkpoint) and time.monotonic() < deadline:
            time.sleep(0.005)
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
        inside += batch_in_flight(checkpoint)
    return inside


def kill_then_rewind_to_sink_commit(
    settings: SparkJobSettings, workdir: Path, last_sink_batch: Callable[[], int]
) -> int:
    """For sinks the drill of ``die_between_sink_commit_and_checkpoint`` cannot reach
    (Spark's own file sink runs no Onceflow code): SIGKILLs a driver once it committed a
    batch of its own, then takes back from the checkpoint what that driver did after
    the sink's last commit, leaving what a driver that died right after it leaves: the
    sink holds batch B, the commit log does not. Returns B.

    ``last_sink_batch``: the newest batch the sink itself says it committed."""
    checkpoint = Path(settings.checkpoint_location)
    target = last_batch(checkpoint, "commits") + 1
    driver = start_driver(settings, workdir)
    _wait_for_commits(checkpoint, driver, target)
    kill_process_tree(driver.pid)
    driver.wait(30)
    assert last_batch(checkpoint, "commits") >= target, driver_log(workdir)
    planned, committed = last_batch(checkpoint, "offsets"), last_batch(checkpoint, "commits")
    sunk = last_sink_batch()
    if planned > committed and sunk < planned:  # planned, not yet in the sink: undone
        forget_batch(checkpoint, "offsets", planned)
        planned = committed
    if planned == committed:  # the sink's commit stands, the checkpoint's is undone
        forget_batch(checkpoint, "commits", committed)
    assert sunk == planned, f"the sink committed batch {sunk}, the checkpoint {committed}"
    return planned
