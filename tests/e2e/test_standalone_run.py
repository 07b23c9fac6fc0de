"""``onceflow run`` end to end: re-plan on edit, crash recovery, durable generations."""

from __future__ import annotations

import json
import os
import re
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from onceflow.eos.audit_reader import read_sequences
from onceflow.logic.audit import audit_sequences
from tests.support.kafka import offsets_written
from tests.support.onceflow_run import pipeline_with_source, run_until_refused, start_run
from tests.support.testbed import spark_jars
from tests.support.waiting import wait_for

pytestmark = pytest.mark.kafka

LIMIT = 2000


def _manifests(bootstrap: str, name: str, tasks_max: int, *extra: dict[str, Any]) -> str:
    source = {
        "topic": f"{name}.counts",
        "tasksMax": tasks_max,
        "exactlyOnceSupport": "required",
        "connector": {
            "type": "sequence",
            "config": {"streams": 6, "limit": LIMIT, "batchSize": 20, "pollIntervalMs": 20},
        },
    }
    return yaml.safe_dump_all([*pipeline_with_source(bootstrap, name, "counter", source), *extra])


def _copier(name: str, partitions: int) -> dict[str, Any]:
    return {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "SparkJob",
        "metadata": {"name": "copier"},
        "spec": {
            "pipeline": name,
            "input": {"sources": ["counter"], "maxOffsetsPerTrigger": 3000},
            "transform": {"sql": "SELECT key, value FROM input"},
            "sink": {"kafka": {"topic": f"{name}.copied", "partitions": partitions}},
            "checkpoint": {"pvc": "unused-by-onceflow-run"},
            "trigger": {"processingTime": "1s"},
        },
    }


def _record(state: Path, name: str) -> dict[str, int]:
    path = state / "default.counter.json"
    return json.loads(path.read_text()) if path.exists() else {}


