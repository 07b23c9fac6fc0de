"""Observing a workload (KafkaSource or SparkJob) and its Pipeline, the first step of
both reconcilers, with the same status reasons for the same problems."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from onceflow.api import ExactlyOnceMode, Pipeline
from onceflow.api.errors import problems_from
from onceflow.control.errors import InvalidWorkloadError, RetryLaterError
from onceflow.control.kube import KubeClient, Obj

Model = TypeVar("Model", bound=BaseModel)


def parse_workload(model: type[Model], obj: Obj) -> Model:
    """The stored object as its model; a schema the API let through but the model
    rejects (an older CRD) becomes ``InvalidSpec`` in status, never a crash."""
    try:
        return model.model_validate(obj)
    except ValidationError as error:
        text = "; ".join(f"{p}: {m}" for p, m in problems_from(error))
        raise InvalidWorkloadError("InvalidSpec", text) from None


def workload_pipeline(kube: KubeClient, namespace: str, name: str) -> Pipeline:
    pipeline_obj = kube.get("pipelines", namespace, name)
    if pipeline_obj is None:
        raise InvalidWorkloadError(
            "PipelineNotFound",
            f"spec.pipeline: no Pipeline {name!r} in namespace {namespace!r}; "
            "create it or correct the name",
        )
    return Pipeline.model_validate(pipeline_obj)


def pipeline_mode(pipeline: Pipeline) -> ExactlyOnceMode:
    """Workloads run the rollout's *current* mode, never jumping to the target. A
    Pipeline without a rollout status (just created, re-created, status lost) has no
    current mode yet: its reconciler derives one from the workloads first, and until
    then nothing changes (assuming ``disabled`` would downgrade a running pipeline)."""
    if pipeline.status is None:
        raise RetryLaterError(f"Pipeline {pipeline.metadata.name!r} has no rollout status yet", 1.0)
    return pipeline.status.exactly_once.current
