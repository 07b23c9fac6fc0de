"""The resolvers: every problem at once, named by field, with the reason the status
shows; what is missing elsewhere told apart from what is wrong here."""

from __future__ import annotations

from typing import Any

from onceflow.api import ExactlyOnceMode, KafkaSource, Pipeline
from onceflow.api.connector import SourceConnector
from onceflow.api.driver import SparkJobSettings
from onceflow.api.errors import Problem
from onceflow.api.spark import SparkJob
from onceflow.connectors.sequence import SequenceConnector
from onceflow.logic.resolve import resolve_source, resolve_spark_job
from onceflow.logic.resource_set import ResourceSet
from onceflow.model.tasks import DesiredTasks

WHERE = "in namespace 'ns'"


def _pipeline(mode: str = "enabled") -> Pipeline:
    return Pipeline.model_validate(
        {
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"kafka": {"bootstrapServers": "kafka:9092"}, "exactlyOnce": mode},
        }
    )


def _source(connector: str = "sequence", **config: Any) -> KafkaSource:
    return KafkaSource.model_validate(
        {
            "metadata": {"name": "s", "namespace": "ns"},
            "spec": {
                "pipeline": "p",
                "topic": "t",
                "tasksMax": 2,
                "connector": {"type": connector, "config": config},
            },
        }
    )


def _connectors(name: str) -> SourceConnector:
    if name != "sequence":
        raise LookupError(f"unknown connector {name!r}")
    return SequenceConnector()


def _job(delivery: str = "exactlyOnce", **spec: Any) -> SparkJob:
    return SparkJob.model_validate(
        {
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": {
                "pipeline": "p",
                "input": {"sources": ["s"]},
                "transform": {"sql": "SELECT key, value FROM input"},
                "sink": {"kafka": {"topic": "out", "partitions": 2, "delivery": delivery}},
                "checkpoint": {"path": "/tmp/c"},
                **spec,
            },
        }
    )


def test_a_source_resolves_to_its_tasks_in_the_mode_asked_for() -> None:
    desired = resolve_source(
        _source(streams=2), _pipeline(), _connectors, where=WHERE, mode=ExactlyOnceMode.PREPARING
    )
    assert isinstance(desired, DesiredTasks)
    assert desired.mode is ExactlyOnceMode.PREPARING
    assert desired.task_count == 2


def test_a_source_reports_its_own_problems_and_the_missing_pipeline_together() -> None:
    problems = resolve_source(_source(streams=0), None, _connectors, where=WHERE)
    assert isinstance(problems, list)
    assert [(p.field, p.reason, p.missing_object) for p in problems] == [
        ("spec.connector.config.streams", "InvalidSpec", False),
        ("spec.pipeline", "PipelineNotFound", True),
    ]
    assert str(problems[1]) == (
        "spec.pipeline: no Pipeline 'p' in namespace 'ns'; create it or correct the name"
    )


def test_an_unknown_connector_is_a_problem_of_the_type_field() -> None:
    problems = resolve_source(_source("nosuch"), _pipeline(), _connectors, where=WHERE)
    assert problems == [Problem("spec.connector.type", "unknown connector 'nosuch'")]


def test_a_job_resolves_its_sources_topics() -> None:
    settings = resolve_spark_job(_job(), _pipeline(), {"s": "t"}, where=WHERE)
    assert isinstance(settings, SparkJobSettings)
    assert settings.topics == ["t"]
    assert settings.mode is ExactlyOnceMode.ENABLED


def test_an_at_least_once_sink_is_refused_while_the_rollout_heads_for_exactly_once() -> None:
    """Current mode `disabled`, target `enabled`: the stricter one decides."""
    problems = resolve_spark_job(
        _job("atLeastOnce"),
        _pipeline("enabled"),
        {"s": "t"},
        where=WHERE,
        mode=ExactlyOnceMode.DISABLED,
    )
    assert isinstance(problems, list)
    assert [p.reason for p in problems] == ["AtLeastOnceSink"]


def test_missing_sources_and_secrets_are_missing_objects_not_spec_errors() -> None:
    job = _job(sink={"postgres": {"table": "t", "secretRef": {"name": "pg"}}})
    problems = resolve_spark_job(job, _pipeline(), {}, where=WHERE, secrets={})
    assert isinstance(problems, list)
    assert [(p.field, p.reason) for p in problems] == [
        ("spec.input.sources", "SourceNotFound"),
        ("spec.sink.postgres.secretRef", "SecretNotFound"),
    ]
    assert all(p.missing_object for p in problems)
    assert isinstance(
        resolve_spark_job(job, _pipeline(), {"s": "t"}, where=WHERE), SparkJobSettings
    ), "no Secrets at hand (a pod mounts it): not checked"


def test_a_job_batches_are_bounded_by_default_and_the_sink_timeout_is_its_own() -> None:
    """A first batch over a large backlog must fit in the sink's transaction timeout:
    bounded unless the user says otherwise, and the timeout reaches the driver."""
    settings = resolve_spark_job(_job(), _pipeline(), {"s": "t"}, where=WHERE)
    assert isinstance(settings, SparkJobSettings)
    assert settings.max_offsets_per_trigger == 100_000
    assert settings.sink.kafka is not None
    assert settings.sink.kafka.transaction_timeout_ms == 60_000
    tuned = _job(
        input={"sources": ["s"], "maxOffsetsPerTrigger": 5000},
        sink={"kafka": {"topic": "out", "partitions": 2, "transactionTimeoutMs": 300000}},
    )
    settings = resolve_spark_job(tuned, _pipeline(), {"s": "t"}, where=WHERE)
    assert isinstance(settings, SparkJobSettings)
    assert settings.max_offsets_per_trigger == 5000
    assert settings.sink.kafka is not None
    assert settings.sink.kafka.transaction_timeout_ms == 300_000


def _in(namespace: str, resource: Any) -> Any:
    return resource.model_copy(
        update={"metadata": resource.metadata.model_copy(update={"namespace": namespace})}
    )


def test_a_workload_finds_its_pipeline_and_sources_in_its_own_namespace_only() -> None:
    """Two tenants choosing the same names never resolve to each other's objects (the
    manifests of `onceflow run` used to find Pipelines and sources by name alone)."""
    found = ResourceSet.of([_pipeline(), _source(), _in("other", _job())])
    assert found.pipeline_of(_source()) is not None
    assert found.pipeline_of(_in("other", _job())) is None
    assert found.source_topics(_in("other", _job())) == {}
    assert found.source_topics(_job()) == {"s": "t"}


def test_of_two_objects_of_one_kind_and_name_the_last_counts_as_kubectl_apply_would() -> None:
    renamed = _source().model_copy(
        update={"spec": _source().spec.model_copy(update={"topic": "t2"})}
    )
    assert ResourceSet.of([_source(), renamed]).source_topics(_job()) == {"s": "t2"}