def test_run_replans_on_edit_recovers_crashes_and_survives_restart(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    name = f"run-{uuid.uuid4().hex[:6]}"
    manifest, state, log = tmp_path / "pipeline.yaml", tmp_path / "state", tmp_path / "run.log"
    manifest.write_text(_manifests(kafka_bootstrap, name, tasks_max=3))
    run = start_run(manifest, state, log)
    try:
        wait_for(lambda: "committed" in log.read_text(), 60, "first commits")
        assert _record(state, name)["generation"] == 1

        manifest.write_text(_manifests(kafka_bootstrap, name, tasks_max=2))
        wait_for(
            lambda: _record(state, name).get("fencedGeneration") == 2,
            60,
            "generation 2 to be fenced and recorded",
        )
        wait_for(lambda: "generation 2 running" in log.read_text(), 30, "generation 2 to start")
        text = log.read_text()
        assert f"{name}/source/counter/2" in text, "task 2's id of generation 1 was fenced"
        assert text.index("fenced 3 transactional id(s)") < text.index("generation 2 running")

        pids_file = state / "default.counter.pids.json"
        wait_for(
            lambda: sorted(json.loads(pids_file.read_text())) == ["0", "1"],
            30,
            "the pids of generation 2's two tasks",
        )
        pids = json.loads(pids_file.read_text())
        os.kill(pids["0"], signal.SIGKILL)
        crashed = "task 0 exited -9 (killed by SIGKILL); restarting"
        wait_for(lambda: crashed in log.read_text(), 30, "the crash")
        wait_for(lambda: "g2: task 0 started" in log.read_text(), 30, "the restart")
    finally:
        run.send_signal(signal.SIGINT)
        assert run.wait(60) == 0

    # A new `onceflow run` keeps generation 2: the state is durable.
    rerun = start_run(manifest, state, log)
    try:
        topic = f"{name}.counts"
        wait_for(
            lambda: (
                "generation 2 running 2 task(s)"
                in log.read_text().split("all tasks and drivers stopped")[-1]
            ),
            60,
            "the restarted run to resume generation 2",
        )
        assert _record(state, name)["generation"] == 2

        def finished() -> bool:
            if not _can_be_complete(kafka_bootstrap, topic):
                return False
            pairs, _ = read_sequences(kafka_bootstrap, topic, key_field="stream", seq_field="seq")
            return len(pairs) >= 6 * LIMIT

        wait_for(finished, 180, "all streams to reach the limit", interval_s=1)
    finally:
        rerun.send_signal(signal.SIGINT)
        assert rerun.wait(60) == 0

    pairs, unparsable = read_sequences(kafka_bootstrap, topic, key_field="stream", seq_field="seq")
    report = audit_sequences(pairs, expect=LIMIT, unparsable=unparsable)
    assert report.ok, report
    assert len(report.keys) == 6


def test_run_rejects_bad_manifests_before_any_task_starts(tmp_path: Path) -> None:
    manifest = tmp_path / "bad.yaml"
    docs = yaml.safe_load_all(_manifests("127.0.0.1:9", "bad", 2))
    pipeline, source = list(docs)
    source["spec"]["connector"] = {"type": "sequence", "config": {"streams": 0, "colour": 1}}
    source["spec"]["transactionBoundary"] = "connector"
    manifest.write_text(yaml.safe_dump_all([pipeline, source]))
    state = tmp_path / "state"
    result = run_until_refused(manifest, state)
    assert result.returncode == 1
    assert "spec.connector.config.streams: must be an integer >= 1" in result.stderr
    assert "spec.connector.config.colour: unknown setting" in result.stderr
    assert not state.exists(), "nothing may be written for an invalid manifest"


def _audit(bootstrap: str, topic: str) -> Any:
    pairs, unparsable = read_sequences(bootstrap, topic, key_field="stream", seq_field="seq")
    return audit_sequences(pairs, expect=LIMIT, key_count=6, unparsable=unparsable)


def _can_be_complete(bootstrap: str, topic: str) -> bool:
    """Whether the topic's end offsets leave room for every stream's LIMIT records (a
    record takes an offset): asked before a poll reads the whole topic, which read
    every quarter second took a core from the run being waited for."""
    return offsets_written(bootstrap, topic) >= 6 * LIMIT


def _exact(bootstrap: str, topic: str) -> bool:
    """Every stream's numbers 1..LIMIT, once each, in order."""
    return _can_be_complete(bootstrap, topic) and _audit(bootstrap, topic).ok


def _reached(bootstrap: str, topic: str) -> bool:
    """All six streams have reached LIMIT (duplicates allowed)."""
    if not _can_be_complete(bootstrap, topic):
        return False
    keys = _audit(bootstrap, topic).keys
    return len(keys) == 6 and all(k.highest == LIMIT for k in keys)


@pytest.mark.spark
def test_run_copies_a_source_through_a_spark_job_exactly_once_across_a_driver_kill(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    name = f"spark-{uuid.uuid4().hex[:6]}"
    manifest, state, log = tmp_path / "pipeline.yaml", tmp_path / "state", tmp_path / "run.log"
    manifest.write_text(_manifests(kafka_bootstrap, name, 2, _copier(name, partitions=2)))
    jars = str(Path(spark_jars()[0]).parent)
    run = start_run(manifest, state, log, ONCEFLOW_SPARK_JARS=jars)
    copied = f"{name}.copied"
    try:

        def some_copied() -> bool:
            try:
                return (
                    offsets_written(kafka_bootstrap, copied) > 0
                    and _audit(kafka_bootstrap, copied).records > 0
                )
            except LookupError:  # the sink creates the topic with its first batch
                return False

        wait_for(some_copied, 180, "a first copied batch")
        pids = json.loads((state / "default.copier.pids.json").read_text())
        os.kill(pids["driver"], signal.SIGKILL)
        wait_for(
            lambda: "copier: driver exited -9 (killed by SIGKILL); restarting" in log.read_text(),
            30,
            "the restart",
        )
        wait_for(lambda: _exact(kafka_bootstrap, copied), 240, "every record copied")

        # Re-partitioning the sink fences the old partitions' ids before a new driver runs.
        manifest.write_text(_manifests(kafka_bootstrap, name, 2, _copier(name, partitions=3)))
        wait_for(
            lambda: "copier: sink partitions 2 -> 3: fenced 2" in log.read_text(),
            60,
            "the old sink ids fenced",
        )

        def new_driver_after_fencing() -> bool:
            text = log.read_text()
            return text.rfind("copier: driver started") > text.index("sink partitions 2 -> 3")

        wait_for(new_driver_after_fencing, 30, "the new driver, started after the fencing")
    finally:
        run.send_signal(signal.SIGINT)
        assert run.wait(60) == 0
    checkpoint = state / "default.copier.checkpoint"
    assert (checkpoint / "offsets").is_dir(), "the checkpoint lives in the state directory"


def _pids(state: Path) -> dict[str, int]:
    path = state / "default.counter.pids.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_run_survives_its_own_crash_without_a_second_writer(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """One supervisor per state dir; a task stopped from outside comes back; children
    die with a SIGKILLed supervisor, and one that could not (paused) is stopped by the
    next run before that run starts anything."""
    name = f"crash-{uuid.uuid4().hex[:6]}"
    manifest, state, log = tmp_path / "pipeline.yaml", tmp_path / "state", tmp_path / "run.log"
    manifest.write_text(_manifests(kafka_bootstrap, name, tasks_max=3))
    first = start_run(manifest, state, log)
    wait_for(lambda: len(_pids(state)) == 3, 60, "three task pids")

    second = run_until_refused(manifest, state)
    assert second.returncode == 1 and "another onceflow run" in second.stderr, second

    # A task signalled while it still imports dies of the signal (-15, also restarted):
    # the clean stop asked for here needs its handler, in place once it commits.
    committing = re.compile(r"counter task 0 pid \d+: [1-9]\d* committed")
    wait_for(lambda: committing.search(log.read_text()), 60, "task 0 committing")
    os.kill(_pids(state)["0"], signal.SIGTERM)
    wait_for(lambda: "task 0 exited 0 while current" in log.read_text(), 30, "the clean exit")
    wait_for(lambda: log.read_text().count("g1: task 0 started") == 1, 30, "task 0's restart")

    paused = _pids(state)["1"]
    others = [pid for task, pid in _pids(state).items() if task != "1"]
    os.kill(paused, signal.SIGSTOP)  # a zombie: its death signal waits until it resumes
    first.kill()
    first.wait(30)
    wait_for(lambda: all(_gone(pid) for pid in others), 30, "children to die with the run")
    assert not _gone(paused), "the paused task is the survivor this test needs"

    rerun = start_run(manifest, state, log)
    try:
        wait_for(lambda: _gone(paused), 60, "the next run to stop the survivor")
        text = log.read_text()
        assert f"pid {paused} outlived its supervisor" in text
        wait_for(
            lambda: "running 3 task(s)" in log.read_text().split("outlived its supervisor")[-1],
            60,
            "the next run to start its tasks after that",
        )
        wait_for(lambda: _exact(kafka_bootstrap, f"{name}.counts"), 180, "every record")
    finally:
        rerun.send_signal(signal.SIGINT)
        assert rerun.wait(60) == 0
