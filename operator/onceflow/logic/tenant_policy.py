"""What a tenant may ask of the platform by writing a Onceflow resource.

Writing a KafkaSource or SparkJob makes the operator create pods: without limits that
is the power to run any image, mount any volume, take any ServiceAccount's token and
load code from anywhere, with Spark settings alone. The platform admin decides what
is allowed beyond a safe default (chart values, read once at the operator's start);
the webhook refuses the rest at ``kubectl apply`` and the operator, which is the
boundary, refuses to render it (Degraded, naming the key and the chart value).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from onceflow.api.errors import Problem
from onceflow.api.pipeline import Pipeline
from onceflow.api.source import KafkaSource
from onceflow.api.spark import RESERVED_ENV, SPARK_ENV_KEYS, SparkJob, SparkJobSpec
from onceflow.logic.spark_conf_rules import smuggled, tenant_rule, value_refused
from onceflow.model.checkpoint_places import path_place

# Spark's keys for plain environment variables, judged by the variable's name.
ENV_CONF_PREFIXES = ("spark.executorEnv.", "spark.kubernetes.driverEnv.")
# Settings that load code or native libraries from somewhere else than the image, or
# hook code into the JVM.
CODE_LOADING_KEYS = frozenset(
    {
        "spark.jars",
        "spark.jars.packages",
        "spark.jars.repositories",
        "spark.jars.ivy",
        "spark.jars.ivySettings",
        "spark.submit.pyFiles",
        "spark.files",
        "spark.archives",
        "spark.pyspark.python",
        "spark.pyspark.driver.python",
        "spark.driver.extraClassPath",
        "spark.executor.extraClassPath",
        "spark.driver.extraLibraryPath",
        "spark.executor.extraLibraryPath",
        "spark.driver.extraJavaOptions",
        "spark.executor.extraJavaOptions",
        "spark.driver.defaultJavaOptions",
        "spark.executor.defaultJavaOptions",
        "spark.driver.userClassPathFirst",
        "spark.executor.userClassPathFirst",
        "spark.plugins",
        "spark.extraListeners",
        "spark.sql.extensions",
        "spark.sql.queryExecutionListeners",
        "spark.sql.streaming.streamingQueryListeners",
    }
)
# What Onceflow sets for exactly-once (DESIGN 3.4): a user's value would be overridden.
ONCEFLOW_KEYS = frozenset(
    {"spark.sql.streaming.checkpointLocation", "spark.speculation", "spark.task.maxFailures"}
)
ONCEFLOW_PREFIX = "spark.onceflow."
# Environment a JVM or Python reads as options or code at start: JAVA_TOOL_OPTIONS
# carries any refused setting (-Dspark.kubernetes.executor.container.image=…), LD_* and
# PYTHON* load libraries and modules from wherever they point.
LOADER_ENV = re.compile(
    r"^(JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|JDK_JAVA_OPTIONS|CLASSPATH|LD_.*|PYTHON.*)$"
)


def _why_refused(key: str) -> str | None:
    if key in ONCEFLOW_KEYS or key.startswith(ONCEFLOW_PREFIX):
        return "is set by Onceflow for exactly-once delivery; remove it"
    if key in CODE_LOADING_KEYS:
        return "loads code from outside the image; put it in the image (or spec.transform)"
    if key.startswith("spark.kubernetes."):
        return (
            "chooses the pods' identity, volumes, image, template or nodes; use "
            "spec.image, spec.env, spec.driver and spec.executor"
        )
    return None


def _why_not_for_tenants(key: str, value: str) -> str | None:
    """Why a key no admin allowed is refused: a known escape by name, else not on the
    tenants' list, or not in the shape its value must have."""
    rule = tenant_rule(key)
    if rule is None:
        return _why_refused(key) or (
            "is not among the settings tenants may set (memory, cores, parallelism, SQL "
            "planning and formats, streaming state: docs/security.md lists them)"
        )
    if value_refused(rule, value):
        return f"takes a value of the form {rule.value!r}, not {value!r}"
    return None


