"""The Argo CD health script shipped with the chart, run by a real Lua interpreter."""

from __future__ import annotations

from typing import Any

import pytest
from lupa import LuaRuntime

from tests.support.testbed import ROOT

SCRIPT = (ROOT / "helm" / "onceflow" / "files" / "argocd-health.lua").read_text()


def _health(obj: dict[str, Any]) -> dict[str, str]:
    """Argo CD calls the script with the object as global ``obj``."""
    lua = LuaRuntime(unpack_returned_tuples=True)

    def table(value: Any) -> Any:
        if isinstance(value, dict):
            return lua.table_from({k: table(v) for k, v in value.items()})
        if isinstance(value, list):
            return lua.table_from([table(v) for v in value])
        return value

    lua.globals().obj = table(obj)
    result = lua.execute(SCRIPT)
    return {"status": result["status"], "message": result["message"]}


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
def test_health_follows_the_conditions(obj: dict[str, Any], status: str, message: str) -> None:
    assert _health(obj) == {"status": status, "message": message}
