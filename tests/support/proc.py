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
