"""What a service account did, from the test bed API servers' audit logs
(scripts/k8s.sh logs every service account's calls at the Metadata level), and what
an RBAC role grants, in the same terms: the least-privilege checks compare the two."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Call = tuple[str, str, str]
"""(API group, resource[/subresource], verb)"""


def calls_by(audit_log: Path, user: str, since: str = "") -> tuple[set[Call], list[str]]:
    """The calls ``user`` made (from ``since``, an RFC 3339 UTC time, on), and the
    ones RBAC refused, with the API server's words. ``audit_log`` is read with the
    backup the API server rotated it to. A 403 from admission (a namespace being
    deleted) is not a missing right."""
    calls, refused = set(), []
    backups = sorted(audit_log.parent.glob(f"{audit_log.stem}-*{audit_log.suffix}"))
    lines = [line for log in (*backups, audit_log) for line in log.read_text().splitlines()]
    for line in lines:
        event = json.loads(line)
        if event["user"]["username"] != user or "objectRef" not in event:
            continue
        if event["stageTimestamp"] < since:
            continue
        ref = event["objectRef"]
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        call = (ref.get("apiGroup", ""), resource, event["verb"])
        decision = event.get("annotations", {}).get("authorization.k8s.io/decision")
        if decision == "forbid":
            message = event.get("responseStatus", {}).get("message", "")
            refused.append(f"{call} in {ref.get('namespace')}: {message}")
        calls.add(call)
    return calls, refused


def granted(role: dict[str, Any]) -> set[Call]:
    """Every (group, resource, verb) a Role or ClusterRole allows (no resourceNames)."""
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
