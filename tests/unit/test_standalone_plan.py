"""How ``onceflow run`` turns manifests into task and driver settings, before anything runs."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from onceflow.api import InvalidResourceError
from onceflow.logic.tenant_policy import DEFAULT_POLICY, TenantPolicy
from onceflow.manifest_files import ManifestSources
from onceflow.standalone.supervisor import SourceSupervisor, plan_run


def _resource(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def _documents(sink: dict[str, Any], *extra: dict[str, Any], sources: Any = None) -> list[Any]:
    pipeline = _resource(
        "Pipeline", "p", {"kafka": {"bootstrapServers": "kafka:9092"}, "exactlyOnce": "enabled"}
    )
    connector = {"type": "sequence", "config": {"streams": 2}}
    source = _resource(
        "KafkaSource", "counter", {"pipeline": "p", "topic": "counts", "connector": connector}
    )
    job = _resource(
        "SparkJob",
        "copier",
        {
            "pipeline": "p",
            "input": {"sources": sources or ["counter"]},
            "transform": {"sql": "SELECT key, value FROM input"},
            "sink": sink,
            "checkpoint": {"pvc": "copier-checkpoint"},
        },
    )
    return [pipeline, source, job, *extra]


def _plan(
    tmp_path: Path,
    documents: list[Any],
    bootstrap: str | None = None,
    policy: TenantPolicy = DEFAULT_POLICY,
) -> Any:
    manifest = tmp_path / "pipeline.yaml"
    manifest.write_text(yaml.safe_dump_all(documents))
    sources = ManifestSources((str(manifest),))
    return plan_run(sources.documents(), bootstrap, tmp_path / "state", policy)


def test_a_spark_job_reads_its_source_topic_committed_and_checkpoints_in_the_state_dir(
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path, _documents({"kafka": {"topic": "out", "partitions": 3}}), "127.0.0.1:1")
    (job,) = plan.spark_jobs
    assert job.settings.topics == ["counts"]
    assert job.settings.isolation_level == "read_committed"
    assert job.settings.bootstrap_servers == "127.0.0.1:1"
    assert job.settings.checkpoint_location == str(
        (tmp_path / "state").resolve() / "default.copier.checkpoint"
    )
    assert not (tmp_path / "state").exists(), "planning writes nothing"


def test_a_postgres_sink_takes_its_dsn_from_a_secret_in_the_same_files(tmp_path: Path) -> None:
    sink = {"postgres": {"table": "t", "secretRef": {"name": "pg"}}}
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "pg"},
        "stringData": {"dsn": "host=127.0.0.1 dbname=x"},
    }
    (job,) = _plan(tmp_path, _documents(sink, secret)).spark_jobs
    assert job.dsn == "host=127.0.0.1 dbname=x"
    assert job.settings.postgres_dsn_file.endswith("default.copier.dsn")


@pytest.mark.parametrize(
    ("sink", "sources", "message"),
    [
        (
            {"kafka": {"topic": "out", "partitions": 2, "delivery": "atLeastOnce"}},
            None,
            "spec.sink.kafka.delivery: atLeastOnce (Spark's built-in Kafka sink) cannot be "
            "exactly-once while Pipeline 'p' is enabled",
        ),
        (
            {"kafka": {"topic": "out", "partitions": 2}},
            ["counter", "ghost"],
            "spec.input.sources: no KafkaSource 'ghost' in the given manifests",
        ),
        (
            {"postgres": {"table": "t", "secretRef": {"name": "pg"}}},
            None,
            "spec.sink.postgres.secretRef: no Secret 'pg' with key 'dsn' in the given manifests",
        ),
    ],
)
def test_a_spark_job_that_cannot_run_is_refused_with_the_field_and_the_fix(
    tmp_path: Path, sink: dict[str, Any], sources: Any, message: str
) -> None:
    with pytest.raises(InvalidResourceError) as refused:
        _plan(tmp_path, _documents(sink, sources=sources))
    assert message in str(refused.value)
    assert "SparkJob 'copier'" in str(refused.value)


def test_a_transform_config_map_comes_from_the_same_files(tmp_path: Path) -> None:
    documents = _documents({"kafka": {"topic": "out", "partitions": 2}})
    documents[2]["spec"]["transform"] = {"module": "shape", "configMap": "code"}
    with pytest.raises(InvalidResourceError) as refused:
        _plan(tmp_path, documents)
    assert "spec.transform.configMap: no ConfigMap 'code' in the given manifests" in str(
        refused.value
    )
    code = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "code"},
        "data": {"shape.py": "def transform(frame):\n    return frame\n"},
    }
    (job,) = _plan(tmp_path, [*documents, code]).spark_jobs
    assert job.transform_files == code["data"]
    assert job.settings.transform_dir.endswith("default.copier.transform")
    assert job.settings.metrics_port == 0, "drivers of one run share the machine's ports"


def test_a_connector_secret_must_be_in_the_same_files(tmp_path: Path) -> None:
    documents = _documents({"kafka": {"topic": "out", "partitions": 2}})
    documents[1]["spec"]["connector"]["secretRef"] = {"name": "source-auth"}
    with pytest.raises(InvalidResourceError) as refused:
        _plan(tmp_path, documents)
    assert "KafkaSource 'counter': spec.connector.secretRef: no Secret 'source-auth'" in str(
        refused.value
    )
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "source-auth"},
        "stringData": {"sasl.password": "pw"},
    }
    plan = _plan(tmp_path, [*documents, secret])
    assert plan.secrets["source-auth"] == {"sasl.password": "pw"}

    secret["stringData"] = {"../escape": "pw"}
    with pytest.raises(InvalidResourceError) as refused:
        _plan(tmp_path, [*documents, secret])
    assert "key '../escape' is not a valid Secret key" in str(refused.value)


def test_onceflow_run_hands_the_connector_secret_to_each_generation_as_private_files(
    tmp_path: Path,
) -> None:
    documents = _documents({"kafka": {"topic": "out", "partitions": 2}})
    documents[1]["spec"]["connector"]["secretRef"] = {"name": "source-auth"}
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "source-auth"},
        "stringData": {"sasl.password": "pw", "sasl.username": "u"},
    }
    plan = _plan(tmp_path, [*documents, secret])
    state = tmp_path / "state"
    state.mkdir()
    supervisor = SourceSupervisor(plan.sources[0], state, print, secrets=plan.secrets)
    stem = supervisor.state_file.with_suffix("")
    first = supervisor._write_connector_secret(stem, 3)
    assert first is not None
    assert stat.S_IMODE(first.stat().st_mode) == 0o700
    assert {p.name: (p.read_text(), stat.S_IMODE(p.stat().st_mode)) for p in first.iterdir()} == {
        "sasl.password": ("pw", 0o600),
        "sasl.username": ("u", 0o600),
    }
    second = supervisor._write_connector_secret(stem, 4)
    assert second is not None and second.exists() and not first.exists()
    supervisor.stop_tasks()
    assert not second.exists(), "nothing of the Secret is left behind"


def test_each_namespace_runs_against_its_own_pipeline(tmp_path: Path) -> None:
    """A Pipeline of one name in two namespaces: each source takes its own namespace's
    (cluster, prefix), and neither collides with the other."""
    documents = []
    for namespace, bootstrap in (("team-a", "kafka-a:9092"), ("team-b", "kafka-b:9092")):
        for document in _documents({"kafka": {"topic": "out", "partitions": 2}}):
            document["metadata"]["namespace"] = namespace
            documents.append(document)
        documents[-3]["spec"]["kafka"]["bootstrapServers"] = bootstrap
        documents[-3]["spec"]["transactionalIdPrefix"] = "shared"
    # A prefix outside the namespace, as a platform admin may allow (run refuses it by
    # default, as the operator does).
    any_prefix = TenantPolicy(any_prefix=True)
    plan = _plan(tmp_path, documents, policy=any_prefix)
    assert {(d.source.metadata.namespace, d.bootstrap_servers) for d in plan.sources} == {
        ("team-a", "kafka-a:9092"),
        ("team-b", "kafka-b:9092"),
    }
    with pytest.raises(InvalidResourceError) as refused:
        _plan(tmp_path, documents, bootstrap="127.0.0.1:9092", policy=any_prefix)
    assert (
        "Pipeline 'p' in namespace 'team-a': spec.transactionalIdPrefix: 'shared' is also the "
        "transactional-id prefix of a Pipeline of another namespace on this Kafka cluster"
    ) in str(refused.value), "one broker for both (--bootstrap): the prefixes now collide"
