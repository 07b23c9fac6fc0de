"""The getting-started page's marked steps, as the real-node test reads them."""

from __future__ import annotations

from pathlib import Path

from tests.support.guide import Guide, guide_file, guide_steps
from tests.support.testbed import ROOT


def test_the_page_marks_a_whole_quickstart_in_order() -> None:
    steps = guide_steps((ROOT / "docs" / "getting-started.md").read_text(), [])
    files = [step.file for step in steps if step.file]
    assert files == [
        "onceflow-values.yaml",
        "checkpoint-pvc.yaml",
        "first-pipeline.yaml",
        "audit-job.yaml",
    ]
    commands = "\n".join(step.text for step in steps if step.file is None)
    order = ["create secret", "helm install", "kubectl apply -f checkpoint-pvc.yaml"]
    order += ["kubectl logs", "helm uninstall"]
    places = [commands.index(words) for words in order]
    assert places == sorted(places), order


def test_steps_run_in_stretches_with_the_substitutions(tmp_path: Path) -> None:
    page = (
        "<!-- quickstart-test: file a.yaml -->\n```yaml\nname: example\n```\n"
        "text\n<!-- quickstart-test: run -->\n```bash\ncat a.yaml\n```\n"
        "<!-- quickstart-test: run -->\n```bash\necho example-two\n```\n"
    )
    guide = Guide(
        guide_steps(page, [(r"\bexample\b", "mine")]), tmp_path, {"PATH": "/usr/bin:/bin"}
    )
    assert guide_file(page, "a.yaml") == "name: example"
    assert guide.run_through("cat a.yaml") == "name: mine\n"
    assert not guide.done
    assert guide.run_through("echo") == "mine-two\n"
    assert guide.done
