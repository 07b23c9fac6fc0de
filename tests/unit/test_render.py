"""`onceflow render` previews exactly what the operator would create."""

from __future__ import annotations

import yaml

from onceflow.api import parse_resources
from onceflow.render import render_resources
from tests.support.testbed import ROOT


def test_quickstart_renders_a_configmap_and_one_pod_per_task() -> None:
    documents = list(yaml.safe_load_all((ROOT / "examples" / "quickstart.yaml").read_text()))
    objects = render_resources(parse_resources(documents))
    kinds = [o["kind"] for o in objects]
    assert kinds == ["ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Pod", "Pod", "Pod"]
    role = objects[1]
    assert role["rules"] == [
        {"apiGroups": ["onceflow.io"], "resources": ["kafkasources"], "verbs": ["get"]}
    ]
    configmap, *pods = objects[3:]
    assert sorted(configmap["data"]) == ["task-0.json", "task-1.json", "task-2.json"]
    assert [p["metadata"]["name"] for p in pods] == ["counter-g1-0", "counter-g1-1", "counter-g1-2"]
    for p in pods:
        assert p["spec"]["restartPolicy"] == "OnFailure"
        assert p["metadata"]["labels"]["onceflow.io/mode"] == "enabled"
        assert p["spec"]["volumes"][0]["configMap"]["name"] == "counter-g1"
