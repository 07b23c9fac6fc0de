"""Which writer runs the exactly-once Kafka sink's executor half, and where a driver
finds the JVM one: the setting from the SparkJob to the driver's settings (operator and
``onceflow run`` alike), and the writer's jar on a local session's classpath."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError
from pyspark import __version__ as pyspark_version

from onceflow.api import Pipeline
from onceflow.api.driver import SparkJobSettings
from onceflow.api.pipeline import ExactlyOnceMode
from onceflow.api.spark import SparkJob
from onceflow.model.spark_app import SETTINGS_DIGEST_CONF, job_configmap, job_settings, spark_conf
from onceflow.spark import jvm_writer, session
from onceflow.standalone.spark_jobs import PlannedSparkJob, plan_spark_job
from tests.support.testbed import ROOT

WRITER_JAR = "onceflow-spark-kafka-1.jar"


def _job(**spec: Any) -> SparkJob:
    return SparkJob.model_validate(
        {
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": {
                "pipeline": "p",
                "input": {"topics": ["in"]},
                "transform": {"sql": "SELECT key, value FROM input"},
                "sink": {"kafka": {"topic": "out", "partitions": 2}},
                "checkpoint": {"path": "/tmp/c"},
                **spec,
            },
        }
    )


PIPELINE = Pipeline.model_validate(
    {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"kafka": {"bootstrapServers": "kafka:9092"}, "exactlyOnce": "enabled"},
    }
)


def _settings(job: SparkJob) -> SparkJobSettings:
    return job_settings(job, PIPELINE, ExactlyOnceMode.ENABLED, {})


def test_the_jvm_writer_is_the_default_on_the_wire_as_kafka_sink_writer() -> None:
    settings = _settings(_job())
    assert settings.kafka_sink_writer == "jvm"
    wire = settings.to_wire()
    assert wire["kafkaSinkWriter"] == "jvm"
    # A settings file written before the setting existed starts the JVM writer too.
    del wire["kafkaSinkWriter"]
    assert SparkJobSettings.model_validate(wire).kafka_sink_writer == "jvm"
    python = SparkJobSettings.model_validate({**wire, "kafkaSinkWriter": "python"})
    assert python.kafka_sink_writer == "python"
    with pytest.raises(ValidationError, match="kafkaSinkWriter"):
        SparkJobSettings.model_validate({**wire, "kafkaSinkWriter": "scala"})


def test_a_job_rolls_back_to_the_python_writer_by_its_spec_which_restarts_its_driver() -> None:
    jvm, python = _job(), _job(kafkaSinkWriter="python")
    assert jvm.spec.kafka_sink_writer is None, "unset: the operator's default, not stored"
    assert _settings(python).kafka_sink_writer == "python"
    told = json.loads(job_configmap(python, _settings(python))["data"]["job.json"])
    assert told["kafkaSinkWriter"] == "python"
    digests = {spark_conf(job, _settings(job))[SETTINGS_DIGEST_CONF] for job in (jvm, python)}
    assert len(digests) == 2, "a changed writer is a changed driver: it restarts"


def test_onceflow_run_plans_the_writer_the_job_asks_for(tmp_path: Path) -> None:
    for spec, writer in (({}, "jvm"), ({"kafkaSinkWriter": "python"}, "python")):
        planned = plan_spark_job(
            _job(**spec), PIPELINE, {}, {}, {}, bootstrap_override=None, state_dir=tmp_path
        )
        assert isinstance(planned, PlannedSparkJob), planned
        assert planned.settings.kafka_sink_writer == writer


def test_only_a_kafka_sink_has_a_writer_to_choose() -> None:
    with pytest.raises(ValidationError, match=r"spec.kafkaSinkWriter: only spec.sink.kafka"):
        _job(kafkaSinkWriter="python", sink={"files": {"path": "/out"}})


def test_a_driver_without_the_jvm_writer_is_told_how_to_get_it() -> None:
    from py4j.protocol import Py4JJavaError

    def for_name(name: str, initialize: bool, loader: object) -> None:
        assert (name, initialize, loader) == (jvm_writer.PROVIDER_CLASS, False, "context")
        raise Py4JJavaError("ClassNotFoundException", SimpleNamespace(_target_id="o1"))

    thread = SimpleNamespace(getContextClassLoader=lambda: "context")
    lang = SimpleNamespace(
        Thread=SimpleNamespace(currentThread=lambda: thread),
        Class=SimpleNamespace(forName=for_name),
    )
    spark = SimpleNamespace(
        sparkContext=SimpleNamespace(_jvm=SimpleNamespace(java=SimpleNamespace(lang=lang)))
    )
    with pytest.raises(jvm_writer.JvmWriterMissingError) as refused:
        jvm_writer.require_jvm_writer(spark)
    for advice in ("make jvm-writer", "ONCEFLOW_WRITER_JARS", "kafkaSinkWriter: python"):
        assert advice in str(refused.value)


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """Spark's own jars, a configured directory and the build cache, all empty."""
    found = SimpleNamespace(
        spark=tmp_path / "spark-jars",
        configured=tmp_path / "configured",
        cache=tmp_path / "cache",
    )
    for directory in vars(found).values():
        directory.mkdir()
    monkeypatch.setattr(session, "spark_own_jars", lambda: found.spark)
    monkeypatch.setattr(session, "CACHE", found.cache)
    monkeypatch.delenv("ONCEFLOW_WRITER_JARS", raising=False)
    return found


def _jar(directory: Path) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / WRITER_JAR).write_bytes(b"jar")
    return str(directory / WRITER_JAR)


def test_the_writer_jar_is_spark_own_then_configured_then_built_from_this_checkout(
    places: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = session.writer_cache()
    assert cache is not None and cache.parent.parent == places.cache / "jvm-writer"
    assert session.writer_jars() == [], "not built: a driver that needs it refuses to start"
    # Built by make jvm-writer from other sources (before an edit): never taken.
    _jar(places.cache / "jvm-writer" / f"{pyspark_version}-0123456789ab" / "libs")
    assert session.writer_jars() == []
    built = _jar(cache)
    assert session.writer_jars() == [built]
    configured = _jar(places.configured)
    monkeypatch.setenv("ONCEFLOW_WRITER_JARS", str(places.configured))
    assert session.writer_jars() == [configured]
    _jar(places.spark)  # the image: Spark has it, the session adds nothing
    assert session.writer_jars() == []


def test_a_configured_directory_without_the_jar_is_an_error(
    places: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    _jar(session.writer_cache() or places.cache)
    monkeypatch.setenv("ONCEFLOW_WRITER_JARS", str(places.configured))
    with pytest.raises(FileNotFoundError, match="make jvm-writer"):
        session.writer_jars()


def test_without_the_writer_sources_only_spark_or_the_configured_directory_has_it(
    places: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session, "WRITER_SOURCES", places.configured / "absent")
    assert session.writer_cache() is None
    assert session.writer_jars() == []


def test_the_jar_is_looked_for_where_the_build_script_puts_it(tmp_path: Path) -> None:
    """``scripts/jvm-writer.sh dir`` and ``writer_cache`` hash the same sources the
    same way: a session finds what ``make jvm-writer`` built, and nothing older."""
    printed = subprocess.run(
        ["bash", str(ROOT / "scripts" / "jvm-writer.sh"), "dir"],
        capture_output=True,
        text=True,
        check=True,
        env={
            **os.environ,
            "ONCEFLOW_CACHE": str(session.CACHE),
            "SPARK_VERSION": pyspark_version,
            "PYTHON": sys.executable,
        },
    )
    assert Path(printed.stdout.strip()) == session.writer_cache()
