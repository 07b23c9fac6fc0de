"""What a tenant may set in a SparkJob or KafkaSource, and what the platform may allow."""

from __future__ import annotations

import pytest

from onceflow.api.spark import SparkJobSpec
from onceflow.logic.tenant_policy import DEFAULT_POLICY, TenantPolicy, image_prefix


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("spark.kubernetes.authenticate.driver.serviceAccountName", "identity"),
        ("spark.kubernetes.executor.volumes.hostPath.root.mount.path", "volumes"),
        ("spark.kubernetes.executor.container.image", "image"),
        ("spark.kubernetes.executor.podTemplateFile", "template"),
        ("spark.jars.packages", "loads code"),
        ("spark.driver.extraJavaOptions", "loads code"),
        ("spark.sql.extensions", "loads code"),
        ("spark.onceflow.kafka.isolation.level", "set by Onceflow"),
        ("spark.sql.streaming.checkpointLocation", "set by Onceflow"),
        ("spark.speculation", "set by Onceflow"),
    ],
)
def test_settings_that_escape_the_pod_or_the_guarantee_are_refused(key: str, why: str) -> None:
    (problem,) = DEFAULT_POLICY.spark_conf_problems({key: "x"})
    assert problem.field == f"spec.sparkConf[{key!r}]"
    assert why in problem.message and "tenants.sparkConfKeys" in problem.message


def test_tuning_and_placement_pass() -> None:
    conf = {
        "spark.sql.shuffle.partitions": "8",
        "spark.executor.memory": "2g",
        "spark.kubernetes.executor.request.cores": "500m",
        "spark.kubernetes.node.selector.pool": "spark",
        "spark.kubernetes.driverEnv.TZ": "UTC",
    }
    assert DEFAULT_POLICY.spark_conf_problems(conf) == []


def _spec(**fields: object) -> SparkJobSpec:
    base = {
        "pipeline": "p",
        "input": {"topics": ["t"]},
        "transform": {"sql": "SELECT * FROM input"},
        "sink": {"kafka": {"topic": "out", "partitions": 1}},
        "checkpoint": {"path": "/tmp/c"},
    }
    return SparkJobSpec.model_validate({**base, **fields})


def test_environment_that_loads_code_or_options_is_refused_wherever_it_is_set() -> None:
    spec = _spec(
        env=[{"name": "TZ", "value": "UTC"}, {"name": "JAVA_TOOL_OPTIONS", "value": "-Dx=y"}],
        sparkConf={
            "spark.executorEnv.LD_PRELOAD": "/tmp/x.so",
            "spark.kubernetes.driverEnv.PYTHONPATH": "/tmp",
            "spark.executorEnv.SPARK_CONF_DIR": "/tmp",
            "spark.executorEnv.LANG": "C.UTF-8",
        },
    )
    refused = DEFAULT_POLICY.spark_job_problems(spec)
    assert [p.field for p in refused] == [
        "spec.env[1].name",
        "spec.sparkConf['spark.executorEnv.LD_PRELOAD']",
        "spec.sparkConf['spark.executorEnv.SPARK_CONF_DIR']",
        "spec.sparkConf['spark.kubernetes.driverEnv.PYTHONPATH']",
    ]
    allowed = TenantPolicy(spark_conf_keys=frozenset({"spark.executorEnv.JAVA_TOOL_OPTIONS"}))
    assert "spec.env[1].name" not in [p.field for p in allowed.spark_job_problems(spec)]


def test_the_platform_allows_keys_by_name_or_prefix() -> None:
    policy = TenantPolicy(
        spark_conf_keys=frozenset(
            {"spark.driver.extraJavaOptions", "spark.kubernetes.executor.volumes."}
        )
    )
    conf = {
        "spark.driver.extraJavaOptions": "-XX:+UseG1GC",
        "spark.kubernetes.executor.volumes.pvc.data.mount.path": "/data",
        "spark.executor.extraJavaOptions": "-javaagent:/x.jar",
    }
    (left,) = policy.spark_conf_problems(conf)
    assert left.field == "spec.sparkConf['spark.executor.extraJavaOptions']"


def test_images_come_from_the_allowed_registries_when_the_platform_names_some() -> None:
    assert DEFAULT_POLICY.image_problems("anything:1") == []
    prefixes = tuple(map(image_prefix, ("registry.example.com", "ghcr.io/onceflow/")))
    policy = TenantPolicy(image_prefixes=prefixes)
    assert policy.image_problems(None) == [], "the default image is the platform's"
    assert policy.image_problems("ghcr.io/onceflow/onceflow:0.1") == []
    (refused,) = policy.image_problems("registry.example.com.evil.io/x:1")
    assert refused.field == "spec.image" and refused.reason == "ImageRefused"
