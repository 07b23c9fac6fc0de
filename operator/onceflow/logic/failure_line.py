"""The line of a child's log that says why it failed, for the one line ``onceflow run``
prints when a task or driver exits: a user should not have to open the log to learn
that the broker refused a login, and should know which file to open for the rest."""

from __future__ import annotations

import re
import signal

# A Python traceback ends with "SomeError: message"; the connectors and the runtime
# log refusals as "... refused ..." / "... failed ..."; Java logs "ERROR" / "Exception".
_FAILURE = re.compile(r"(Error|Exception|ERROR|FATAL|refused|failed|cannot|denied)")
_LONGEST = 300


def failure_line(log_tail: str) -> str | None:
    """The last line of ``log_tail`` that names a failure, cut to a terminal's width
    or so; None when no line does."""
    for line in reversed(log_tail.splitlines()):
        text = line.strip()
        if text and _FAILURE.search(text):
            return text if len(text) <= _LONGEST else text[: _LONGEST - 1] + "…"
    return None


def exit_description(code: int) -> str:
    """``exited 1``, or ``killed by SIGKILL`` for a negative code: a signal, not a
    choice the child made. The number stays, as scripts and tests match it."""
    if code < 0:
        try:
            return f"exited {code} (killed by {signal.Signals(-code).name})"
        except ValueError:
            return f"exited {code}"
    return f"exited {code}"
