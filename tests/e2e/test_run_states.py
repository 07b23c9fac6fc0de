"""spec.state under ``onceflow run``: the state file is the authority the task processes
read, so a pause holds them still in place, a stop ends them and fences their ids,
and resuming goes on in the same generation. Real broker, audited."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from onceflow.eos.audit_reader import read_sequences
from onceflow.eos.consume import end_offsets, read_to_end
from onceflow.logic.audit import audit_sequences
from tests.e2e.test_standalone_run import _manifests
from tests.support.cli import onceflow
from tests.support.kafka import offsets_written
from tests.support.onceflow_run import start_run
from tests.support.waiting import wait_for

pytestmark = pytest.mark.kafka

LIMIT = 4000


def _with_state(text: str, kind: str, state: str) -> str:
    documents = list(yaml.safe_load_all(text))
    for document in documents:
        if document["kind"] == kind:
            document["spec"]["state"] = state
    return yaml.safe_dump_all(documents)


def _counter(bootstrap: str, name: str) -> str:
    """The counter source of ``_manifests``, slower, so that a run outlasts the test."""
    documents = list(yaml.safe_load_all(_manifests(bootstrap, name, tasks_max=2)))
    documents[1]["spec"]["connector"]["config"] |= {"limit": LIMIT, "pollIntervalMs": 50}
    return yaml.safe_dump_all(documents)


def _record(state: Path) -> dict[str, Any]:
    return dict(json.loads((state / "default.counter.json").read_text()))


def _pids(state: Path) -> set[int]:
    path = state / "default.counter.pids.json"
    return set(json.loads(path.read_text()).values()) if path.exists() else set()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] not in ("Z", "X")
    except FileNotFoundError:
        return False


def _quiet(bootstrap: str, topic: str, seconds: float) -> bool:
    before = end_offsets(bootstrap, topic)
    time.sleep(seconds)
    return end_offsets(bootstrap, topic) == before


def test_pause_stop_and_resume_under_run_keep_every_record_exactly_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    name = f"states-{uuid.uuid4().hex[:6]}"
    topic = f"{name}.counts"
    manifest, state, log = tmp_path / "pipeline.yaml", tmp_path / "state", tmp_path / "run.log"
    running = _counter(kafka_bootstrap, name)
    manifest.write_text(running)
    run = start_run(manifest, state, log)
    try:
        wait_for(lambda: offsets_written(kafka_bootstrap, topic) > 300, 60, "the first records")
        tasks = _pids(state)
        assert len(tasks) == 2

        manifest.write_text(_with_state(running, "KafkaSource", "paused"))
        wait_for(lambda: "counter: paused" in log.read_text(), 30, "the pause recorded")
        assert _record(state)["state"] == "paused"
        time.sleep(1)  # tasks read the state file every 250 ms, between transactions
        assert _quiet(kafka_bootstrap, topic, 3), "a paused source kept writing"
        assert _pids(state) == tasks and all(map(_alive, tasks)), "paused tasks stay up"
        assert offsets_written(kafka_bootstrap, topic) < 6 * LIMIT, "paused too late"

        stopped = _with_state(running, "Pipeline", "stopped")
        manifest.write_text(stopped)
        wait_for(lambda: "counter: stopped; offsets kept" in log.read_text(), 60, "stopped")
        record = _record(state)
        assert (record["state"], record["stopFenced"], record["generation"]) == (
            "stopped",
            True,
            1,
        )
        assert not any(map(_alive, tasks)), "no task runs while stopped"
        text = log.read_text()
        assert f"default.{name}/source/counter/0" in text[text.index("counter: stopping") :], (
            "the generation's ids are fenced after the stop"
        )
        assert _quiet(kafka_bootstrap, topic, 2)

        manifest.write_text(running)
        wait_for(lambda: "counter: running again" in log.read_text(), 30, "resumed")
        wait_for(lambda: _exact(kafka_bootstrap, topic), 180, "every record, exactly once")
        assert _record(state)["generation"] == 1, "pausing and stopping keep the generation"
    finally:
        run.send_signal(signal.SIGINT)
        assert run.wait(60) == 0


def _exact(bootstrap: str, topic: str) -> bool:
    if offsets_written(bootstrap, topic) < 6 * LIMIT:
        return False
    pairs, unparsable = read_sequences(bootstrap, topic, key_field="stream", seq_field="seq")
    return audit_sequences(pairs, expect=LIMIT, key_count=6, unparsable=unparsable).ok


def _offsets_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return onceflow("offsets", *args)


def test_offsets_set_while_stopped_replay_exactly_what_was_asked_and_nothing_else(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Stop, list, set stream s0 back to 100 and forget s1, resume: s0 repeats 101 up to
    where it had stopped, s1 starts over, every other stream is exact. A change asked
    of the running source is refused, and changes nothing."""
    name = f"offs-{uuid.uuid4().hex[:6]}"
    topic = f"{name}.counts"
    manifest, state, log = tmp_path / "pipeline.yaml", tmp_path / "state", tmp_path / "run.log"
    running = _counter(kafka_bootstrap, name)
    change = {"id": "replay-s0", "offsets": [
        {"partition": {"stream": "s0"}, "offset": {"seq": 100}},
        {"partition": {"stream": "s1"}, "offset": None},
    ]}  # fmt: skip
    manifest.write_text(_with_change(running, {"id": "too-early", "reset": True}))
    run = start_run(manifest, state, log)
    listing = ("list", "--source", "counter", "-f", str(manifest), "--state-dir", str(state))
    try:
        wait_for(lambda: "offsets change too-early refused" in log.read_text(), 30, "refused")
        wait_for(lambda: offsets_written(kafka_bootstrap, topic) > 1500, 60, "records")
        stopped = _with_state(running, "KafkaSource", "stopped")
        manifest.write_text(stopped)
        wait_for(lambda: "counter: stopped; offsets kept" in log.read_text(), 60, "stopped")
        listed = _offsets_cli(*listing)
        assert listed.returncode == 0, listed.stderr
        at_stop = {
            e["partition"]["stream"]: e["offset"]["seq"] for e in yaml.safe_load(listed.stdout)
        }
        assert sorted(at_stop) == [f"s{i}" for i in range(6)] and at_stop["s0"] > 100, at_stop

        manifest.write_text(_with_change(stopped, change))
        wait_for(lambda: "offsets change replay-s0 applied" in log.read_text(), 60, "applied")
        after = {
            e["partition"]["stream"]: e["offset"]["seq"]
            for e in yaml.safe_load(_offsets_cli(*listing).stdout)
        }
        assert after == {**{k: v for k, v in at_stop.items() if k != "s1"}, "s0": 100}

        manifest.write_text(_with_change(running, change))  # the same id stays: not again
        wait_for(lambda: offsets_written(kafka_bootstrap, topic) >= 6 * LIMIT, 180, "the end")
        wait_for(lambda: _reached_all(kafka_bootstrap, topic), 180, "every stream at the end")
    finally:
        run.send_signal(signal.SIGINT)
        assert run.wait(60) == 0
    assert log.read_text().count("offsets change replay-s0 applied") == 1
    seqs = _sequences(kafka_bootstrap, topic)
    assert seqs["s0"] == [*range(1, at_stop["s0"] + 1), *range(101, LIMIT + 1)]
    assert seqs["s1"] == [*range(1, at_stop["s1"] + 1), *range(1, LIMIT + 1)]
    for stream in ("s2", "s3", "s4", "s5"):
        assert seqs[stream] == list(range(1, LIMIT + 1)), stream


