"""What /proc says about a test's child process."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.support.waiting import wait_for


def signal_pending(pid: int, signum: int) -> bool:
    """Whether ``signum`` was sent to the process and no thread of it has taken it yet."""
    bit = 1 << (signum - 1)
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("ShdPnd", "SigPnd") and int(value, 16) & bit:
            return True
    return False


def _stat_fields(pid: int | str) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (which may hold spaces):
    state, parent pid, ..."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text.rsplit(")", 1)[1].split()


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``: a Spark driver's JVM and the Python workers the JVM
    started."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            parents[int(entry.name)] = int(_stat_fields(entry.name)[1])
        except (OSError, IndexError):  # ended while listed
            continue
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, up in parents.items() if up == parent]
        found.extend(children)
        frontier.extend(children)
    return found


def ended(pid: int) -> bool:
    """The process runs no more: gone, or a zombie nobody reaped yet."""
    try:
        return _stat_fields(pid)[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):  # gone, or going (ESRCH as it exits)
        return True


def signal_process(pid: int, signum: int) -> bool:
    """Whether the signal reached a live process."""
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        return False
    return True


def kill_process_tree(pid: int) -> None:
    """SIGKILLs the process and everything below it at once, as a pod's end does, and
    waits until none runs: a Spark driver's JVM outliving its Python parent for a
    moment (it stops once it sees the parent's pipe close) could still write the
    checkpoint a caller is about to read."""
    tree = [pid, *descendants(pid)]
    for each in tree:
        signal_process(each, signal.SIGKILL)
    wait_for(lambda: all(ended(each) for each in tree), 30, "the processes to end", 0.05)


def started_at(pid: int) -> float:
    """When the process started (seconds since the epoch): what it did before is not its
    doing (a transaction open under its id since earlier is its predecessor's)."""
    ticks = int(_stat_fields(pid)[19])
    boot = next(
        int(line.split()[1])
        for line in Path("/proc/stat").read_text().splitlines()
        if line.startswith("btime ")
    )
    return boot + ticks / os.sysconf("SC_CLK_TCK")