@dataclass(frozen=True)
class TenantPolicy:
    """The platform admin's allowances, read once at start. Each check returns the
    problems by field, so the webhook's refusal and the status say the same."""

    extra_secret_keys: frozenset[str] = frozenset()
    """Kafka settings accepted from auth Secrets beyond logic.client_keys' list."""
    connector_modules: frozenset[str] = frozenset()
    """Modules (and their packages) a ``module:Class`` connector may come from."""
    spark_conf_keys: frozenset[str] = frozenset()
    """sparkConf keys allowed although refused by default; a name ending in "." allows
    every key under it."""
    image_prefixes: tuple[str, ...] = ()
    """Images a workload may name (``spec.image``) start with one of these; empty: any.
    Each ends in "/" (``image_prefix``): "registry.example.com" must not admit
    "registry.example.com.evil.io/x"."""

    storage_prefixes: tuple[str, ...] = ()
    """Where a SparkJob's checkpoint and file sink may be, each with ``{namespace}``
    standing for the job's namespace (``s3a://lake/{namespace}/``); empty: anywhere.
    With one cloud identity per namespace, the identity's own policy bounds what a
    driver can reach; this bounds what a tenant may name, whatever the identity."""
    any_prefix: bool = False
    """Whether a Pipeline's ``spec.transactionalIdPrefix`` may be any string (a cluster
    of one team), rather than one of its own namespace's."""

    def resource_problems(self, resource: Pipeline | KafkaSource | SparkJob) -> list[Problem]:
        """What this policy refuses in one resource: the webhook, the reconcilers,
        ``render`` and ``run`` all ask this, so each refuses the same inputs."""
        if isinstance(resource, Pipeline):
            return self.pipeline_problems(resource)
        if isinstance(resource, SparkJob):
            return self.spark_job_problems(resource)
        return self.image_problems(resource.spec.image)

    def pipeline_problems(self, pipeline: Pipeline) -> list[Problem]:
        """A transactional-id prefix outside the Pipeline's namespace. Kafka knows no
        namespaces: a prefix is the key to a workload's producer ids and offsets topic,
        and whichever Pipeline claims one first holds it. Tied to the namespace, no
        tenant can claim another's before it does, nor learn by trying which prefixes
        other namespaces use."""
        prefix = pipeline.spec.transactional_id_prefix
        namespace = pipeline.metadata.namespace
        if prefix is None or self.any_prefix or prefix.startswith(f"{namespace}."):
            return []
        if pipeline.status and pipeline.status.accepted_transactional_id_prefix == prefix:
            return []  # in use from before the rule (control.pipeline records it)
        return [
            Problem(
                "spec.transactionalIdPrefix",
                f"{prefix!r} does not start with this namespace's name and a dot "
                f"({namespace}.): each namespace's prefixes are its own, so that no "
                f"tenant can take another's transactional ids first; use "
                f"'{namespace}.<name>', or leave it unset for the default (a platform "
                "admin may allow any prefix: chart value tenants.anyTransactionalIdPrefix)",
                reason="PrefixRefused",
            )
        ]

    def _conf_allowed(self, key: str) -> bool:
        return any(
            key == allowed or (allowed.endswith(".") and key.startswith(allowed))
            for allowed in self.spark_conf_keys
        )

    def spark_job_problems(self, job: SparkJob) -> list[Problem]:
        """Everything in a SparkJob the platform does not allow, by field."""
        spec = job.spec
        return (
            self.spark_conf_problems(spec.spark_conf)
            + self._env_problems(spec)
            + self.image_problems(spec.image)
            + self._storage_problems(job)
        )

    def _storage_problems(self, job: SparkJob) -> list[Problem]:
        """Checkpoint and file-sink URIs outside the namespace's storage. A path of the
        pod's own file system is the pod's (a claim is mounted, never a shared path)."""
        if not self.storage_prefixes:
            return []
        namespace = job.metadata.namespace
        allowed = [p.replace("{namespace}", namespace) for p in self.storage_prefixes]
        places = [path_place(p) for p in allowed]
        named = {
            "spec.checkpoint.path": job.spec.checkpoint.path,
            "spec.sink.files.path": job.spec.sink.files.path if job.spec.sink.files else None,
        }
        problems = []
        for field, uri in named.items():
            if uri is None or (place := path_place(uri)).local:
                continue
            if not any(place.within(prefix) for prefix in places):
                problems.append(
                    Problem(
                        field,
                        f"{uri!r} is outside this namespace's storage ({', '.join(allowed)}): "
                        "a tenant reads and writes only its own checkpoints and outputs; "
                        "use a path under one of them",
                        reason="StorageRefused",
                    )
                )
        return problems

    def _env_problems(self, spec: SparkJobSpec) -> list[Problem]:
        """Variables that load code or options at start, from ``env`` or from sparkConf's
        own environment keys (which also may not set what ``env`` may not)."""
        named = [(f"spec.env[{i}].name", v.name) for i, v in enumerate(spec.env)] + [
            (f"spec.sparkConf[{key!r}]", key.removeprefix(prefix))
            for key in sorted(spec.spark_conf)
            for prefix in SPARK_ENV_KEYS
            if key.startswith(prefix)
        ]
        problems = []
        for field, name in named:
            refused = LOADER_ENV.match(name) or (
                field.startswith("spec.sparkConf") and re.match(RESERVED_ENV, name)
            )
            if refused and not self._conf_allowed(f"spark.executorEnv.{name}"):
                problems.append(
                    Problem(
                        field,
                        f"{name} makes the JVM or Python load code or options at start; "
                        "use sparkConf for Spark settings and the image for code (a "
                        "platform admin may allow it: tenants.sparkConfKeys entry "
                        f"spark.executorEnv.{name})",
                        reason="SettingRefused",
                    )
                )
        return problems

    def spark_conf_problems(self, conf: Mapping[str, str]) -> list[Problem]:
        """Keys tenants may not set (``logic.spark_conf_rules``), unless the admin
        allowed them; a key or value Spark would read as another setting, always."""
        problems = []
        for key in sorted(conf):
            field = f"spec.sparkConf[{key!r}]"
            if why := smuggled(key, conf[key]):
                problems.append(Problem(field, f"{why}; remove it", reason="SettingRefused"))
            elif key.startswith(ENV_CONF_PREFIXES) or self._conf_allowed(key):
                continue  # environment is judged by the variable's name (_env_problems)
            elif why := _why_not_for_tenants(key, conf[key]):
                problems.append(
                    Problem(
                        field,
                        f"{why} (a platform admin may allow it: chart value tenants.sparkConfKeys)",
                        reason="SettingRefused",
                    )
                )
        return problems

    def image_problems(self, image: str | None) -> list[Problem]:
        """An image from outside the allowed registries (None: the platform's default)."""
        if image is None or not self.image_prefixes or image.startswith(self.image_prefixes):
            return []
        return [
            Problem(
                "spec.image",
                f"{image!r} is not from an allowed registry ({', '.join(self.image_prefixes)}); "
                "use an image from one of them, or leave spec.image unset for the default",
                reason="ImageRefused",
            )
        ]