def _with_change(text: str, change: dict[str, Any]) -> str:
    documents = list(yaml.safe_load_all(text))
    for document in documents:
        if document["kind"] == "KafkaSource":
            document["spec"]["offsetsChange"] = change
    return yaml.safe_dump_all(documents)


def _sequences(bootstrap: str, topic: str) -> dict[str, list[int]]:
    pairs, unparsable = read_sequences(bootstrap, topic, key_field="stream", seq_field="seq")
    assert not unparsable
    found: dict[str, list[int]] = {}
    for stream, seq in pairs:
        found.setdefault(stream, []).append(seq)
    return found


def _reached_all(bootstrap: str, topic: str) -> bool:
    seqs = _sequences(bootstrap, topic)
    return len(seqs) == 6 and all(s[-1] == LIMIT for s in seqs.values())


def test_a_stopped_files_source_set_to_a_line_reads_the_file_again_from_there(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    lines = [f"line {n:03d}\n".encode() for n in range(1, 101)]
    (data / "a.log").write_bytes(b"".join(lines))
    name = f"foffs-{uuid.uuid4().hex[:6]}"
    manifest, state, log = tmp_path / "files.yaml", tmp_path / "state", tmp_path / "run.log"
    documents = list(yaml.safe_load_all(_manifests(kafka_bootstrap, name, tasks_max=1)))
    documents[1]["spec"]["connector"] = {
        "type": "files",
        "config": {"paths": [str(data / "*.log")], "scanIntervalMs": 200},
    }
    manifest.write_text(yaml.safe_dump_all(documents))
    topic = f"{name}.counts"
    run = start_run(manifest, state, log)
    listing = ("list", "--source", "counter", "-f", str(manifest), "--state-dir", str(state))
    try:
        wait_for(lambda: offsets_written(kafka_bootstrap, topic) >= 100, 60, "the file copied")
        stopped = _with_state(manifest.read_text(), "KafkaSource", "stopped")
        manifest.write_text(stopped)
        wait_for(lambda: "counter: stopped; offsets kept" in log.read_text(), 60, "stopped")
        (entry,) = yaml.safe_load(_offsets_cli(*listing).stdout)
        assert entry["partition"] == {"file": str(data / "a.log")}
        assert entry["offset"]["position"] == sum(map(len, lines)), entry
        entry["offset"]["position"] = sum(map(len, lines[:50]))  # after line 50
        manifest.write_text(_with_change(stopped, {"id": "from-51", "offsets": [entry]}))
        wait_for(lambda: "offsets change from-51 applied" in log.read_text(), 60, "applied")
        manifest.write_text(_with_state(manifest.read_text(), "KafkaSource", "running"))
        wait_for(lambda: offsets_written(kafka_bootstrap, topic) >= 150, 60, "the replay")
        time.sleep(1)  # anything more would show now
    finally:
        run.send_signal(signal.SIGINT)
        assert run.wait(60) == 0
    values = [m.value() for m in read_to_end(kafka_bootstrap, topic, timeout_s=60)]
    assert values == [line.rstrip(b"\n") for line in [*lines, *lines[50:]]]
