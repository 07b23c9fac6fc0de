"""A child of ``onceflow run`` dies with its supervisor.

A task or driver that outlived a crashed ``onceflow run`` would keep writing next to
the tasks the next run starts; non-transactional producers cannot be fenced, so that
means duplicates nothing bounds. On Linux the child asks the kernel for SIGTERM when
its parent dies (``PR_SET_PDEATHSIG``), then checks that the parent it was started by
is still its parent: one that died before the request would never send the signal.
A SIGTERM'd task stops as on any request (a final commit where that is allowed).

In ``eos`` beside ``stop_signals``: the task (through ``cli``) and the Spark driver
(``spark.driver_main``) both follow their supervisor.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
SUPERVISOR_PID_HELP = "exit (SIGTERM) when this parent process dies (set by onceflow run)"


def die_with_supervisor(supervisor_pid: int) -> None:
    if sys.platform != "linux":
        return  # the next run's orphan sweep still stops leftovers
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != supervisor_pid:
        os.kill(os.getpid(), signal.SIGTERM)
