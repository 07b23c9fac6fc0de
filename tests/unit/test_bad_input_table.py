"""One validation path: every bad input below is refused by `onceflow render`, by
`onceflow run` (before anything starts) and by the admission webhook, each naming the
same field with the same message. The cases start from the newcomer review's bad-input
table (its numbers in the ids) and add the ones found since.

The webhook sees the objects one at a time, as `kubectl apply` sends them, with those
before it already stored: of two objects that clash it refuses the second, where
render and run name both.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from onceflow.api import InvalidResourceError, parse_resources
from onceflow.control.admission import review
from onceflow.render import render_resources
from onceflow.standalone.supervisor import plan_run

Doc = dict[str, Any]
NAMESPACE = "default"


def _pipeline(**spec: Any) -> Doc:
    return {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "orders"},
        "spec": {"kafka": {"bootstrapServers": "kafka:9092"}, "exactlyOnce": "enabled", **spec},
    }


def _source(name: str = "src", **spec: Any) -> Doc:
    return {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "KafkaSource",
        "metadata": {"name": name},
        "spec": {
            "pipeline": "orders",
            "topic": "orders.raw",
            "connector": {"type": "sequence", "config": {"streams": 2}},
            **spec,
        },
    }


def _job(name: str = "agg", **spec: Any) -> Doc:
    return {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "SparkJob",
        "metadata": {"name": name},
        "spec": {
            "pipeline": "orders",
            "input": {"topics": ["orders.raw"]},
            "transform": {"sql": "SELECT key, value FROM input"},
            "sink": {"kafka": {"topic": "orders.out", "partitions": 1}},
            "checkpoint": {"pvc": "agg-checkpoint"},
            **spec,
        },
    }


def _edit(document: Doc, change: Callable[[Doc], None]) -> Doc:
    edited = copy.deepcopy(document)
    change(edited)
    return edited


def _set(path: str, value: Any) -> Callable[[Doc], None]:
    def change(document: Doc) -> None:
        *parents, last = path.split(".")
        node = document
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return change


def _drop(path: str) -> Callable[[Doc], None]:
    def change(document: Doc) -> None:
        *parents, last = path.split(".")
        node = document
        for key in parents:
            node = node[key]
        del node[last]

    return change


SOURCE = _source()
JOB = _job()

# (id, documents, the problem every front door reports: "field: message" or a part)
CASES: list[tuple[str, list[Doc], str]] = [
    (
        "01-typo",
        [_pipeline(), _edit(SOURCE, _set("spec.taskMax", 3))],
        "spec.taskMax: unknown field",
    ),
    (
        "02-not-int",
        [_pipeline(), _source(tasksMax="three")],
        "spec.tasksMax: Input should be a valid integer",
    ),
    (
        "03-negative",
        [_pipeline(), _source(tasksMax=-2)],
        "spec.tasksMax: Input should be greater than or equal to 1",
    ),
    (
        "04-empty-topic",
        [_pipeline(), _source(topic="")],
        "spec.topic: String should have at least 1 character",
    ),
    ("05-topic-chars", [_pipeline(), _source(topic="bad/topic*")], "spec.topic:"),
    (
        "06-huge-tasks",
        [_pipeline(), _source(tasksMax=10**20)],
        "spec.tasksMax: Input should be less than or equal to 1000",
    ),
    (
        "07-long-topic",
        [_pipeline(), _source(topic="t" * 250)],
        "spec.topic: String should have at most 249 characters",
    ),
    (
        "11-sink-is-input",
        [_pipeline(), SOURCE, _job(sink={"kafka": {"topic": "orders.raw", "partitions": 1}})],
        "orders.raw",
    ),
    (
        "12b-offsets-topic",
        [_pipeline(), SOURCE, _source("other", topic="default.orders-src-offsets")],
        "default.orders-src-offsets",
    ),
    ("09-two-writers", [_pipeline(), SOURCE, _source("other")], "orders.raw"),
    (
        "17-unknown-kind",
        [_pipeline(), _edit(SOURCE, _set("kind", "KafkaSink"))],
        "kind: unsupported kind 'KafkaSink'",
    ),
    (
        "18-name-chars",
        [_pipeline(), _edit(SOURCE, _set("metadata.name", "zähler-ß"))],
        "metadata.name:",
    ),
    (
        "19-name-long",
        [_pipeline(), _edit(SOURCE, _set("metadata.name", "n" * 64))],
        "metadata.name:",
    ),
    (
        "21b-password-in-url",
        [
            _pipeline(),
            _source(
                connector={
                    "type": "postgres",
                    "config": {
                        "url": "postgresql://u:secret@db:5432/app",
                        "mode": "cdc",
                        "tables": ["public.t"],
                    },
                }
            ),
        ],
        "spec.connector.config.url: holds a password",
    ),
    (
        "22b-relative-glob",
        [_pipeline(), _source(connector={"type": "files", "config": {"paths": ["data/*.jsonl"]}})],
        "spec.connector.config.paths:",
    ),
    (
        "23-mode",
        [_pipeline(exactlyOnce="maybe")],
        "spec.exactlyOnce: Input should be 'disabled', 'preparing' or 'enabled'",
    ),
    (
        "24-isolation",
        [
            _pipeline(),
            SOURCE,
            _job(sparkConf={"spark.onceflow.kafka.isolation.level": "read_uncommitted"}),
        ],
        "spec.sparkConf",
    ),
    (
        "24b-speculation",
        [_pipeline(), SOURCE, _job(sparkConf={"spark.speculation": "true"})],
        "spec.sparkConf",
    ),
    (
        "25-connector-typo",
        [_pipeline(), _source(connector={"type": "sequnce"})],
        "spec.connector.type: unknown connector 'sequnce'",
    ),
    (
        "26-config-typo",
        [_pipeline(), _source(connector={"type": "sequence", "config": {"stream": 2}})],
        "spec.connector.config.stream: unknown setting",
    ),
    (
        "27-api-version",
        [_pipeline(), _edit(SOURCE, _set("apiVersion", "onceflow.io/v1"))],
        "apiVersion: must be onceflow.io/v1alpha1",
    ),
    (
        "28-name-case",
        [_pipeline(), _edit(SOURCE, _set("metadata.name", "Nfx28_Src"))],
        "metadata.name:",
    ),
    ("29-no-kafka", [_edit(_pipeline(), _drop("spec.kafka"))], "spec.kafka: Field required"),
    ("32-no-name", [_pipeline(), _edit(SOURCE, _drop("metadata.name"))], "metadata"),
    (
        "36-interval",
        [_pipeline(), _source(transactionBoundaryIntervalMs=500)],
        "spec.transactionBoundaryIntervalMs is only valid with transactionBoundary: interval",
    ),
    (
        "39-empty-input-topic",
        [_pipeline(), SOURCE, _job(input={"topics": [""]})],
        "spec.input.topics",
    ),
    ("a1-no-sql-or-module", [_pipeline(), SOURCE, _job(transform={})], "spec.transform"),
    (
        "a2-two-sinks",
        [
            _pipeline(),
            SOURCE,
            _job(
                sink={
                    "kafka": {"topic": "x", "partitions": 1},
                    "files": {"path": "/data/out", "format": "json"},
                }
            ),
        ],
        "spec.sink",
    ),
    ("a3-no-checkpoint", [_pipeline(), SOURCE, _job(checkpoint={})], "spec.checkpoint"),
    (
        "a4-partitions-zero",
        [_pipeline(), SOURCE, _job(sink={"kafka": {"topic": "x", "partitions": 0}})],
        "spec.sink.kafka.partitions",
    ),
    (
        "a5-bootstrap-empty",
        [_edit(_pipeline(), _set("spec.kafka.bootstrapServers", "")), SOURCE],
        "spec.kafka.bootstrapServers",
    ),
    (
        "a6-prefix-long",
        [_pipeline(transactionalIdPrefix="p" * 201), SOURCE],
        "spec.transactionalIdPrefix",
    ),
    (
        "a7-secret-name",
        [_edit(_pipeline(), _set("spec.kafka.authSecretRef", {"name": "Bad_Name"})), SOURCE],
        "spec.kafka.authSecretRef.name",
    ),
    (
        "a8-timeout-small",
        [_pipeline(), _source(transactionTimeoutMs=10)],
        "spec.transactionTimeoutMs",
    ),
    (
        "a9-boundary",
        [_pipeline(), _source(transactionBoundary="sometimes")],
        "spec.transactionBoundary",
    ),
    (
        "a10-support",
        [_pipeline(), _source(exactlyOnceSupport="perhaps")],
        "spec.exactlyOnceSupport",
    ),
    (
        "a11-executors-zero",
        [_pipeline(), SOURCE, _job(executor={"instances": 0})],
        "spec.executor.instances",
    ),
    ("a12-memory", [_pipeline(), SOURCE, _job(driver={"memory": "lots"})], "spec.driver.memory"),
    (
        "a13-trigger",
        [_pipeline(), SOURCE, _job(trigger={"processingTime": "soon"})],
        "spec.trigger",
    ),
    (
        "a14-starting-offsets",
        [
            _pipeline(),
            SOURCE,
            _job(input={"topics": ["orders.raw"], "startingOffsets": "yesterday"}),
        ],
        "spec.input.startingOffsets",
    ),
    (
        "a15-image-mount",
        [
            _pipeline(),
            _source(volumes=[{"name": "v", "mountPath": "/opt/onceflow", "emptyDir": {}}]),
        ],
        "spec.volumes",
    ),
    (
        "a16-sequence-streams",
        [_pipeline(), _source(connector={"type": "sequence", "config": {"streams": 0}})],
        "spec.connector.config.streams",
    ),
    (
        "a17-sink-topic-empty",
        [_pipeline(), SOURCE, _job(sink={"kafka": {"topic": "", "partitions": 1}})],
        "spec.sink.kafka.topic",
    ),
    (
        "a18-files-format",
        [_pipeline(), SOURCE, _job(sink={"files": {"path": "/data/out", "format": "excel"}})],
        "spec.sink.files.format",
    ),
    (
        "a19-postgres-no-table",
        [_pipeline(), SOURCE, _job(sink={"postgres": {"secretRef": {"name": "db"}}})],
        "spec.sink.postgres",
    ),
    (
        "a20-both-inputs",
        [_pipeline(), SOURCE, _job(input={"topics": ["orders.raw"], "sources": ["src"]})],
        "spec.input",
    ),
    ("a21-no-input", [_pipeline(), SOURCE, _job(input={})], "spec.input"),
    (
        "a22-env-name",
        [_pipeline(), SOURCE, _job(env=[{"name": "JAVA_TOOL_OPTIONS", "value": "-Dx=y"}])],
        "spec.env",
    ),
    (
        "a23-conf-smuggle",
        [_pipeline(), SOURCE, _job(sparkConf={"spark.driver.extraJavaOptions=-Dx": "y"})],
        "spec.sparkConf",
    ),
    ("a24-cores-zero", [_pipeline(), SOURCE, _job(driver={"cores": 0})], "spec.driver.cores"),
    (
        "a25-resources",
        [_pipeline(), _source(resources={"limits": {"memory": "lots"}})],
        "spec.resources",
    ),
]


def _problems(error: InvalidResourceError) -> list[str]:
    return [str(problem) for problem in error.problems]


def through_render(documents: list[Doc]) -> list[str]:
    try:
        render_resources(parse_resources(documents))
    except InvalidResourceError as error:
        return _problems(error)
    return []


def through_run(documents: list[Doc], state_dir: Path) -> list[str]:
    try:
        plan_run(documents, None, state_dir)
    except InvalidResourceError as error:
        return _problems(error)
    return []


def through_webhook(documents: list[Doc]) -> list[str]:
    """Each object as `kubectl apply` sends it, the ones before it stored."""
    stored: list[Doc] = []
    refused: list[str] = []
    plurals = {"Pipeline": "pipelines", "KafkaSource": "kafkasources", "SparkJob": "sparkjobs"}

    def lookup(plural: str, namespace: str, name: str) -> Doc | None:
        found = [d for d in stored if plurals.get(d.get("kind", "")) == plural]
        return next((d for d in found if d["metadata"]["name"] == name), None)

    def listing(plural: str, namespace: str) -> list[Doc]:
        return [d for d in stored if plurals.get(d.get("kind", "")) == plural]

    for document in documents:
        incoming = copy.deepcopy(document)
        incoming.setdefault("metadata", {})["namespace"] = NAMESPACE
        verdict = review(incoming, lookup, listing)
        refused += verdict.problems
        if verdict.allowed:
            stored.append(incoming)
    return refused


@pytest.mark.parametrize(
    ("documents", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_every_front_door_refuses_it_naming_the_field(
    documents: list[Doc], expected: str, tmp_path: Path
) -> None:
    doors = {
        "render": through_render(documents),
        "run": through_run(documents, tmp_path / "state"),
        "webhook": through_webhook(documents),
    }
    said = {door: [p for p in problems if expected in p] for door, problems in doors.items()}
    assert all(said.values()), doors
    # The same words everywhere: render and run prefix the resource, the webhook
    # answers for one object, so compare from the field on. Where two objects clash,
    # render and run name both sides and the webhook the side being applied.
    messages = {door: {p[p.index(expected) :] for p in found} for door, found in said.items()}
    assert messages["render"] == messages["run"], messages
    assert messages["webhook"] <= messages["render"], messages


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 50
