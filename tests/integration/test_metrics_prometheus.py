"""Every documented series, scraped by a real Prometheus (Debian's package) from a real
operator, a real source task and a real Spark driver, and every panel of the shipped
Grafana dashboard answering with data: what docs/operations.md lists is what an operator gets."""

from __future__ import annotations

import json
import os
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_operator import pipeline, source
from tests.support.cluster import Cluster, OperatorProcess, running_operator
from tests.support.copy_job import copy_job_settings
from tests.support.dashboard_picture import draw_dashboard
from tests.support.drivers import start_driver
from tests.support.kafka import offsets_written
from tests.support.kubelet import LocalKubelet
from tests.support.metrics import free_port
from tests.support.prometheus import Prometheus, prometheus
from tests.support.tasks import TaskProcess, only_task, plan
from tests.support.testbed import ROOT
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.k8s, pytest.mark.kafka, pytest.mark.spark]

DASHBOARD = ROOT / "helm" / "onceflow" / "files" / "dashboards" / "onceflow.json"

OPERATOR_SERIES = (
    "onceflow_operator_reconciles_total",
    "onceflow_operator_reconcile_seconds_bucket",
    "onceflow_operator_fencing_seconds_bucket",
    "onceflow_operator_fencing_failures_total",
    "onceflow_operator_generations_total",
    "onceflow_operator_rollout_steps_total",
    "onceflow_operator_rollout_step_seconds_bucket",
    "onceflow_operator_objects",
    "onceflow_operator_hanging_partitions",
)
TASK_SERIES = (
    "onceflow_source_records_committed_total",
    "onceflow_source_transactions_committed_total",
    "onceflow_source_transactions_aborted_total",
    "onceflow_source_producer_fenced_total",
    "onceflow_source_commit_latency_seconds_bucket",
    "onceflow_source_transaction_size_min",
    "onceflow_source_transaction_size_max",
    "onceflow_source_transaction_size_avg",
    "onceflow_source_paused",
    "onceflow_source_bytes_behind",
    "onceflow_source_records_behind",
)
DRIVER_SERIES = (
    "onceflow_spark_batch_id",
    "onceflow_spark_input_rows",
    "onceflow_spark_input_rows_per_second",
    "onceflow_spark_processed_rows_per_second",
    "onceflow_spark_batch_seconds",
    "onceflow_spark_sink_commit_seconds",
)


@pytest.fixture
def operator_with_metrics(
    kubeconfig: str, kafka_bootstrap: str, tmp_path: Path
) -> Iterator[tuple[Cluster, OperatorProcess, LocalKubelet, int]]:
    port = free_port()
    extra = ("--standalone", f"--metrics-port={port}")
    with running_operator(kubeconfig, tmp_path, "metrics", extra=extra) as (cluster, op, kubelet):
        yield cluster, op, kubelet, port


def _present(server: Prometheus, series: str) -> bool:
    return bool(server.query(series))


