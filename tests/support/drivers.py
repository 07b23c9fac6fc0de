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
from pathlib import Path

from onceflow.api.spark import SparkJobSettings
from onceflow.spark.job import CHAOS_EXIT_CODE
from tests.support.checkpoint import batch_in_flight
from tests.support.testbed import ROOT, spark_jars


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
            },
        )


def die_between_sink_commit_and_checkpoint(settings: SparkJobSettings, workdir: Path) -> int:
    """Runs a driver that exits right after its first sink commit; returns the batch id
    the sink committed but the checkpoint's commit log does not record."""
    marker = workdir / "exited-after-commit"
    driver = start_driver(
        settings.model_copy(update={"chaos_exit_after_sink_commit": str(marker)}), workdir
    )
    assert driver.wait(300) == CHAOS_EXIT_CODE, driver_log(workdir)
    batch = int(marker.read_text())
    checkpoint = Path(settings.checkpoint_location)
    assert (checkpoint / "offsets" / str(batch)).exists(), "the batch was planned"
    assert not (checkpoint / "commits" / str(batch)).exists(), "the checkpoint recorded it"
    return batch


def kill_drivers(settings: SparkJobSettings, workdir: Path, kills: int, seed: int) -> int:
    """SIGKILLs ``kills`` drivers at random moments; returns how many of the kills
    landed inside a batch (the ones that make the next driver replay it)."""
    rng = random.Random(seed)
    checkpoint = Path(settings.checkpoint_location)
    inside = 0
    for _ in range(kills):
        driver = start_driver(settings, workdir)
        time.sleep(rng.uniform(24.0, 34.0))  # fault timing: first commit comes ~24 s in
        # Then aim: a short batch (the sinks write fast) is rarely hit by chance, so
        # strike when one is planned and not yet committed, if that comes soon. A busy
        # machine's driver can still be starting: 5 s of aiming once missed every time.
        deadline = time.monotonic() + 20
        while not batch_in_flight(checkpoint) and time.monotonic() < deadline:
            time.sleep(0.005)
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
        inside += batch_in_flight(checkpoint)
    return inside
