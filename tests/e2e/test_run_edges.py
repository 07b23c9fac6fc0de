"""``onceflow run`` at the edges of a pipeline's life, black-box: a manifest, an edit or
a crash between runs, then an audit of what reached Kafka."""

from __future__ import annotations

import shutil
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from onceflow.eos.offsets import offset_key, offset_value
from onceflow.eos.writer import TransactionalWriter
from tests.e2e.test_standalone_run import LIMIT, _audit, _copier, _exact, _manifests, _reached
from tests.support.kafka import offsets_written
from tests.support.onceflow_run import start_run
from tests.support.testbed import spark_jars
from tests.support.waiting import wait_for

pytestmark = pytest.mark.kafka


def _edited(text: str, edit: Any) -> str:
    documents = list(yaml.safe_load_all(text))
    edit(documents)
    return yaml.safe_dump_all(documents)


def _committed(log: Path) -> int:
    return log.read_text().count("committed")


def test_renaming_the_prefix_fences_the_old_ids_and_keeps_the_offsets(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """transactionalIdPrefix changes mid-run: the default offsets topic changes with it.
    The new generation must resume from the old topic's offsets, not from 1."""
    name = f"rename-{uuid.uuid4().hex[:6]}"
    manifest, state, log = tmp_path / "pipeline.yaml", tmp_path / "state", tmp_path / "run.log"
    manifest.write_text(_manifests(kafka_bootstrap, name, tasks_max=2))
    run = start_run(manifest, state, log)
    try:
        wait_for(lambda: "offsets s" in log.read_text(), 60, "the first commits")

        def rename(documents: list[dict[str, Any]]) -> None:
            # Within its namespace, as the operator (and so run) requires of a prefix.
            documents[0]["spec"]["transactionalIdPrefix"] = f"default.{name}-v2"

        manifest.write_text(_edited(manifest.read_text(), rename))
        wait_for(lambda: "generation 2 running" in log.read_text(), 60, "generation 2")
        text = log.read_text()
        assert f"default.{name}/source/counter/0" in text, "the old prefix's ids were fenced"
        assert f"default.{name}-counter-offsets to default.{name}-v2-counter-offsets" in text
        wait_for(lambda: _exact(kafka_bootstrap, f"{name}.counts"), 180, "every record")
    finally:
        run.send_signal(signal.SIGINT)
        assert run.wait(60) == 0


def test_switching_to_disabled_never_resumes_from_an_aborted_offset(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A run in `enabled` stops; its offsets topic then holds an aborted transaction with
    higher offsets (a task fenced mid-commit). The manifest goes to `disabled` and the
    run resumes: every stream must still read 1..LIMIT (duplicates are at-least-once's
    right, gaps are nobody's)."""
    name = f"downgrade-{uuid.uuid4().hex[:6]}"
    manifest, state, log = tmp_path / "pipeline.yaml", tmp_path / "state", tmp_path / "run.log"
    manifest.write_text(_manifests(kafka_bootstrap, name, tasks_max=2))
    run = start_run(manifest, state, log)
    wait_for(lambda: "offsets s" in log.read_text(), 60, "the first commits")
    run.send_signal(signal.SIGINT)
    assert run.wait(60) == 0

    offsets_topic = f"default.{name}-counter-offsets"
    writer = TransactionalWriter(kafka_bootstrap, f"{name}-killed-mid-commit")
    writer.initialize()
    writer.begin()
    for stream in (f"s{i}" for i in range(6)):
        for owner in ("default/counter", "counter"):  # this layout and the one before it
            key = offset_key(owner, {"stream": stream})
            writer.send(offsets_topic, key, offset_value({"seq": LIMIT - 100}))
    writer.producer.flush(30)
    writer.abort()
    writer.close()

    def disable(documents: list[dict[str, Any]]) -> None:
        documents[0]["spec"]["exactlyOnce"] = "disabled"

    manifest.write_text(_edited(manifest.read_text(), disable))
    rerun = start_run(manifest, state, log)
    try:
        wait_for(
            lambda: _reached(kafka_bootstrap, f"{name}.counts"), 180, "every stream to the limit"
        )
    finally:
        rerun.send_signal(signal.SIGINT)
        assert rerun.wait(60) == 0
    assert _audit(kafka_bootstrap, f"{name}.counts").missing == 0


@pytest.mark.spark
def test_a_lost_checkpoint_never_drops_what_the_source_writes_next(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The copier's checkpoint is deleted between two runs (a lost PVC) and the job comes
    back with larger batches while the source goes on: the new query's batch ids restart
    at 0, its batch 0 now holds records no batch 0 ever held, and must not be skipped."""
    name = f"ckpt-{uuid.uuid4().hex[:6]}"
    manifest, state, log = tmp_path / "pipeline.yaml", tmp_path / "state", tmp_path / "run.log"
    manifest.write_text(_manifests(kafka_bootstrap, name, 2, _copier(name, partitions=2)))
    jars = str(Path(spark_jars()[0]).parent)
    copied = f"{name}.copied"

    def copied_records() -> int:
        try:  # the end offsets first: a whole-topic read per poll starves the run
            if offsets_written(kafka_bootstrap, copied) < 6000:
                return 0
            return int(_audit(kafka_bootstrap, copied).records)
        except LookupError:  # the sink creates the topic with its first batch
            return 0

    run = start_run(manifest, state, log, ONCEFLOW_SPARK_JARS=jars)
    try:
        wait_for(lambda: copied_records() >= 6000, 180, "two copied batches")
    finally:
        run.send_signal(signal.SIGINT)
        assert run.wait(120) == 0
    checkpoint = state / "default.copier.checkpoint"
    assert (checkpoint / "commits" / "1").exists()
    shutil.rmtree(checkpoint)

    def larger_batches(documents: list[dict[str, Any]]) -> None:
        documents[2]["spec"]["input"]["maxOffsetsPerTrigger"] = 1_000_000

    manifest.write_text(_edited(manifest.read_text(), larger_batches))

    rerun = start_run(manifest, state, log, ONCEFLOW_SPARK_JARS=jars)
    try:
        wait_for(lambda: _exact(kafka_bootstrap, f"{name}.counts"), 240, "the source")
        wait_for(lambda: _reached(kafka_bootstrap, copied), 240, "every stream copied to the end")
    finally:
        rerun.send_signal(signal.SIGINT)
        assert rerun.wait(120) == 0
    report = _audit(kafka_bootstrap, copied)
    assert report.missing == 0, report


@pytest.mark.spark
def test_going_up_switches_the_consumer_before_any_producer_goes_transactional(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """disabled -> enabled in one edit: the copier still reads uncommitted, so it must be
    stopped (and restarted reading committed) before the source's transactional
    generation is even planned."""
    name = f"order-{uuid.uuid4().hex[:6]}"
    manifest, state, log = tmp_path / "pipeline.yaml", tmp_path / "state", tmp_path / "run.log"

    def disabled(documents: list[dict[str, Any]]) -> None:
        documents[0]["spec"]["exactlyOnce"] = "disabled"

    manifest.write_text(
        _edited(_manifests(kafka_bootstrap, name, 2, _copier(name, partitions=2)), disabled)
    )
    jars = str(Path(spark_jars()[0]).parent)
    run = start_run(manifest, state, log, ONCEFLOW_SPARK_JARS=jars)
    try:
        wait_for(lambda: "isolation read_uncommitted" in log.read_text(), 60, "the driver")

        def enabled(documents: list[dict[str, Any]]) -> None:
            documents[0]["spec"]["exactlyOnce"] = "enabled"

        manifest.write_text(_edited(manifest.read_text(), enabled))
        wait_for(lambda: "generation 2 running" in log.read_text(), 90, "generation 2")
        text = log.read_text()
        stopped = text.index("copier: settings changed; stopping the driver")
        assert stopped < text.index("counter: generation 2 planned"), text
        assert text.index("isolation read_committed") < text.index("generation 2 running")
    finally:
        run.send_signal(signal.SIGINT)
        assert run.wait(120) == 0
