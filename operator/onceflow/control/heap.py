"""Large buffers go back to the kernel when freed.

The operator's kopf side holds a TLS connection per watch stream and opens more for
bursts of API calls; each has a read buffer of 64-256 KB, and watch events arrive as
JSON lines of similar sizes. glibc serves such blocks with mmap until the first one is
freed, then raises its mmap threshold past them (the "dynamic threshold") and serves
them from the main heap instead, which a single long-lived block near its top keeps
from shrinking. Measured at 500 KafkaSources (benchmarks/operator_scale.py): 174 MB
of main heap and 287-320 MB RSS with glibc's default, 41 MB and 198 MB with the
threshold fixed at 64 KB. Fixing it is what MALLOC_MMAP_THRESHOLD_ does; done here,
it holds however the operator is started (chart, `onceflow operator`, tests). With the
operator (``control``) because only the operator's process sets it.

The price: asyncio's TLS transport allocates a 256 KB block per read, and each is now
an mmap/munmap pair rather than warm heap. In the same benchmark the operator's CPU
did not move (0.0 % idle; 69 % of a core through 50 concurrent changes, as before).
"""

from __future__ import annotations

import ctypes
import sys

M_MMAP_THRESHOLD = -3  # glibc <malloc.h>; setting it also turns off the dynamic threshold
THRESHOLD_BYTES = 64 * 1024


def return_large_blocks_to_os() -> bool:
    """Fixes glibc's mmap threshold; False where there is no glibc (nothing to fix)."""
    if sys.platform != "linux":
        return False
    libc = ctypes.CDLL(None)
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:  # musl and other libcs: no dynamic threshold to turn off
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD_BYTES))
