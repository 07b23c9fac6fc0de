"""`onceflow render` previews exactly what the operator would create."""

from __future__ import annotations

import json

import yaml

from onceflow.api import parse_resources
from onceflow.render import render_resources
from tests.support.testbed import ROOT


def test_quickstart_renders_a_configmap_and_one_pod_per_task() -> None:
    documents = list(yaml.safe_load_all((ROOT / "examples" / "quickstart.yaml").read_text()))
    objects = render_resources(parse_resources(documents))
    kinds = [o["kind"] for o in objects]
    assert kinds[:7] == ["ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Pod", "Pod", "Pod"]
    assert kinds[7:] == ["ConfigMap", "SparkApplication"], "the copier job follows the tasks"
    role = objects[1]
    assert role["rules"] == [
        {"apiGroups": ["onceflow.io"], "resources": ["kafkasources"], "verbs": ["get"]}
    ]
    configmap, *pods = objects[3:7]
    assert sorted(configmap["data"]) == ["task-0.json", "task-1.json", "task-2.json"]
    assert [p["metadata"]["name"] for p in pods] == ["counter-g1-0", "counter-g1-1", "counter-g1-2"]
    for p in pods:
        assert p["spec"]["restartPolicy"] == "OnFailure"
        assert p["metadata"]["labels"]["onceflow.io/mode"] == "enabled"
        assert p["spec"]["volumes"][0]["configMap"]["name"] == "counter-g1"


def test_spark_job_renders_a_spark_application_reading_committed() -> None:
    documents = list(yaml.safe_load_all((ROOT / "examples" / "orders-pipeline.yaml").read_text()))
    objects = render_resources(parse_resources(documents))
    (app,) = [o for o in objects if o["kind"] == "SparkApplication"]
    conf = app["spec"]["sparkConf"]
    assert conf["spark.onceflow.kafka.isolation.level"] == "read_committed"
    assert conf["spark.speculation"] == "false"
    assert app["spec"]["restartPolicy"]["type"] == "Always"
    assert app["spec"]["executor"]["instances"] == 2
    (config,) = [o for o in objects if o["metadata"]["name"] == "orders-copy-job"]
    settings = json.loads(config["data"]["job.json"])
    assert settings["topics"] == ["orders.raw"], "sources resolve to their topics"
    assert settings["checkpointLocation"] == "/var/lib/onceflow/checkpoint"
