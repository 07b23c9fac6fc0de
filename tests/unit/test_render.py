"""`onceflow render` previews exactly what the operator would create."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from onceflow.api import InvalidResourceError, parse_resources
from onceflow.logic.tenant_policy import policy_from
from onceflow.manifest_files import ManifestSources
from onceflow.model.objects import WorkloadImage
from onceflow.render import render_resources
from onceflow.standalone.supervisor import plan_run
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
    (config,) = [o for o in objects if o["metadata"]["name"] == "orders-per-window-job"]
    settings = json.loads(config["data"]["job.json"])
    assert settings["topics"] == ["orders.raw"], "sources resolve to their topics"
    assert settings["checkpointLocation"] == "/var/lib/onceflow/checkpoint"


def test_spark_submit_renders_a_job_whose_pod_is_the_driver() -> None:
    documents = list(yaml.safe_load_all((ROOT / "examples" / "orders-pipeline.yaml").read_text()))
    documents[-1]["spec"]["submitter"] = "spark-submit"
    objects = render_resources(parse_resources(documents))
    (job,) = [o for o in objects if o["kind"] == "Job"]
    assert not [o for o in objects if o["kind"] == "SparkApplication"]
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "OnFailure", "restarted in place: never two drivers"
    (container,) = pod["containers"]
    args = container["args"]
    assert args[args.index("--deploy-mode") + 1] == "client"
    conf = dict(a.split("=", 1) for a in args[1::2] if "=" in a)
    assert conf["spark.onceflow.kafka.isolation.level"] == "read_committed"
    assert conf["spark.speculation"] == "false"
    assert conf["spark.kubernetes.driver.pod.name"] == "$(POD_NAME)"
    assert conf["spark.executor.instances"] == "2"
    claim = "spark.kubernetes.executor.volumes.persistentVolumeClaim.checkpoint.options.claimName"
    assert conf[claim] == "orders-per-window-checkpoint"
    assert {e["name"] for e in container["env"]} == {"POD_NAME", "POD_IP"}
    assert args[-2:] == ["--config", "/etc/onceflow/job.json"]


@pytest.mark.parametrize(
    ("host", "master"),
    [("10.96.0.1", "k8s://https://10.96.0.1:443"), ("fd00::1", "k8s://https://[fd00::1]:443")],
)
def test_the_driver_submits_to_the_api_server_by_its_service_address(
    host: str, master: str, tmp_path: Path
) -> None:
    """No cluster DNS needed; an IPv6 service address is bracketed. The command runs
    under a shell with a stand-in spark-submit that prints what it was given."""
    documents = list(yaml.safe_load_all((ROOT / "examples" / "orders-pipeline.yaml").read_text()))
    documents[-1]["spec"]["submitter"] = "spark-submit"
    (job,) = [o for o in render_resources(parse_resources(documents)) if o["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    stand_in = tmp_path / "spark-submit"
    stand_in.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    stand_in.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "KUBERNETES_SERVICE_HOST": host}
    ran = subprocess.run(
        [*container["command"], *container["args"]],
        env={**env, "KUBERNETES_SERVICE_PORT": "443"},
        capture_output=True,
        text=True,
        check=True,
    )
    given = ran.stdout.splitlines()
    assert given[:2] == ["--master", master]
    assert given[2:4] == ["--deploy-mode", "client"]


def test_task_pods_meet_pod_security_restricted_with_default_resources() -> None:
    documents = list(yaml.safe_load_all((ROOT / "examples" / "quickstart.yaml").read_text()))
    pods = [o for o in render_resources(parse_resources(documents)) if o["kind"] == "Pod"]
    for pod in pods:
        security = pod["spec"]["securityContext"]
        assert security["runAsNonRoot"] and security["seccompProfile"]["type"] == "RuntimeDefault"
        (container,) = pod["spec"]["containers"]
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert "command" not in container, "the image's entry point (tini) stays PID 1"
        assert container["args"][0] == "task"
        assert container["resources"]["requests"] == {"cpu": "100m", "memory": "256Mi"}


def test_a_source_that_sets_resources_keeps_them_and_no_default_limit_undercuts_them() -> None:
    documents = list(yaml.safe_load_all((ROOT / "examples" / "quickstart.yaml").read_text()))
    for document in documents:
        if document and document["kind"] == "KafkaSource":
            document["spec"]["resources"] = {"requests": {"memory": "2Gi"}}
    pods = [o for o in render_resources(parse_resources(documents)) if o["kind"] == "Pod"]
    resources = pods[0]["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"cpu": "100m", "memory": "2Gi"}, "limits": {}}


def test_spark_pods_carry_the_restricted_security_context_and_driver_resources() -> None:
    documents = list(yaml.safe_load_all((ROOT / "examples" / "orders-pipeline.yaml").read_text()))
    objects = render_resources(parse_resources(documents))
    (app,) = [o for o in objects if o["kind"] == "SparkApplication"]
    for role in ("driver", "executor"):
        assert app["spec"][role]["podSecurityContext"]["runAsNonRoot"] is True
        assert app["spec"][role]["securityContext"]["capabilities"]["drop"] == ["ALL"]
    # The Spark operator submits from its own pod: the template travels in the object.
    template = app["spec"]["executor"]["template"]
    assert template["spec"]["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert template["spec"]["automountServiceAccountToken"] is False, "executors need no token"
    assert "spark.kubernetes.executor.podTemplateFile" not in app["spec"]["sparkConf"]
    # Half a core per Spark core: a first pipeline fits a two-core node.
    assert (app["spec"]["driver"]["coreRequest"], app["spec"]["executor"]["coreRequest"]) == (
        "500m",
        "500m",
    )

    for document in documents:
        if document and document["kind"] == "SparkJob":
            document["spec"]["submitter"] = "spark-submit"
            document["spec"]["driver"] = {"cores": 2, "memory": "2g"}
    objects = render_resources(parse_resources(documents))
    (job,) = [o for o in objects if o["kind"] == "Job"]
    pod = job["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 65532
    (driver,) = pod["containers"]
    # spark-submit runs in the driver's pod, where the job's ConfigMap is mounted.
    (configmap,) = [o for o in objects if o["kind"] == "ConfigMap" and "job.json" in o["data"]]
    template = json.loads(configmap["data"]["executor-pod.json"])
    assert template["spec"]["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert (
        "spark.kubernetes.executor.podTemplateFile=/etc/onceflow/executor-pod.json"
        in (driver["args"])
    )
    assert (
        "spark.kubernetes.authenticate.executor.serviceAccountName=onceflow-spark"
        in (driver["args"])
    )
    # 2 GiB of heap and Spark's 40 % overhead for a Python driver; half a core per core.
    assert driver["resources"] == {
        "requests": {"cpu": "1000m", "memory": "2867Mi"},
        "limits": {"memory": "2867Mi"},
    }
    for document in documents:
        if document and document["kind"] == "SparkJob":
            document["spec"]["sparkConf"] = {"spark.kubernetes.driver.request.cores": "250m"}
    (job,) = [o for o in render_resources(parse_resources(documents)) if o["kind"] == "Job"]
    (driver,) = job["spec"]["template"]["spec"]["containers"]
    assert driver["resources"]["requests"]["cpu"] == "250m", "Spark's own key for a smaller request"
    assert "spark.kubernetes.executor.request.cores=500m" in driver["args"], driver["args"]


@pytest.mark.parametrize("value", ["lots", "1.5cpu", ""])
def test_a_cpu_request_that_is_no_quantity_is_refused_by_name(value: str) -> None:
    documents = list(yaml.safe_load_all((ROOT / "examples" / "orders-pipeline.yaml").read_text()))
    for document in documents:
        if document and document["kind"] == "SparkJob":
            document["spec"]["sparkConf"] = {"spark.kubernetes.driver.request.cores": value}
    with pytest.raises(ValueError, match=re.escape("'spark.kubernetes.driver.request.cores'")):
        parse_resources(documents)


def test_the_pipelines_kafka_secret_reaches_the_spark_driver_and_executors() -> None:
    documents = list(yaml.safe_load_all((ROOT / "examples" / "orders-pipeline.yaml").read_text()))
    for document in documents:
        if document and document["kind"] == "Pipeline":
            document["spec"]["kafka"]["authSecretRef"] = {"name": "kafka-auth"}
    objects = render_resources(parse_resources(documents))
    (app,) = [o for o in objects if o["kind"] == "SparkApplication"]
    for role in ("driver", "executor"):
        assert {"name": "kafka-auth", "path": "/etc/onceflow-kafka", "secretType": "Generic"} in (
            app["spec"][role]["secrets"]
        )
    (configmap,) = [o for o in objects if o["kind"] == "ConfigMap" and "job.json" in o["data"]]
    assert json.loads(configmap["data"]["job.json"])["kafkaConfigDir"] == "/etc/onceflow-kafka"

    for document in documents:
        if document and document["kind"] == "SparkJob":
            document["spec"]["submitter"] = "spark-submit"
    (job,) = [o for o in render_resources(parse_resources(documents)) if o["kind"] == "Job"]
    (driver,) = job["spec"]["template"]["spec"]["containers"]
    mounts = {m["mountPath"]: m for m in driver["volumeMounts"]}
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    kafka_mount = mounts["/etc/onceflow-kafka"]
    assert kafka_mount["readOnly"] is True
    assert volumes[kafka_mount["name"]]["secret"]["secretName"] == "kafka-auth"
    assert "spark.kubernetes.executor.secrets.kafka-auth=/etc/onceflow-kafka" in driver["args"]


S3_ENV = [
    {"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "access"}}},
    {"name": "AWS_REGION", "value": "eu-west-1"},
]


def _orders_with_spark_job(**spec: object) -> list[dict]:
    documents = list(yaml.safe_load_all((ROOT / "examples" / "orders-pipeline.yaml").read_text()))
    for document in documents:
        if document and document["kind"] == "SparkJob":
            document["spec"].update(spec)
    return documents


@pytest.mark.parametrize("submitter", ["spark-operator", "spark-submit"])
def test_the_jobs_env_reaches_the_driver_and_executors_with_secret_references_intact(
    submitter: str,
) -> None:
    objects = render_resources(
        parse_resources(_orders_with_spark_job(env=S3_ENV, submitter=submitter))
    )
    (configmap,) = [o for o in objects if o["kind"] == "ConfigMap" and "job.json" in o["data"]]
    (executor,) = json.loads(configmap["data"]["executor-pod.json"])["spec"]["containers"]
    assert executor["env"] == S3_ENV
    if submitter == "spark-operator":
        (app,) = [o for o in objects if o["kind"] == "SparkApplication"]
        assert app["spec"]["driver"]["env"] == S3_ENV
        (executor,) = app["spec"]["executor"]["template"]["spec"]["containers"]
        assert executor["env"] == S3_ENV
        # Set in the template only: a pod listing a name twice is a pod nobody reads well.
        assert "env" not in app["spec"]["executor"]
    else:
        (job,) = [o for o in objects if o["kind"] == "Job"]
        (driver,) = job["spec"]["template"]["spec"]["containers"]
        assert driver["env"][2:] == S3_ENV
        assert [v["name"] for v in driver["env"][:2]] == ["POD_NAME", "POD_IP"]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ([{"name": "SPARK_HOME", "value": "/x"}], "env[SPARK_HOME]: SPARK_*"),
        ([{"name": "POD_IP", "value": "1"}], "env[POD_IP]"),
        ([{"name": "A", "value": "1"}, {"name": "A", "value": "2"}], "env: A set more than once"),
        ([{"name": "A"}], "env[A]: set exactly one of value or valueFrom"),
        ([{"name": "1A", "value": "1"}], "String should match pattern"),
        ([{"name": "PATH", "value": "/x"}], "env[PATH]"),
        (
            [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "Bad_Name", "key": "k"}}}],
            "String should match pattern",
        ),
    ],
)
def test_an_env_the_pods_could_not_keep_is_refused_by_name(env: list[dict], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_resources(_orders_with_spark_job(env=env))


def test_a_variable_set_by_env_and_by_sparkconf_is_refused() -> None:
    env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "t"}}}]
    conf = {"spark.executorEnv.TOKEN": "plain"}
    with pytest.raises(ValueError, match=re.escape("sparkConf['spark.executorEnv.TOKEN']")):
        parse_resources(_orders_with_spark_job(env=env, sparkConf=conf))
    assert parse_resources(_orders_with_spark_job(env=env, sparkConf={"spark.executorEnv.X": "1"}))


def test_the_connectors_secret_is_mounted_into_the_task_and_never_copied() -> None:
    documents = list(yaml.safe_load_all((ROOT / "examples" / "quickstart.yaml").read_text()))
    for document in documents:
        if document and document["kind"] == "KafkaSource":
            document["spec"]["connector"]["secretRef"] = {"name": "source-auth"}
    objects = render_resources(parse_resources(documents))
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert pods
    for pod in pods:
        assert {"name": "connector", "secret": {"secretName": "source-auth"}} in (
            pod["spec"]["volumes"]
        )
        (container,) = pod["spec"]["containers"]
        assert {"name": "connector", "mountPath": "/etc/onceflow-connector", "readOnly": True} in (
            container["volumeMounts"]
        )
    (configmap,) = [o for o in objects if o["kind"] == "ConfigMap" and "task-0.json" in o["data"]]
    settings = json.loads(configmap["data"]["task-0.json"])
    assert settings["connectorSecretDir"] == "/etc/onceflow-connector"


def _quickstart_with_volumes(volumes: list[dict[str, Any]]) -> list[Any]:
    documents = list(yaml.safe_load_all((ROOT / "examples" / "quickstart.yaml").read_text()))
    for document in documents:
        if document and document["kind"] == "KafkaSource":
            document["spec"]["volumes"] = volumes
    return documents


def test_a_sources_volumes_are_mounted_into_every_task_pod() -> None:
    volumes = [
        {"name": "data", "mountPath": "/data/in", "persistentVolumeClaim": {"claimName": "in"}},
        {
            "name": "out",
            "mountPath": "/out",
            "readOnly": False,
            "persistentVolumeClaim": {"claimName": "o"},
        },
    ]
    pods = [
        o
        for o in render_resources(parse_resources(_quickstart_with_volumes(volumes)))
        if o["kind"] == "Pod"
    ]
    assert pods
    for pod in pods:
        assert pod["spec"]["volumes"][-3:-1] == [
            {"name": "data", "persistentVolumeClaim": {"claimName": "in"}},
            {"name": "out", "persistentVolumeClaim": {"claimName": "o"}},
        ]
        (container,) = pod["spec"]["containers"]
        assert container["volumeMounts"][-3:-1] == [
            {"name": "data", "mountPath": "/data/in", "readOnly": True},
            {"name": "out", "mountPath": "/out", "readOnly": False},
        ]
    plain = render_resources(parse_resources(_quickstart_with_volumes([])))
    label = "onceflow.io/pod-template"
    assert [o["metadata"]["labels"][label] for o in plain if o["kind"] == "Pod"] != [
        p["metadata"]["labels"][label] for p in pods
    ], "a volume change rolls the pods"


def _claim(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "mountPath": path, "persistentVolumeClaim": {"claimName": "c"}}


@pytest.mark.parametrize(
    ("volumes", "message"),
    [
        ([_claim("tmp", "/x")], "volumes[tmp]: the task pod uses that name"),
        ([_claim("d", "/etc/onceflow/x")], "overlaps the task pod's own mounts"),
        ([_claim("d", "//x/../etc/onceflow")], "overlaps the task pod's own mounts"),
        ([_claim("d", "/")], "overlaps the task pod's own mounts"),
        (  # security review #10: over Onceflow's code in the image
            [_claim("code", "/opt/onceflow/venv/lib/python3.11/site-packages/onceflow")],
            "overlaps the image's code or system directories",
        ),
        ([_claim("d", "/usr/../var/run/x")], "overlaps the image's code or system"),
        ([{"name": "d", "mountPath": "/d"}], "persistentVolumeClaim"),
        ([_claim("d", "/a"), _claim("d", "/b")], "volumes: d named more than once"),
        ([_claim("a", "/data"), _claim("b", "/data/x")], "overlaps another volume's"),
    ],
)
def test_a_volume_the_task_pod_could_not_take_is_refused_by_name(
    volumes: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_resources(_quickstart_with_volumes(volumes))


def _quickstart() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((ROOT / "examples" / "quickstart.yaml").read_text()) if d]


def _second_source(topic: str, name: str = "other") -> dict[str, Any]:
    source = _quickstart()[1]
    source["metadata"]["name"] = name
    source["spec"]["topic"] = topic
    return source


def _with_sink(topic: str) -> list[dict[str, Any]]:
    documents = _quickstart()
    documents[2]["spec"]["sink"]["kafka"]["topic"] = topic
    return documents


# Newcomer rows 09, 11, 12b, 13, 05: accepted before, each damaging data.
GRAPH_CASES = {
    "two sources write one topic": (
        [*_quickstart(), _second_source("quickstart.counts")],
        "KafkaSource 'other': spec.topic: topic 'quickstart.counts' is also the output topic "
        "of KafkaSource 'counter' (spec.topic)",
    ),
    "a sink topic is its own input": (
        _with_sink("quickstart.counts"),
        "SparkJob 'copier': spec.sink.kafka.topic: topic 'quickstart.counts' is also this "
        "job's input (spec.input.sources[0])",
    ),
    "a source writes another's offsets topic": (
        [*_quickstart(), _second_source("default.quickstart-counter-offsets")],
        "KafkaSource 'counter': spec.offsetsTopic: topic 'default.quickstart-counter-offsets' "
        "is also the output topic of KafkaSource 'other' (spec.topic)",
    ),
    "two sources of one name": (
        [*_quickstart(), _second_source("quickstart.b", name="counter")],
        "KafkaSource 'counter': metadata.name: 2 KafkaSources are named 'counter'",
    ),
    "a topic Kafka refuses": (
        [*_quickstart(), _second_source("nfx05 bad/topic*")],
        "KafkaSource 'other': spec.topic: 'nfx05 bad/topic*' has ' ', '*', '/'",
    ),
}


def _refusals(documents: list[dict[str, Any]], tmp_path: Path) -> tuple[str, str]:
    """What `render` and `run` (its planning, before anything starts) say."""
    with pytest.raises(ValueError) as rendered:
        render_resources(parse_resources(documents))
    manifest = tmp_path / "pipeline.yaml"
    manifest.write_text(yaml.safe_dump_all(documents))
    with pytest.raises(ValueError) as planned:
        plan_run(ManifestSources((str(manifest),)).documents(), None, tmp_path / "state")
    assert not (tmp_path / "state").exists(), "nothing is written before the refusal"
    return str(rendered.value), str(planned.value)


@pytest.mark.parametrize(("documents", "message"), GRAPH_CASES.values(), ids=list(GRAPH_CASES))
def test_render_and_run_refuse_a_damaging_graph_in_the_same_words(
    documents: list[dict[str, Any]], message: str, tmp_path: Path
) -> None:
    rendered, planned = _refusals(documents, tmp_path)
    assert rendered == planned
    assert message in rendered


def test_render_refuses_a_mirror_that_copies_the_jobs_output_back_into_its_input() -> None:
    """The mirror reads on the cluster its config names: here the pipeline's own, spelt
    otherwise (run would also ask that cluster whether it answers, so render alone)."""
    mirror = _second_source("quickstart.counts-mirror", name="mirror")
    config = {"topics": ["quickstart.copied"], "bootstrapServers": "PLAINTEXT://127.0.0.1"}
    mirror["spec"]["connector"] = {"type": "kafka", "config": config}
    documents = _quickstart()
    documents[2]["spec"]["input"] = {"sources": ["counter", "mirror"]}
    with pytest.raises(ValueError) as rendered:
        render_resources(parse_resources([*documents, mirror]))
    assert (
        "KafkaSource 'mirror': spec.topic: topic 'quickstart.counts-mirror' is read by SparkJob "
        "'copier', which writes 'quickstart.copied', read by this source "
        "(spec.connector.config.topics[0])"
    ) in str(rendered.value)


def test_every_problem_of_every_resource_is_reported_at_once(tmp_path: Path) -> None:
    documents = _with_sink("quickstart.counts")
    documents[1]["spec"]["connector"]["config"]["streams"] = 0
    documents.append(_second_source("quickstart.counts"))
    rendered, planned = _refusals(documents, tmp_path)
    assert rendered == planned
    assert rendered.startswith("manifests is invalid: KafkaSource 'counter': ")
    for problem in (
        "KafkaSource 'counter': spec.connector.config.streams: ",
        "KafkaSource 'counter': spec.topic: topic 'quickstart.counts' is also the output "
        "topic of KafkaSource 'other' (spec.topic) and the sink topic of SparkJob 'copier' "
        "(spec.sink.kafka.topic)",
        "KafkaSource 'other': spec.topic: ",
        "SparkJob 'copier': spec.sink.kafka.topic: topic 'quickstart.counts' is also the "
        "output topic of KafkaSource 'counter'",
        "SparkJob 'copier': spec.sink.kafka.topic: topic 'quickstart.counts' is also this "
        "job's input",
    ):
        assert problem in rendered


def test_the_commands_print_one_problem_a_line_and_exit_1(tmp_path: Path) -> None:
    manifest = tmp_path / "pipeline.yaml"
    manifest.write_text(yaml.safe_dump_all([*_quickstart(), _second_source("quickstart.counts")]))
    outputs = [
        subprocess.run(
            [sys.executable, "-m", "onceflow", *command, str(manifest)],
            capture_output=True,
            text=True,
            check=False,
        )
        for command in (["render"], ["run", "--state-dir", str(tmp_path / "state")])
    ]
    assert [o.returncode for o in outputs] == [1, 1]
    assert outputs[0].stderr == outputs[1].stderr
    assert outputs[0].stderr.splitlines() == [
        "error: manifests is invalid:",
        "  KafkaSource 'counter': spec.topic: topic 'quickstart.counts' is also the output "
        "topic of KafkaSource 'other' (spec.topic): two writers of one topic mix their "
        "records, and its readers (and `onceflow audit`) see duplicates that no fault "
        "caused; give each its own topic",
        "  KafkaSource 'other': spec.topic: topic 'quickstart.counts' is also the output "
        "topic of KafkaSource 'counter' (spec.topic): two writers of one topic mix their "
        "records, and its readers (and `onceflow audit`) see duplicates that no fault "
        "caused; give each its own topic",
    ]
    assert outputs[0].stdout == "" and not (tmp_path / "state").exists()


def test_render_refuses_what_the_operators_tenant_policy_refuses() -> None:
    """Security review #12: a preview of objects the operator would not create."""
    documents = _quickstart()
    (pipeline,) = [d for d in documents if d["kind"] == "Pipeline"]
    pipeline["spec"]["transactionalIdPrefix"] = "payments.orders"
    (job,) = [d for d in documents if d["kind"] == "SparkJob"]
    job["spec"]["sparkConf"] = {"spark.jars.packages": "evil:evil:1"}
    with pytest.raises(InvalidResourceError) as refused:
        render_resources(parse_resources(documents))
    said = "\n".join(map(str, refused.value.problems))
    assert "Pipeline 'quickstart': spec.transactionalIdPrefix: 'payments.orders' does not" in said
    assert "SparkJob 'copier': spec.sparkConf['spark.jars.packages']" in said
    allowed = policy_from(
        {
            "ONCEFLOW_ANY_TRANSACTIONAL_ID_PREFIX": "true",
            "ONCEFLOW_SPARK_CONF_KEYS": "spark.jars.packages",
        }
    )
    assert render_resources(parse_resources(documents), policy=allowed)


