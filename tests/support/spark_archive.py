"""A class-data-sharing archive of the classes a Spark driver loads as it starts, for
the suite's drivers and sessions.

A driver's JVM spends most of its start loading and verifying Spark's classes: on two
cores a local session took 6.5 s to start and 3.7 s to run its first query; mapped from
this archive, 3.5 s and 1.4 s. The suite starts some seventy drivers. The archive is
JDK 17's dynamic one (``-XX:ArchiveClassesAtExit``), written by one training driver
that starts a session, plans a Kafka stream and runs a checkpointed streaming query
through ``foreachBatch``, as Onceflow's drivers do. It is named by the JDK and pyspark
it was made with and where pyspark is installed; a JVM that cannot use it anyway
warns and loads as usual, so a stale archive slows nothing down and breaks nothing
(tests/testbed/test_spark_archive.py fails then, so that it is seen).

``python -m tests.support.spark_archive`` makes it if absent and prints its path (the
Makefile's ``testbed-deps``); ``spark_submit_options`` is what the suite puts in
``SPARK_SUBMIT_OPTS``, which reaches the driver's JVM and not the launcher's."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.testbed import ROOT, spark_jars

CACHE = Path(os.environ.get("ONCEFLOW_CACHE", Path.home() / ".cache" / "onceflow"))


def archive_path() -> Path:
    """Where the archive for this JDK and this pyspark installation lives (it may not
    exist yet). The JVM maps an archive only under the class path it was made with,
    each jar where it was and as it was (size and modification time), so the key holds
    them all: another checkout's venv, or a venv installed again, gets its own."""
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=True)
    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    stamps = "".join(f"{jar} {jar.stat().st_size} {jar.stat().st_mtime_ns}\n" for jar in jars)
    identity = f"{java.stderr}\n{pyspark.__version__}\n{stamps}"
    key = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return CACHE / "spark-cds" / f"driver-{key}.jsa"


def spark_submit_options() -> str | None:
    """The JVM option mapping the archive, or None while there is none (or no JDK:
    the pure tests run without one)."""
    try:
        archive = archive_path()
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"-XX:SharedArchiveFile={archive}" if archive.exists() else None


def _train() -> None:
    """What a driver loads: run in a JVM that archives its classes when it exits."""
    from onceflow.spark.session import local_session

    session = local_session("onceflow-class-archive")
    with tempfile.TemporaryDirectory() as work:
        (Path(work) / "in").mkdir()
        (Path(work) / "in" / "part.json").write_text('{"key": "k", "value": "v"}\n')
        kafka = (  # planned, never started: the connector's classes, no broker
            session.readStream.format("kafka")
            .option("kafka.bootstrap.servers", "127.0.0.1:1")
            .option("subscribe", "none")
            .load()
        )
        assert kafka.selectExpr("CAST(value AS STRING)").columns == ["value"]
        query = (
            session.readStream.schema("key STRING, value STRING")
            .json(str(Path(work) / "in"))
            .groupBy("key")
            .count()
            .writeStream.outputMode("update")
            .foreachBatch(lambda batch, _: batch.collect())
            .option("checkpointLocation", str(Path(work) / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    gateway_process = session.sparkContext._gateway.proc  # type: ignore[attr-defined]
    session.stop()
    gateway_process.stdin.close()  # the JVM ends on its parent's EOF, writing the archive
    if gateway_process.wait(120) != 0:
        raise SystemExit(f"the training driver's JVM exited {gateway_process.returncode}")


def build() -> Path:
    """Makes the archive unless it exists; returns its path."""
    archive = archive_path()
    if archive.exists():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "ONCEFLOW_SPARK_JARS": str(Path(spark_jars()[0]).parent),
        "SPARK_SUBMIT_OPTS": f"-XX:ArchiveClassesAtExit={partial}",
    }
    subprocess.run(
        [sys.executable, "-m", "tests.support.spark_archive", "--train"],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    if not partial.exists():
        raise RuntimeError(f"the training driver wrote no archive at {partial}")
    # A JVM mapping a malformed archive can crash (SIGBUS), not just fall back: only
    # one a driver mapped with -Xshare:on (which refuses rather than falls back) is
    # put where the drivers look.
    mapped = subprocess.run(
        [sys.executable, "-m", "tests.support.spark_archive", "--map"],
        env={**env, "SPARK_SUBMIT_OPTS": f"-XX:SharedArchiveFile={partial} -Xshare:on"},
        cwd=ROOT,
        check=False,
        capture_output=True,
    )
    if mapped.returncode != 0:
        partial.unlink()
        raise RuntimeError(f"no driver could map the new archive:\n{mapped.stderr[-2000:]!r}")
    partial.rename(archive)  # whole or absent: a driver never maps a half-written one
    _forget_old(archive.parent)
    return archive


KEPT = 3
"""Archives kept (150 MB each): every fresh venv, as each CI clone has, makes its own."""


def _forget_old(directory: Path) -> None:
    """Removes all but the KEPT newest archives; a checkout whose archive went makes
    it again at its next `make testbed-deps`."""
    archives = sorted(directory.glob("driver-*.jsa"), key=lambda p: p.stat().st_mtime)
    for old in archives[:-KEPT]:
        old.unlink(missing_ok=True)


def _map() -> None:
    """A driver's start and first query, nothing more."""
    from onceflow.spark.session import local_session

    assert local_session("onceflow-class-archive-check").range(3).count() == 3


if __name__ == "__main__":
    if sys.argv[1:] == ["--train"]:
        _train()
    elif sys.argv[1:] == ["--map"]:
        _map()
    else:
        print(build())
