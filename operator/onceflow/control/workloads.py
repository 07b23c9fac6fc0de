"""Observing a workload (KafkaSource or SparkJob) and its Pipeline, the first step of
both reconcilers, with the same status reasons for the same problems."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from onceflow.api import ExactlyOnceMode, Pipeline
from onceflow.api.errors import SECRET_NOT_FOUND, Problem, problems_from
from onceflow.control.errors import InvalidWorkloadError, RetryLaterError
from onceflow.control.kube import KubeClient, Obj
from onceflow.logic.client_keys import refusal_message, refused_secret_keys
from onceflow.logic.tenant_policy import TenantPolicy

KAFKA_SETTING_REFUSED = "KafkaSettingRefused"

Model = TypeVar("Model", bound=BaseModel)


def parse_workload(model: type[Model], obj: Obj) -> Model:
    """The stored object as its model; a schema the API let through but the model
    rejects (an older CRD) becomes ``InvalidSpec`` in status, never a crash."""
    try:
        return model.model_validate(obj)
    except ValidationError as error:
        raise invalid_workload(problems_from(error)) from None


def invalid_workload(problems: Sequence[Problem]) -> InvalidWorkloadError:
    """The first problem's reason goes to the conditions, every problem to the message."""
    return InvalidWorkloadError(problems[0].reason, "; ".join(map(str, problems)))


def find_pipeline(
    kube: KubeClient, namespace: str, name: str, policy: TenantPolicy
) -> Pipeline | None:
    """The workload's Pipeline; one invalid, or refused by the tenant policy, stops the
    workload too (its ids and topics come from the Pipeline)."""
    found = kube.get("pipelines", namespace, name)
    if found is None:
        return None
    try:
        pipeline = Pipeline.model_validate(found)
    except ValidationError as error:
        problems = problems_from(error)
    else:
        problems = policy.pipeline_problems(pipeline)
        if not problems:
            return pipeline
    raise InvalidWorkloadError(
        "PipelineInvalid",
        f"spec.pipeline: Pipeline {name!r} is invalid "
        f"({'; '.join(map(str, problems))}); its status says the same",
    )


def pipeline_client_settings(
    kube: KubeClient, pipeline: Pipeline, extra_accepted: frozenset[str]
) -> dict[str, str]:
    """The Kafka client settings of the Pipeline's auth Secret, as the operator's own
    clients may use them: a missing Secret or a setting it does not accept makes the
    workload Degraded, naming the Secret and the keys."""
    secret = pipeline.spec.kafka.auth_secret_ref
    if secret is None:
        return {}
    namespace = pipeline.metadata.namespace
    found = kube.secret_if_present(namespace, secret.name)
    if found is None:
        raise InvalidWorkloadError(
            SECRET_NOT_FOUND,
            f"spec.kafka.authSecretRef of Pipeline {pipeline.metadata.name!r}: Secret "
            f"{secret.name!r} not found {where_in(namespace)}; create it or fix the name",
        )
    refused = refused_secret_keys(found[0], extra_accepted)
    if refused:
        raise InvalidWorkloadError(KAFKA_SETTING_REFUSED, refusal_message(secret.name, refused))
    return found[0]


def where_in(namespace: str) -> str:
    """Where the operator looks for what a workload refers to, for messages."""
    return f"in namespace {namespace!r}"


def current_mode(pipeline: Pipeline | None) -> ExactlyOnceMode | None:
    """The rollout's current mode, None while it has none (or no Pipeline exists)."""
    if pipeline is None or pipeline.status is None:
        return None
    return pipeline.status.exactly_once.current


def require_current_mode(pipeline: Pipeline) -> ExactlyOnceMode:
    """Workloads run the rollout's *current* mode, never jumping to the target. A
    Pipeline without a rollout status (just created, re-created, status lost) has no
    current mode yet: its reconciler derives one from the workloads first, and until
    then nothing changes (assuming ``disabled`` would downgrade a running pipeline)."""
    mode = current_mode(pipeline)
    if mode is None:
        raise RetryLaterError(f"Pipeline {pipeline.metadata.name!r} has no rollout status yet", 1.0)
    return mode
