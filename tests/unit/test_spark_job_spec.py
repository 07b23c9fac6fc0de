"""SparkJob fields a Spark user writes: the columns of view `input`, output modes
against sinks, watermark and dedup columns, triggers, transform ConfigMaps, and the
query progress the status shows."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY
from pydantic import ValidationError

from onceflow.api import parse_resources
from onceflow.api.columns import schema_fields
from onceflow.api.spark import SparkJob, SparkJobSpec
from onceflow.logic.query_progress import PROGRESS_ANNOTATION, driver_progress, query_progress
from onceflow.logic.resolve import transform_code_problem
from onceflow.render import render_resources
from onceflow.spark.progress import PodAnnotator, export
from tests.support.testbed import ROOT

KAFKA = {"kafka": {"topic": "out", "partitions": 2}}
POSTGRES = {"postgres": {"table": "t", "secretRef": {"name": "db"}}}
FILES = {"files": {"path": "/out"}}


def _spec(**fields: Any) -> SparkJobSpec:
    wire = {
        "pipeline": "p",
        "input": {"topics": ["in"]},
        "transform": {"sql": "SELECT key, value FROM input"},
        "sink": KAFKA,
        "checkpoint": {"path": "/cp"},
        **fields,
    }
    return SparkJobSpec.model_validate(wire)


def _refusal(**fields: Any) -> str:
    with pytest.raises(ValidationError) as error:
        _spec(**fields)
    return str(error.value)


def test_schema_fields_are_read_at_the_top_level_only() -> None:
    ddl = (
        "id STRING, `odd name` DECIMAL(10, 2) NOT NULL, tags MAP<STRING, ARRAY<INT>>, "
        "ts: timestamp COMMENT 'a, b'"
    )
    assert schema_fields(ddl) == {
        "id": "string",
        "odd name": "decimal(10,2)",
        "tags": "map<string,array<int>>",
        "ts": "timestamp",
    }
    for bad in ("id", "id STRING,", "a INT, a INT", "x MAP<STRING, INT"):
        with pytest.raises(ValueError):
            schema_fields(bad)


@pytest.mark.parametrize(
    ("mode", "sink", "refused"),
    [
        ("complete", KAFKA, "complete rewrites the whole result table"),
        ("complete", {"postgres": {**POSTGRES["postgres"], "key": ["k"]}}, "keep rows that left"),
        ("update", FILES, "spec.sink.files appends files"),
        ("complete", FILES, "spec.sink.files appends files"),
        ("update", POSTGRES, "without spec.sink.postgres.key"),
    ],
)
def test_an_output_mode_the_sink_cannot_honour_is_refused(
    mode: str, sink: dict[str, Any], refused: str
) -> None:
    assert refused in _refusal(outputMode=mode, sink=sink)


@pytest.mark.parametrize(
    ("mode", "sink"),
    [
        ("update", KAFKA),
        ("append", FILES),
        ("update", {"postgres": {**POSTGRES["postgres"], "key": ["k"]}}),
    ],
)
def test_output_modes_the_sink_honours_are_accepted(mode: str, sink: dict[str, Any]) -> None:
    assert _spec(outputMode=mode, sink=sink).output_mode.value == mode


def test_watermark_and_dedup_columns_must_be_columns_of_the_input_view() -> None:
    schema = {"topics": ["in"], "valueSchema": "id STRING, ts TIMESTAMP, n INT"}
    ok = _spec(input=schema, watermark={"column": "ts", "delay": "10m"}, dedup={"columns": ["id"]})
    assert ok.watermark is not None and ok.watermark.spark_delay == "10 minutes"
    assert "spec.dedup.columns: view `input` has no column(s) 'order_id'" in _refusal(
        input=schema, watermark={"column": "ts", "delay": "1m"}, dedup={"columns": ["order_id"]}
    )
    assert "spec.watermark.column: 'n' is int, not a timestamp" in _refusal(
        input=schema, watermark={"column": "n", "delay": "1m"}
    )
    assert "spec.watermark.column: view `input` has no column 'event_time'" in _refusal(
        watermark={"column": "event_time", "delay": "1m"}
    )
    assert "spec.dedup: needs spec.watermark" in _refusal(dedup={"columns": ["key"]})
    assert "would hide Kafka's own column(s) of the same name" in _refusal(
        input={"topics": ["in"], "valueSchema": "key STRING, n INT"}
    )
    assert "input.valueSchema:" in _refusal(input={"topics": ["in"], "valueSchema": "id"})


def test_columns_are_named_as_spark_resolves_them_ignoring_case() -> None:
    schema = {"topics": ["in"], "valueSchema": "Id STRING, TS TIMESTAMP"}
    ok = _spec(input=schema, watermark={"column": "ts", "delay": "1m"}, dedup={"columns": ["ID"]})
    assert ok.dedup is not None
    assert "would hide Kafka's own column(s)" in _refusal(
        input={"topics": ["in"], "valueSchema": "Offset BIGINT"}
    )
    assert "appears twice" in _refusal(input={"topics": ["in"], "valueSchema": "a INT, A INT"})


def test_dedup_identifies_records_by_what_every_delivery_of_them_carries() -> None:
    """Copies of one id differ in their delivery columns and a replay may keep another
    copy: such columns can neither identify a record nor give it its event time."""
    schema = {"topics": ["in"], "valueSchema": "id STRING, ts TIMESTAMP"}
    record_time = {"column": "ts", "delay": "1m"}
    assert _spec(input=schema, watermark=record_time, dedup={"columns": ["key"]}).dedup
    for column in ("offset", "Partition", "timestamp"):
        assert "differ between deliveries of one record" in _refusal(
            input=schema, watermark=record_time, dedup={"columns": ["id", column]}
        )
    assert "spec.watermark.column: with spec.dedup the event time must come from" in _refusal(
        input=schema, watermark={"column": "timestamp", "delay": "1m"}, dedup={"columns": ["id"]}
    )


def test_a_trigger_is_a_processing_time_or_available_now() -> None:
    assert _spec().trigger.spark_interval == "1 seconds"
    assert _spec(trigger={"availableNow": True}).trigger.available_now
    assert "set processingTime or availableNow, not both" in _refusal(
        trigger={"availableNow": True, "processingTime": "1s"}
    )


def test_a_transform_config_map_needs_a_module() -> None:
    assert "configMap holds Python files" in _refusal(
        transform={"sql": "SELECT 1", "configMap": "code"}
    )


def _orders(**spec: Any) -> list[dict[str, Any]]:
    documents = list(yaml.safe_load_all((ROOT / "examples" / "orders-pipeline.yaml").read_text()))
    documents[-1]["spec"].update(spec)
    return render_resources(parse_resources(documents))


def test_a_transform_config_map_is_mounted_on_the_driver_of_either_submitter() -> None:
    transform = {"module": "shapes", "configMap": "shape-code"}
    (app,) = [o for o in _orders(transform=transform) if o["kind"] == "SparkApplication"]
    assert {"name": "shape-code", "path": "/opt/onceflow/transform"} in app["spec"]["driver"][
        "configMaps"
    ]
    objects = _orders(transform=transform, submitter="spark-submit")
    (job,) = [o for o in objects if o["kind"] == "Job"]
    pod = job["spec"]["template"]["spec"]
    assert {"name": "transform", "configMap": {"name": "shape-code"}} in pod["volumes"]
    mounts = pod["containers"][0]["volumeMounts"]
    assert {"name": "transform", "mountPath": "/opt/onceflow/transform", "readOnly": True} in mounts
    (config,) = [o for o in objects if o["kind"] == "ConfigMap" and "job.json" in o["data"]]
    assert json.loads(config["data"]["job.json"])["transformDir"] == "/opt/onceflow/transform"


def test_an_available_now_job_is_not_restarted_once_it_completes() -> None:
    (app,) = [o for o in _orders(trigger={"availableNow": True}) if o["kind"] == "SparkApplication"]
    assert app["spec"]["restartPolicy"]["type"] == "OnFailure"
    (app,) = [o for o in _orders() if o["kind"] == "SparkApplication"]
    assert app["spec"]["restartPolicy"]["type"] == "Always"


SPARK_PROGRESS = {
    "id": "q",
    "batchId": 41,
    "timestamp": "2026-11-24T01:02:03.000Z",
    "numInputRows": 1200,
    "inputRowsPerSecond": "NaN",
    "processedRowsPerSecond": 2400.04,
    "durationMs": {"addBatch": 310, "triggerExecution": 500},
    "eventTime": {"watermark": "2026-01-01T00:01:00.000Z"},
    "stateOperators": [
        {"numRowsTotal": 300, "numRowsDroppedByWatermark": 4},
        {"numRowsTotal": 12, "numRowsDroppedByWatermark": 1},
    ],
}


def test_query_progress_keeps_what_the_status_shows() -> None:
    progress = query_progress(SPARK_PROGRESS)
    assert progress.to_wire() == {
        "batchId": 41,
        "timestamp": "2026-11-24T01:02:03.000Z",
        "inputRows": 1200,
        "processedRowsPerSecond": 2400.0,
        "batchDurationMs": 500,
        "sinkCommitMs": 310,
        "stateRows": 312,
        "rowsDroppedByWatermark": 5,
        "watermark": "2026-01-01T00:01:00.000Z",
    }
    stateless = query_progress({**SPARK_PROGRESS, "stateOperators": [], "eventTime": {}})
    assert stateless.state_rows is None and stateless.watermark is None
    assert stateless.rows_dropped_by_watermark is None


def test_the_drivers_gauges_show_the_last_batch() -> None:
    progress = query_progress(SPARK_PROGRESS)
    export("gauges-job", progress)

    def sample(name: str) -> float | None:
        return REGISTRY.get_sample_value(f"onceflow_spark_{name}", {"job": "gauges-job"})

    assert sample("batch_id") == 41
    assert sample("input_rows") == 1200
    assert sample("input_rows_per_second") == 0  # Spark's NaN: no interval yet
    assert sample("batch_seconds") == 0.5
    assert sample("sink_commit_seconds") == 0.31
    assert sample("state_rows") == 312
    assert sample("rows_dropped_by_watermark") == 5
    assert sample("watermark_seconds") == datetime(2026, 1, 1, 0, 1, tzinfo=UTC).timestamp()


def test_a_progress_held_back_by_the_throttle_is_annotated_when_flushed() -> None:
    """The pod is patched at most every few seconds; the batch that came too soon is
    not lost but handed over when the query goes idle or ends."""
    patched: list[int] = []

    class RecordingPods:
        def patch_namespaced_pod(self, pod: str, namespace: str, body: Any) -> None:
            annotation = body["metadata"]["annotations"][PROGRESS_ANNOTATION]
            patched.append(json.loads(annotation)["batchId"])

    annotator = PodAnnotator("ns", "job-driver")
    annotator.api = RecordingPods()
    first = query_progress(SPARK_PROGRESS)
    annotator.annotate(first)
    annotator.annotate(first.model_copy(update={"batch_id": 42}))
    assert patched == [41]
    annotator.flush()
    annotator.flush()
    assert patched == [41, 42]


def test_the_newest_driver_pods_progress_is_the_jobs() -> None:
    def pod(created: str, role: str, batch: int | None) -> dict[str, Any]:
        annotations = (
            {
                PROGRESS_ANNOTATION: json.dumps(
                    {**query_progress(SPARK_PROGRESS).to_wire(), "batchId": batch}
                )
            }
            if batch is not None
            else {}
        )
        labels = {"spark-role": role}
        return {
            "metadata": {"creationTimestamp": created, "labels": labels, "annotations": annotations}
        }

    pods = [
        pod("2026-11-24T01:00:00Z", "driver", 7),
        pod("2026-11-24T02:00:00Z", "driver", 9),
        pod("2026-11-24T03:00:00Z", "executor", 11),
        pod("2026-11-24T04:00:00Z", "driver", None),
    ]
    progress = driver_progress(pods)
    assert progress is not None and progress.batch_id == 9
    assert driver_progress([pod("2026-11-24T01:00:00Z", "executor", 3)]) is None
    broken = pod("2026-11-24T05:00:00Z", "driver", 1)
    broken["metadata"]["annotations"][PROGRESS_ANNOTATION] = "{"
    assert driver_progress([broken]) is None


def test_a_transform_config_map_must_exist_and_hold_the_module() -> None:
    job = SparkJob.model_validate(
        {
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": {
                **_spec().to_wire(),
                "transform": {"module": "shape", "configMap": "code"},
            },
        }
    )
    missing = transform_code_problem(job, None, "in namespace 'ns'")
    assert missing is not None and missing.field == "spec.transform.configMap"
    assert "kubectl create configmap code --from-file=shape.py" in missing.message
    wrong = transform_code_problem(job, {"helpers.py": ""}, "in namespace 'ns'")
    assert wrong is not None and "has no key 'shape.py' (it has helpers.py)" in wrong.message
    assert transform_code_problem(job, {"shape.py": "", "helpers.py": ""}, "") is None
