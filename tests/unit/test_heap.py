"""The operator's fixed mmap threshold: freed large buffers leave the process."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

# A burst of 200 KB buffers (an API-call burst's TLS buffers) all freed but the last:
# the resident size left afterwards, in MB.
BURST = textwrap.dedent(
    """
    import sys
    from onceflow.control.heap import return_large_blocks_to_os

    if sys.argv[1] == "fixed":
        assert return_large_blocks_to_os()
    first = bytearray(200 * 1024)
    del first  # glibc's first free of an mmapped block raises its threshold past it
    burst = [bytearray(200 * 1024) for _ in range(1000)]
    last = burst[-1]
    del burst
    with open("/proc/self/status") as status:
        rss = next(line for line in status if line.startswith("VmRSS:"))
    print(int(rss.split()[1]) // 1024)
    """
)


def _rss_after_burst(mode: str) -> int:
    # glibc's own settings from the environment would change the default run.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", BURST, mode], check=False, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator")
def test_freed_buffers_of_a_burst_are_returned_with_the_threshold_fixed() -> None:
    default, fixed = _rss_after_burst("default"), _rss_after_burst("fixed")
    assert default > 150, f"the burst should stay resident with glibc's default: {default} MB"
    assert fixed < default - 150, f"default {default} MB, fixed {fixed} MB"