def test_prometheus_scrapes_every_documented_series_and_the_dashboard_shows_them(
    operator_with_metrics: tuple[Cluster, OperatorProcess, LocalKubelet, int],
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    cluster, _, _, operator_port = operator_with_metrics
    # A task of its own, with its metrics port (the local kubelet's share one network).
    task_port = free_port()
    desired = plan(kafka_bootstrap, tasks_max=1, config={"streams": 2, "pollIntervalMs": 50})
    settings = only_task(desired, tmp_path).model_copy(update={"metrics_port": task_port})
    task = TaskProcess(settings, tmp_path).start()
    wait_for(lambda: offsets_written(kafka_bootstrap, settings.topic) > 0, 60, "its topic")
    # Tasks that measure their lag: a mirror of the first task's topic, and a files
    # source with more to read than one batch takes.
    lagging = [
        _lagging_task(
            kafka_bootstrap,
            "kafka",
            tmp_path,
            {"topics": [settings.topic], "bootstrapServers": kafka_bootstrap, "batchSize": 5},
        )
    ]
    data = tmp_path / "data"
    data.mkdir()
    (data / "lines.txt").write_text("".join(f"line {n}\n" for n in range(100_000)))
    lagging.append(_lagging_task(kafka_bootstrap, "files", tmp_path, {
        "paths": [str(data / "*.txt")], "batchSize": 5}))  # fmt: skip
    # A driver copying the task's records, through the exactly-once Kafka sink.
    driver_port = free_port()
    sink = {"kafka": {"topic": f"{settings.topic}.copied", "partitions": 1}}
    job = copy_job_settings(
        kafka_bootstrap, settings.topic, tmp_path, sink, metricsPort=driver_port
    )
    driver = start_driver(job, tmp_path)
    targets = {
        "operator": [f"127.0.0.1:{operator_port}"],
        "task": [f"127.0.0.1:{task_port}"],
        "driver": [f"127.0.0.1:{driver_port}"],
        "lagging": [f"127.0.0.1:{port}" for _, port in lagging],
    }
    try:
        wait_for(lambda: _scraping(task_port), 60, "the task's metrics endpoint")
        with prometheus(targets, tmp_path / "prometheus") as server:
            started = time.time()
            # The operator at work while scraped: a rollout (disabled -> preparing ->
            # enabled), then a resize, which fences the enabled generation's ids.
            cluster.create("pipelines", pipeline(kafka_bootstrap, "disabled"))
            cluster.create("kafkasources", source(2, f"pm-{uuid.uuid4().hex[:6]}", 100_000))
            wait_for(lambda: _settled_in(cluster, "disabled", 2), 120, "running in disabled")
            cluster.patch_spec("pipelines", "orders", {"exactlyOnce": "enabled"})
            wait_for(lambda: _settled_in(cluster, "enabled", 2), 180, "enabled, both tasks up")
            cluster.patch_spec("kafkasources", "counter", {"tasksMax": 1})
            wait_for(lambda: _settled_in(cluster, "enabled", 1), 120, "resized, ids fenced")
            for series in (*OPERATOR_SERIES, *TASK_SERIES, *DRIVER_SERIES):
                wait_for(lambda s=series: _present(server, s), 60, f"{series} in Prometheus")
            steps = server.query('onceflow_operator_rollout_steps_total{to="enabled"}')
            assert float(steps[0]["value"][1]) >= 1, steps
            fenced = server.query('onceflow_operator_fencing_seconds_count{kind="KafkaSource"}')
            assert float(fenced[0]["value"][1]) >= 1, "the resize fenced the old ids"
            time.sleep(10)  # a few scrapes after the last step
            panels = json.loads(DASHBOARD.read_text())["panels"]
            answered = {
                panel["title"]: server.query_range(
                    panel["targets"][0]["expr"], started, time.time(), 2
                )
                for panel in panels
            }
    finally:
        task.terminate()
        for process, _ in lagging:
            process.terminate()
        driver.terminate()
        driver.wait(60)
    # Fencing failures need a failure, and retention a CDC source: the rest of the
    # dashboard must answer from this run.
    silent = {title for title, series in answered.items() if not series}
    assert silent <= {"Fencing failures /s, by kind",
                      "Retained by source systems (CDC slot WAL)"}, silent  # fmt: skip
    picture = draw_dashboard(answered, tmp_path / "dashboard.png")
    assert picture.stat().st_size > 10_000
    if wanted := os.environ.get("ONCEFLOW_DASHBOARD_PICTURE"):
        Path(wanted).write_bytes(picture.read_bytes())


def _lagging_task(
    bootstrap: str, connector: str, tmp_path: Path, config: dict[str, Any]
) -> tuple[TaskProcess, int]:
    port, workdir = free_port(), tmp_path / connector  # a task's files are named by number
    workdir.mkdir()
    desired = plan(bootstrap, tasks_max=1, connector=connector, config=config)
    settings = only_task(desired, workdir).model_copy(update={"metrics_port": port})
    return TaskProcess(settings, workdir).start(), port


def _scraping(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2):
            return True
    except OSError:
        return False


def _settled_in(cluster: Cluster, mode: str, tasks: int) -> bool:
    rollout = cluster.status("pipelines", "orders").get("exactlyOnce") or {}
    status = cluster.status("kafkasources", "counter")
    return (
        rollout.get("current") == mode
        and status.get("mode") == mode
        and status.get("taskCount") == tasks
        and status.get("generation") == status.get("fencedGeneration")
        and cluster.condition("kafkasources", "counter", "Ready").get("status") == "True"
    )
