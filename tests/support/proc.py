"""What /proc says about a test's child process."""

from __future__ import annotations

from pathlib import Path


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
    except FileNotFoundError:
        return True