DEFAULT_POLICY = TenantPolicy()
"""Nothing allowed beyond the defaults."""


def _names(environ: Mapping[str, str], variable: str) -> frozenset[str]:
    listed = environ.get(variable, "")
    return frozenset(name.strip() for name in listed.split(",") if name.strip())


def policy_from(environ: Mapping[str, str]) -> TenantPolicy:
    """The policy the chart gives the operator, as environment variables (each list
    comma-separated): read by the operator, and by ``onceflow render`` so that a
    preview refuses what the operator would."""
    return TenantPolicy(
        extra_secret_keys=_names(environ, "ONCEFLOW_EXTRA_SECRET_KEYS"),
        connector_modules=_names(environ, "ONCEFLOW_CONNECTOR_MODULES"),
        spark_conf_keys=_names(environ, "ONCEFLOW_SPARK_CONF_KEYS"),
        image_prefixes=tuple(sorted(map(image_prefix, _names(environ, "ONCEFLOW_IMAGE_PREFIXES")))),
        storage_prefixes=tuple(sorted(_names(environ, "ONCEFLOW_STORAGE_PREFIXES"))),
        any_prefix=environ.get("ONCEFLOW_ANY_TRANSACTIONAL_ID_PREFIX") == "true",
    )


def image_prefix(configured: str) -> str:
    """A configured registry or repository prefix, ending at a path boundary."""
    return configured if configured.endswith("/") else f"{configured}/"
