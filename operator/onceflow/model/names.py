"""Names of everything Onceflow creates, in one place, so the operator, the standalone
runner, the task process and the tests can never disagree about them."""

from __future__ import annotations

from onceflow.api.pipeline import Pipeline
from onceflow.api.source import KafkaSource


def task_transactional_id(prefix: str, source: str, task_id: int) -> str:
    """Stable per task, with no generation in it: a restarted task fences its own
    predecessor just by initialising (DESIGN 3.1)."""
    return f"{prefix}-{source}-{task_id}"


def task_transactional_ids(prefix: str, source: str, task_count: int) -> tuple[str, ...]:
    return tuple(task_transactional_id(prefix, source, i) for i in range(task_count))


def offsets_topic(pipeline: Pipeline, source: KafkaSource) -> str:
    return source.spec.offsets_topic or (
        f"{pipeline.transactional_id_prefix}-{source.metadata.name}-offsets"
    )


def task_pod_name(source: str, generation: int, task_id: int) -> str:
    return f"{source}-g{generation}-{task_id}"
