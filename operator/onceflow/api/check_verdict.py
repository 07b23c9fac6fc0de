"""What a connector's ``check`` finding means under the source's
``spec.exactlyOnceSupport``: the rule the operator and ``onceflow run`` apply before a
source's tasks start (``connectors.checks``), and a task at its own start
(``api.connector.TaskContext.refuse_or_warn``).

Part of the API because it is what ``exactlyOnceSupport`` promises a user, and because
the check runner in ``onceflow.connectors`` may build on ``onceflow.api`` alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from onceflow.api.connector import EXACTLY_ONCE_WAIVER, ConfigProblem
from onceflow.api.source import ExactlyOnceSupport


@dataclass(frozen=True)
class SourceCheckVerdict:
    """What a connector's ``check`` found, judged against the source's
    ``exactlyOnceSupport``."""

    refusals: tuple[ConfigProblem, ...]
    """Each keeps every task of a new generation from starting."""
    waived: tuple[ConfigProblem, ...] = ()
    """Problems that stand only in the way of exactly-once, which the source merely
    requested: it runs without it, as under a config the connector declares no support
    for (``logic.preflight.preflight_source``), and the caller says so in its log."""


def judge_source_check(
    support: ExactlyOnceSupport, found: Sequence[ConfigProblem]
) -> SourceCheckVerdict:
    """``found``: the connector's ``check`` of a config that passed preflight. Under
    ``required`` every problem refuses, and one that only takes exactly-once away says
    which setting trades it for running (the connector's own message names the fix in
    the source system); under ``requested`` such a problem is waived."""
    if support is ExactlyOnceSupport.REQUIRED:
        return SourceCheckVerdict(
            tuple(
                replace(p, message=f"{p.message}; {EXACTLY_ONCE_WAIVER}")
                if p.exactly_once_only
                else p
                for p in found
            )
        )
    return SourceCheckVerdict(
        refusals=tuple(p for p in found if not p.exactly_once_only),
        waived=tuple(p for p in found if p.exactly_once_only),
    )
