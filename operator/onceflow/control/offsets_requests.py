"""``onceflow offsets`` against a cluster: what a stopped source's status lists, and a
change asked through its spec, which the operator then applies (KIP-875's REST calls,
made declarative so the same change can come from Git).

Nothing here writes to Kafka: the operator does, once the source's generation is
fenced. The CLI only refuses early what the operator would refuse anyway (a source
that is not stopped), so nobody waits for a refusal they could have been told.
"""

from __future__ import annotations

import json
import time
from typing import Any

from kubernetes import client

from onceflow.api.handled_requests import handled
from onceflow.api.pipeline import WorkloadState
from onceflow.api.source import (
    KafkaSourceStatus,
    OffsetsChange,
    OffsetsChangeResult,
    OffsetsChangeStatus,
)

GROUP, VERSION, PLURAL = "onceflow.io", "v1alpha1", "kafkasources"
HTTP_UNPROCESSABLE = 422


class OffsetsRequestError(Exception):
    """What keeps the request from being made, and what to do."""


def _status(api: client.ApiClient, namespace: str, name: str) -> KafkaSourceStatus:
    try:
        obj = client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name
        )
    except client.ApiException as error:
        if error.status == 404:
            raise OffsetsRequestError(f"no KafkaSource {namespace}/{name}") from None
        raise
    return KafkaSourceStatus.model_validate(obj.get("status") or {})


def _require_stopped(status: KafkaSourceStatus, namespace: str, name: str) -> None:
    state = status.state or WorkloadState.RUNNING
    if state is WorkloadState.STOPPED and status.stop_fenced:
        return
    tasks = "being fenced" if state is WorkloadState.STOPPED else "running"
    raise OffsetsRequestError(
        f"KafkaSource {namespace}/{name} is not stopped (state {state.value}, its tasks "
        f"{tasks}); offsets are listed and changed only once it is: set spec.state: "
        "stopped and wait for status.stopFenced"
    )


def listed_offsets(api: client.ApiClient, namespace: str, name: str) -> list[dict[str, Any]]:
    status = _status(api, namespace, name)
    _require_stopped(status, namespace, name)
    assert status.offsets is not None, "a stopped source's status lists its offsets"
    return [entry.to_wire() for entry in status.offsets.partitions]


def request_change(
    api: client.ApiClient, namespace: str, name: str, change: OffsetsChange, wait_s: float
) -> OffsetsChangeStatus | None:
    """Writes ``change`` into the source's spec and waits up to ``wait_s`` for the
    operator's outcome (None: not yet)."""
    status = _status(api, namespace, name)
    _require_stopped(status, namespace, name)
    last = status.offsets_change
    if last is not None and handled(change.id, last.id, last.earlier):
        when = last.result.value if last.id == change.id else "before the last change"
        raise OffsetsRequestError(
            f"change {change.id!r} was handled already ({when}); "
            "each id is applied once: give this change a new id"
        )
    try:
        client.CustomObjectsApi(api).patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, {"spec": {"offsetsChange": change.to_wire()}}
        )
    except client.ApiException as error:
        if error.status != HTTP_UNPROCESSABLE:
            raise
        # The admission webhook's refusal (the spec was set running since the status said
        # stopped, say): its message names the field and the fix.
        said = json.loads(error.body or "{}").get("message") or error.reason
        raise OffsetsRequestError(f"KafkaSource {namespace}/{name}: {said}") from None
    deadline = time.monotonic() + wait_s
    while True:
        outcome = _status(api, namespace, name).offsets_change
        if (
            outcome is not None
            and outcome.id == change.id
            and outcome.result is not OffsetsChangeResult.APPLYING
        ):
            return outcome
        if time.monotonic() >= deadline:
            return None
        time.sleep(1.0)
