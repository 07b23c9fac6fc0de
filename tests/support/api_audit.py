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
    ones refused (403) with the API server's words."""
    calls, refused = set(), []
    for line in audit_log.read_text().splitlines():
        event = json.loads(line)
        if event["user"]["username"] != user or "objectRef" not in event:
            continue
        if event["stageTimestamp"] < since:
            continue
        ref = event["objectRef"]
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        call = (ref.get("apiGroup", ""), resource, event["verb"])
        status = event.get("responseStatus", {})
        if status.get("code") == 403:
            refused.append(f"{call} in {ref.get('namespace')}: {status.get('message', '')}")
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
