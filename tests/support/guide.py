"""The getting-started page as the real-node test runs it: every block marked
``<!-- quickstart-test: run -->`` (a shell block) or ``<!-- quickstart-test: file NAME -->``
(a file the page tells the reader to write), in the page's order, with the test bed's
names put in place of the page's examples. What a reader copies is what runs, so the
page cannot drift from what works."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

MARKED_BLOCK = re.compile(r"<!-- quickstart-test: (run|file (\S+)) -->\n```\w*\n(.*?)\n```", re.S)


@dataclass(frozen=True)
class GuideStep:
    file: str | None
    """The file the block is written to; None for commands."""
    text: str


def guide_steps(markdown: str, substitutions: Sequence[tuple[str, str]]) -> list[GuideStep]:
    """The marked blocks, each with every (regex, replacement) applied in order."""
    steps = []
    for _, file, block in MARKED_BLOCK.findall(markdown):
        text = block
        for pattern, replacement in substitutions:
            text = re.sub(pattern, replacement, text)
        steps.append(GuideStep(file or None, text))
    return steps


def guide_file(markdown: str, name: str) -> str:
    """A file the page tells the reader to write, as it gives it."""
    (text,) = [step.text for step in guide_steps(markdown, []) if step.file == name]
    return text


class Guide:
    """Runs the steps in order, in ``workdir`` with ``env``, a stretch at a time."""

    def __init__(self, steps: Sequence[GuideStep], workdir: Path, env: Mapping[str, str]):
        self.steps = list(steps)
        self.workdir = workdir
        self.env = dict(env)
        self.position = 0

    @property
    def done(self) -> bool:
        return self.position == len(self.steps)

    def run_through(self, words: str) -> str:
        """Runs the steps from where the last call stopped through the first one whose
        text contains ``words``; returns that stretch's output."""
        ahead = self.steps[self.position :]
        last = next((i for i, step in enumerate(ahead) if words in step.text), None)
        assert last is not None, f"no step with {words!r} after step {self.position}"
        output = []
        for step in ahead[: last + 1]:
            self.position += 1
            if step.file is not None:
                (self.workdir / step.file).write_text(step.text + "\n")
                continue
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", step.text],
                cwd=self.workdir,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            output.append(done.stdout)
            assert done.returncode == 0, (
                f"the guide's step {self.position} failed ({done.returncode}):\n{step.text}\n"
                f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
            )
        return "".join(output)
