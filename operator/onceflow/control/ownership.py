"""The objects a workload's reconciler may replace or delete: only its own.

Children are found by name (``<job>-driver``, ``<job>-job``, a generation's
ConfigMap), and a name is not proof: a Job, SparkApplication or ConfigMap of that
name may belong to another team in the namespace, and a tenant allowed to write only
Onceflow resources must not be able to have the operator delete or rewrite it by
naming a SparkJob after it. A child is the workload's when its controller reference
names the workload's kind and name in Onceflow's group; the uid is not compared, so
that the children of an earlier object of the same name (deleted, not yet collected)
are still replaced rather than blocking the new one forever.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onceflow.control.errors import InvalidWorkloadError
from onceflow.model.objects import controller_of

NAME_TAKEN = "NameTaken"


def is_ours(child: Mapping[str, Any], owner_kind: str, owner_name: str) -> bool:
    return controller_of(child) == (owner_kind, owner_name)


def refuse_unless_ours(child: Mapping[str, Any], owner_kind: str, owner_name: str) -> None:
    """Raises ``InvalidWorkloadError`` (``NameTaken``) for a child that is not the
    workload's: the workload stays Degraded and the object is left as it is."""
    if is_ours(child, owner_kind, owner_name):
        return
    kind = child.get("kind") or "object"
    name = child.get("metadata", {}).get("name")
    raise InvalidWorkloadError(
        NAME_TAKEN,
        f"metadata.name: a {kind} {name!r} exists in this namespace and is not this "
        f"{owner_kind}'s, and Onceflow replaces or deletes only its own objects; rename "
        f"the {owner_kind}, or remove that {kind} if it is no longer needed",
    )