@pytest.mark.parametrize("submitter", ["spark-operator", "spark-submit"])
def test_the_installations_pull_secrets_reach_every_workload_pod(submitter: str) -> None:
    """A private registry holds the operator's image and the workloads' alike: the
    chart's imagePullSecrets reach task pods, drivers and executors."""
    image = WorkloadImage.from_environment(
        {
            "ONCEFLOW_TASK_IMAGE": "registry.example.com/onceflow:1",
            "ONCEFLOW_IMAGE_PULL_SECRETS": "a, b",
        }
    )
    objects = render_resources(
        parse_resources(_orders_with_spark_job(submitter=submitter)),
        image=image,
    )
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert pods and all(
        p["spec"]["imagePullSecrets"] == [{"name": "a"}, {"name": "b"}] for p in pods
    )
    assert all(
        p["spec"]["containers"][0]["image"] == "registry.example.com/onceflow:1" for p in pods
    )
    if submitter == "spark-operator":
        (app,) = [o for o in objects if o["kind"] == "SparkApplication"]
        assert app["spec"]["imagePullSecrets"] == ["a", "b"]  # driver and executors
    else:
        (job,) = [o for o in objects if o["kind"] == "Job"]
        assert job["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "a"}, {"name": "b"}]
        conf = job["spec"]["template"]["spec"]["containers"][0]["args"]
        assert "spark.kubernetes.container.image.pullSecrets=a,b" in conf  # executors


def test_without_pull_secrets_nothing_changes_so_an_upgrade_rolls_no_pod() -> None:
    plain = render_resources(parse_resources(_quickstart()))
    assert plain == render_resources(parse_resources(_quickstart()), image=WorkloadImage())
    assert all("imagePullSecrets" not in o.get("spec", {}) for o in plain)


def test_secrets_configmaps_and_claims_beside_the_resources_are_passed_over(
    tmp_path: Path,
) -> None:
    """A directory as `kubectl apply -f` takes it: the claim and Secret a pipeline needs
    sit beside it, and render (which once refused every `v1` object) previews the rest."""
    core = [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "code"}, "data": {}},
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "copier-checkpoint"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    ]
    manifest = tmp_path / "pipeline.yaml"
    manifest.write_text(yaml.safe_dump_all([*core, *_quickstart()]))
    rendered = subprocess.run(
        [sys.executable, "-m", "onceflow", "render", str(manifest)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert rendered.returncode == 0, rendered.stderr
    kinds = {d["kind"] for d in yaml.safe_load_all(rendered.stdout) if d}
    assert "SparkApplication" in kinds and "PersistentVolumeClaim" not in kinds
