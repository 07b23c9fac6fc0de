"""The Argo CD health script shipped with the chart, evaluated by Argo CD's own Lua VM
(``scripts/argocd-health.sh`` builds it from Argo CD's module): the globals, the
libraries and the checks on the returned table are Argo CD's, not a stand-in's."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.support.testbed import ROOT, script_value

SCRIPT = str(ROOT / "helm" / "onceflow" / "files" / "argocd-health.lua")


@pytest.fixture(scope="module")
def argocd_health() -> str:
    return script_value("scripts/argocd-health.sh")


def _health(evaluate: str, obj: dict[str, Any]) -> dict[str, str]:
    out = subprocess.run(
        [evaluate, SCRIPT], input=json.dumps(obj), capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, str] = json.loads(out.stdout)
    return result


def _obj(conditions: list[dict[str, str]] | None, observed: int = 2) -> dict[str, Any]:
    status = {"observedGeneration": observed, "conditions": conditions} if conditions else None
    return {"metadata": {"generation": 2}, **({"status": status} if status else {})}


@pytest.mark.parametrize(
    ("obj", "status", "message"),
    [
        (_obj(None), "Progressing", "waiting for the operator"),
        (
            _obj([{"type": "Ready", "status": "True", "message": "2/2 task(s) running"}]),
            "Healthy",
            "2/2 task(s) running",
        ),
        (
            _obj(
                [
                    {"type": "Ready", "status": "False", "message": "fencing"},
                    {
                        "type": "Degraded",
                        "status": "True",
                        "reason": "FencingFailed",
                        "message": "no ACL",
                    },
                ]
            ),
            "Degraded",
            "FencingFailed: no ACL",
        ),
        (
            _obj(
                [
                    {"type": "Ready", "status": "False", "message": "x"},
                    {"type": "Progressing", "status": "True", "message": "generation 3 planned"},
                ]
            ),
            "Progressing",
            "generation 3 planned",
        ),
        (
            _obj([{"type": "Ready", "status": "True", "message": "old"}], observed=1),
            "Progressing",
            "the operator has not seen the latest spec yet",
        ),
    ],
)
def test_health_follows_the_conditions(
    argocd_health: str, obj: dict[str, Any], status: str, message: str
) -> None:
    assert _health(argocd_health, obj) == {"status": status, "message": message}
