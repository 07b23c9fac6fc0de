"""What a tenant may set in a SparkJob or KafkaSource, and what the platform may allow."""

from __future__ import annotations

import pytest

from onceflow.api.pipeline import Pipeline
from onceflow.api.spark import SparkJob, SparkJobSpec
from onceflow.logic.tenant_policy import DEFAULT_POLICY, TenantPolicy, image_prefix, policy_from


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


def test_tuning_passes() -> None:
    conf = {
        "spark.sql.shuffle.partitions": "8",
        "spark.executor.memory": "2g",
        "spark.kubernetes.executor.request.cores": "500m",
        "spark.kubernetes.driverEnv.TZ": "UTC",
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.session.timeZone": "Europe/Paris",
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
        ),
    }
    assert DEFAULT_POLICY.spark_conf_problems(conf) == []


@pytest.mark.parametrize(
    "key",
    [
        "spark.kubernetes.node.selector.pool",  # onto the platform's own nodes
        "spark.sql.hive.metastore.jars.path",  # jars from anywhere
        "spark.sql.maven.additionalRemoteRepositories",
        "spark.sql.catalog.evil",  # a catalog plugin class
        "spark.eventLog.dir",  # writes wherever it points
        "spark.some.key.from.next.release",
    ],
)
def test_a_key_not_on_the_tenants_list_is_refused_by_name(key: str) -> None:
    (problem,) = DEFAULT_POLICY.spark_conf_problems({key: "x"})
    assert problem.field == f"spec.sparkConf[{key!r}]" and problem.reason == "SettingRefused"
    assert "tenants.sparkConfKeys" in problem.message
    allowed = TenantPolicy(spark_conf_keys=frozenset({key}))
    assert allowed.spark_conf_problems({key: "x"}) == [], "unless the admin allows it"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("spark.sql.adaptive.customCostEvaluatorClass", "com.evil.Evaluator"),
        ("spark.executor.memory", "2g -XX:OnOutOfMemoryError=sh"),
        ("spark.sql.streaming.stateStore.providerClass", "com.evil.Provider"),
        ("spark.sql.parquet.compression.codec", "/tmp/x"),
    ],
)
def test_an_allowed_key_takes_only_values_of_its_shape(key: str, value: str) -> None:
    (problem,) = DEFAULT_POLICY.spark_conf_problems({key: value})
    assert "takes a value of the form" in problem.message and repr(value) in problem.message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        # Spark splits --conf at the first "=": this would set extraJavaOptions.
        ("spark.driver.extraJavaOptions=-Dspark.kubernetes.executor.container.image", "x"),
        ("spark.sql.shuffle.partitions 8\nspark.jars", "x"),
        ("spark.sql.shuffle.partitions", "8\nspark.jars=http://evil/x.jar"),
    ],
)
def test_a_key_or_value_spark_would_read_as_another_setting_is_refused_even_if_allowed(
    key: str, value: str
) -> None:
    everything = TenantPolicy(spark_conf_keys=frozenset({"spark."}))
    (problem,) = everything.spark_conf_problems({key: value})
    assert problem.reason == "SettingRefused" and "another" in problem.message


def _spec(**fields: object) -> SparkJobSpec:
    return _job(**fields).spec


def _job(namespace: str = "team-a", **fields: object) -> SparkJob:
    base = {
        "pipeline": "p",
        "input": {"topics": ["t"]},
        "transform": {"sql": "SELECT * FROM input"},
        "sink": {"kafka": {"topic": "out", "partitions": 1}},
        "checkpoint": {"path": "/tmp/c"},
    }
    return SparkJob.model_validate(
        {
            "apiVersion": "onceflow.io/v1alpha1",
            "kind": "SparkJob",
            "metadata": {"name": "j", "namespace": namespace},
            "spec": {**base, **fields},
        }
    )


def test_environment_that_loads_code_or_options_is_refused_wherever_it_is_set() -> None:
    job = _job(
        env=[{"name": "TZ", "value": "UTC"}, {"name": "JAVA_TOOL_OPTIONS", "value": "-Dx=y"}],
        sparkConf={
            "spark.executorEnv.LD_PRELOAD": "/tmp/x.so",
            "spark.kubernetes.driverEnv.PYTHONPATH": "/tmp",
            "spark.executorEnv.SPARK_CONF_DIR": "/tmp",
            "spark.executorEnv.LANG": "C.UTF-8",
        },
    )
    refused = DEFAULT_POLICY.spark_job_problems(job)
    assert [p.field for p in refused] == [
        "spec.env[1].name",
        "spec.sparkConf['spark.executorEnv.LD_PRELOAD']",
        "spec.sparkConf['spark.executorEnv.SPARK_CONF_DIR']",
        "spec.sparkConf['spark.kubernetes.driverEnv.PYTHONPATH']",
    ]
    allowed = TenantPolicy(spark_conf_keys=frozenset({"spark.executorEnv.JAVA_TOOL_OPTIONS"}))
    assert "spec.env[1].name" not in [p.field for p in allowed.spark_job_problems(job)]


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


def test_checkpoints_and_file_sinks_stay_in_their_namespaces_storage() -> None:
    """Security review #4: with free URIs, one tenant's driver reads and rewrites
    another's checkpoints and outputs wherever its identity reaches."""
    policy = policy_from({"ONCEFLOW_STORAGE_PREFIXES": "s3a://lake/{namespace}/,gs://eu"})
    own = _job(checkpoint={"path": "s3a://lake/team-a/orders/ck"})
    assert policy.spark_job_problems(own) == []
    theirs = _job(
        checkpoint={"path": "S3A://lake/team-a/../team-b/orders/ck"},
        sink={"files": {"path": "s3a://lake/team-a-evil/out", "format": "json"}},
    )
    assert [(p.field, p.reason) for p in policy.spark_job_problems(theirs)] == [
        ("spec.checkpoint.path", "StorageRefused"),
        ("spec.sink.files.path", "StorageRefused"),
    ]
    (problem, _) = policy.spark_job_problems(theirs)
    assert "is outside this namespace's storage (gs://eu, s3a://lake/team-a/)" in problem.message
    pod_local = _job(checkpoint={"pvc": "ck"}, sink={"files": {"path": "/tmp/out"}})
    assert policy.spark_job_problems(pod_local) == [], "a claim and a pod's own disk"
    assert DEFAULT_POLICY.spark_job_problems(theirs) == [], "no prefixes: anywhere"


def test_a_prefix_recorded_as_kept_from_before_the_rule_passes_and_only_that_one() -> None:
    document = {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "orders", "namespace": "team-a"},
        "spec": {"kafka": {"bootstrapServers": "k:9092"}, "transactionalIdPrefix": "orders-eu"},
        "status": {"acceptedTransactionalIdPrefix": "orders-eu"},
    }
    assert DEFAULT_POLICY.pipeline_problems(Pipeline.model_validate(document)) == []
    document["spec"]["transactionalIdPrefix"] = "orders-us"
    (problem,) = DEFAULT_POLICY.pipeline_problems(Pipeline.model_validate(document))
    assert problem.reason == "PrefixRefused"
