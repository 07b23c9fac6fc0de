"""Resolving a workload against what it refers to: a KafkaSource against its Pipeline
and connector, a SparkJob against its Pipeline, input sources and sink Secret.

One resolver per kind, so the operator's status, the admission response, ``onceflow
render`` and ``onceflow run`` refuse the same things with the same words. Each caller
finds the referenced objects its own way (the API server, the manifests it was given)
and maps the problems to its own error in one line.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from onceflow.api.connector import ConnectorLookup
from onceflow.api.driver import SparkJobSettings
from onceflow.api.errors import (
    PIPELINE_NOT_FOUND,
    SECRET_NOT_FOUND,
    SOURCE_NOT_FOUND,
    TRANSFORM_CODE_NOT_FOUND,
    Problem,
)
from onceflow.api.pipeline import ExactlyOnceMode, Pipeline
from onceflow.api.source import KafkaSource
from onceflow.api.spark import SparkJob
from onceflow.logic.preflight import at_least_once_sink_problem, preflight_source
from onceflow.logic.rollout import ORDER as ROLLOUT_ORDER
from onceflow.model.spark_app import job_settings
from onceflow.model.tasks import DesiredTasks, desired_tasks

IN_MANIFESTS = "in the given manifests"
"""Where ``onceflow run`` and ``onceflow render`` look for what a workload refers to."""


def missing_pipeline(name: str, where: str) -> Problem:
    return Problem(
        "spec.pipeline",
        f"no Pipeline {name!r} {where}; create it or correct the name",
        PIPELINE_NOT_FOUND,
    )


def resolve_source(
    source: KafkaSource,
    pipeline: Pipeline | None,
    connectors: ConnectorLookup,
    *,
    where: str,
    mode: ExactlyOnceMode | None = None,
    bootstrap_override: str | None = None,
    kafka_config_dir: str | None = None,
    secrets: Mapping[str, Mapping[str, str]] | None = None,
) -> DesiredTasks | list[Problem]:
    """The tasks to run (in ``mode``, else the pipeline's target), or every problem.
    ``where`` says where the Pipeline was looked for, for the message; ``secrets``: the
    Secrets at hand, when the connector's Secret is read here (``onceflow run``)."""
    problems: list[Problem] = []
    secret_ref = source.spec.connector.secret_ref
    if secret_ref is not None and secrets is not None:
        problems += _connector_secret_problems(secret_ref.name, secrets, where)
    try:
        connector = connectors(source.spec.connector.type)
    except LookupError as error:
        problems.append(Problem("spec.connector.type", str(error)))
    else:
        problems += preflight_source(source.spec, connector)
    if pipeline is None:
        problems.append(missing_pipeline(source.spec.pipeline, where))
    if problems or pipeline is None:
        return problems
    configs = connector.task_configs(source.spec.connector.config, source.spec.tasks_max)
    return desired_tasks(
        pipeline,
        source,
        configs,
        bootstrap_override,
        mode=mode,
        kafka_config_dir=kafka_config_dir,
    )


SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _connector_secret_problems(
    name: str, secrets: Mapping[str, Mapping[str, str]], where: str
) -> list[Problem]:
    """The Secret exists, and each key can be a file name (as in a pod's mount)."""
    if name not in secrets:
        return [
            Problem(
                "spec.connector.secretRef",
                f"no Secret {name!r} {where}; add it next to the source",
                SECRET_NOT_FOUND,
            )
        ]
    return [
        Problem(
            "spec.connector.secretRef",
            f"Secret {name!r}: key {key!r} is not a valid Secret key (letters, digits, "
            "'-', '_', '.'); rename it",
        )
        for key in secrets[name]
        if not SECRET_KEY.match(key) or key in {".", ".."}
    ]


def resolve_spark_job(
    job: SparkJob,
    pipeline: Pipeline | None,
    source_topics: Mapping[str, str],
    *,
    where: str,
    mode: ExactlyOnceMode | None = None,
    secrets: Mapping[str, Mapping[str, str]] | None = None,
) -> SparkJobSettings | list[Problem]:
    """The driver's settings (in ``mode``, else the pipeline's target), or every
    problem. ``source_topics``: topics of the KafkaSources found among those the job
    names. ``secrets``: the Secrets at hand, when the sink's DSN is read here (``onceflow
    run``); None where the Secret is mounted instead (a pod)."""
    problems: list[Problem] = []
    if pipeline is None:
        problems.append(missing_pipeline(job.spec.pipeline, where))
    else:
        target = pipeline.spec.exactly_once
        # The target counts too: a rollout on its way up must not start with this sink.
        strictest = max(mode or target, target, key=ROLLOUT_ORDER.index)
        refused = at_least_once_sink_problem(job.spec, pipeline.metadata.name, strictest)
        if refused:
            problems.append(refused)
    missing = [name for name in job.spec.input.sources or [] if name not in source_topics]
    if missing:
        problems.append(
            Problem(
                "spec.input.sources",
                f"no KafkaSource {', '.join(map(repr, missing))} {where}; list topics "
                "under spec.input.topics instead for topics Onceflow does not write",
                SOURCE_NOT_FOUND,
            )
        )
    postgres = job.spec.sink.postgres
    if (
        postgres is not None
        and secrets is not None
        and "dsn" not in (secrets.get(postgres.secret_ref.name) or {})
    ):
        problems.append(
            Problem(
                "spec.sink.postgres.secretRef",
                f"no Secret {postgres.secret_ref.name!r} with key 'dsn' {where}; add one "
                "(stringData: {dsn: ...}) next to the job",
                SECRET_NOT_FOUND,
            )
        )
    if problems or pipeline is None:
        return problems
    return job_settings(job, pipeline, mode or pipeline.spec.exactly_once, source_topics)


def transform_code_problem(
    job: SparkJob, files: Collection[str] | None, where: str
) -> Problem | None:
    """Why ``transform.configMap`` cannot give the driver its module (``files``: the
    ConfigMap's keys, None when it does not exist): found before a driver pod waits
    on a volume that cannot mount, or fails on an import."""
    transform = job.spec.transform
    if transform.config_map is None or transform.module is None:
        return None
    name = transform.config_map
    if files is None:
        return Problem(
            "spec.transform.configMap",
            f"no ConfigMap {name!r} {where}; create it from the module's files "
            f"(kubectl create configmap {name} --from-file={transform.module}.py)",
            TRANSFORM_CODE_NOT_FOUND,
        )
    wanted = f"{transform.module}.py"
    if wanted not in files:
        return Problem(
            "spec.transform.module",
            f"ConfigMap {name!r} has no key {wanted!r} (it has "
            f"{', '.join(sorted(files)) or 'none'}); a ConfigMap holds modules, not packages",
            TRANSFORM_CODE_NOT_FOUND,
        )
    return None
