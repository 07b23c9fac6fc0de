"""Names of everything Onceflow creates, in one place, so the operator, the standalone
runner, the task process and the tests can never disagree about them.

Transactional ids follow one scheme for every producer: ``<prefix>/<kind>/<name>/<n>``.
Kubernetes names cannot contain ``/``, so an id splits back into its parts from the
right whatever the prefix holds: two different producers never get the same id (the
scheme before this one joined the parts with ``-``, which names contain, and a source
``x-sink`` collided with the sink of a job ``x``).
"""

from __future__ import annotations

from onceflow.api.pipeline import Pipeline
from onceflow.api.source import KafkaSource

SOURCE_TASK = "source"
SINK_PARTITION = "sink"
OFFSETS_CHANGE = "offsets"


def producer_id_stem(prefix: str, kind: str, name: str) -> str:
    """What every producer id of workload ``name`` of ``kind`` starts with."""
    return f"{prefix}/{kind}/{name}/"


def producer_id(prefix: str, kind: str, name: str, index: int) -> str:
    """The transactional id of producer ``index`` of workload ``name`` of ``kind``."""
    return f"{producer_id_stem(prefix, kind, name)}{index}"


def task_transactional_id(prefix: str, source: str, task_id: int) -> str:
    """Stable per task, with no generation in it: a restarted task fences its own
    predecessor just by initialising (DESIGN 3.1)."""
    return producer_id(prefix, SOURCE_TASK, source, task_id)


def task_transactional_ids(prefix: str, source: str, task_count: int) -> tuple[str, ...]:
    return tuple(task_transactional_id(prefix, source, i) for i in range(task_count))


def offsets_change_transactional_id(prefix: str, source: str) -> str:
    """The one producer that writes a stopped source's offsets changes: its own id, so
    a change is one transaction, and a crashed attempt's is aborted by the next."""
    return producer_id(prefix, OFFSETS_CHANGE, source, 0)


def legacy_task_transactional_ids(prefix: str, source: str, task_count: int) -> tuple[str, ...]:
    """Ids of the first scheme, still fenced when a generation recorded before ids were
    recorded is replaced."""
    return tuple(f"{prefix}-{source}-{i}" for i in range(task_count))


def offsets_topic(pipeline: Pipeline, source: KafkaSource) -> str:
    return source.spec.offsets_topic or (
        f"{pipeline.transactional_id_prefix}-{source.metadata.name}-offsets"
    )


def task_pod_name(source: str, generation: int, task_id: int) -> str:
    return f"{source}-g{generation}-{task_id}"
