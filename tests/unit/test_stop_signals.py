"""Stop signals are taken by a thread of their own: no Python code runs on a thread
that sits in a blocking client call (issue 26, item 8).

The stand-in for the client call is ``select.select`` on a pipe, because it handles a
signal the way confluent-kafka's blocking calls do: it releases the GIL and blocks in
the kernel; a signal ends the wait with EINTR, and the call re-takes the GIL and runs
``PyErr_CheckSignals()`` while it is still on the stack (confluent-kafka does this when
``commit_transaction`` and friends return, between the chunks of ``poll``/``flush``,
and in the callbacks it serves on the caller's thread), which runs the Python handler
inside the call. That is what put the task's SIGTERM handler inside a blocked
``commit_transaction`` and ended its graceful stop in a ``SystemError``, exit 1.
The other candidates would hide it: ``time.sleep`` in a Python loop runs the handler
between the calls, in bytecode; libc ``pause()``/``nanosleep`` through ctypes return
EINTR to ctypes, which does not check for signals, so the handler runs after the call
has already ended (and with the signals blocked, ``pause()`` would never end at all,
unlike a client call that finishes on its own).

The script reports any Python function run on its main thread while that thread is
inside ``select.select`` (a profile hook sees the ``call`` events between the call's
``c_call`` and ``c_return``) and then fails with exit 1, as the task did; otherwise it
stops the way the task loop does, on the event, with exit 0.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from onceflow.processes.stop_signals import StopSignalsTooLateError, stop_on_signals
from onceflow.runtime.task import ExitCode
from tests.support.proc import signal_pending
from tests.support.waiting import wait_for

BLOCKED_IN_A_CALL = textwrap.dedent(
    """
    import logging
    import select
    import signal
    import sys
    import threading

    from onceflow.processes.stop_signals import stop_on_signals

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    if sys.argv[1] == "stop_on_signals":
        stop = stop_on_signals()
    else:  # the handler the task process installed before
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())

    ran_inside = []
    inside = False

    def watch(frame, event, arg):
        global inside
        if event == "c_call" and arg is select.select:
            inside = True
        elif event in ("c_return", "c_exception") and arg is select.select:
            inside = False
        elif event == "call" and inside:
            ran_inside.append(frame.f_code.co_name)

    sys.setprofile(watch)
    print("blocking", flush=True)
    select.select([sys.stdin], [], [])  # the client call: ends when the test writes a line
    sys.setprofile(None)
    if ran_inside:
        names = ", ".join(dict.fromkeys(ran_inside))
        print(f"python code ran inside the blocking call: {names}", flush=True)
        sys.exit(1)
    if not stop.wait(10):  # the task loop's next check (or its idle wait)
        print("the stop request never arrived", flush=True)
        sys.exit(2)
    print("stopped gracefully after the blocking call", flush=True)
    """
)


def _state(pid: int) -> str:
    # The field after the parenthesised command name; the main thread's state.
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _signalled_inside_the_call(mode: str, signum: signal.Signals) -> tuple[int, str, str]:
    """Runs the script, sends ``signum`` while it sits in the call, lets the call end
    once the process took the signal; returns the exit code, stdout and stderr."""
    child = subprocess.Popen(
        [sys.executable, "-c", BLOCKED_IN_A_CALL, mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "blocking\n"
        # After that line the only thing the main thread sleeps in is select.select.
        wait_for(lambda: _state(child.pid) == "S", 10, "the script to block in the call")
        child.send_signal(signum)
        wait_for(
            lambda: not signal_pending(child.pid, signum),
            10,
            f"the script to take {signum.name} while in the call",
        )
        out, err = child.communicate("the call returns\n", timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, out, err


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_stop_signal_during_a_blocking_call_stops_gracefully_after_it(
    signum: signal.Signals,
) -> None:
    code, out, err = _signalled_inside_the_call("stop_on_signals", signum)
    assert code == ExitCode.STOPPED, out + err
    assert out.splitlines()[-1] == "stopped gracefully after the blocking call", out + err
    assert f"{signum.name} received: stopping after the current call" in err, err
    assert "Traceback" not in err, err


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_plain_signal_handler_runs_inside_the_blocking_call() -> None:
    """The stand-in's own check: with the handler the task used to install, the same
    script sees Python code inside the call and fails, as the task's stop did."""
    code, out, err = _signalled_inside_the_call("plain_handler", signal.SIGTERM)
    assert code == ExitCode.ERROR, out + err
    assert "python code ran inside the blocking call: <lambda>" in out, out + err


INHERITED_MASK = textwrap.dedent(
    """
    import signal
    import subprocess
    import sys

    from onceflow.processes.stop_signals import stop_on_signals

    stop_on_signals()
    child = '''
    import signal, sys
    from onceflow.cli import main

    inherited = signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    try:
        main(["--help"])
    except SystemExit:
        pass
    after = signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    print(f"inherited blocked: {inherited}, after main: {after}", file=sys.stderr)
    '''
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    print(done.stderr, end="")
    """
)


def test_an_onceflow_command_started_by_a_blocking_process_unblocks_the_signals() -> None:
    """The mask survives fork and exec: ``onceflow run``'s tasks and drivers would
    otherwise never see the SIGTERM that stops them."""
    done = subprocess.run(
        [sys.executable, "-c", INHERITED_MASK], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "inherited blocked: True, after main: False", done.stdout


def test_stop_signals_are_refused_once_another_thread_runs() -> None:
    """A thread started earlier keeps the signals unblocked; SIGTERM delivered to it
    would end the process at once. Refused before anything is blocked."""
    release = threading.Event()
    early = threading.Thread(target=release.wait, name="early-thread")
    early.start()
    try:
        with pytest.raises(StopSignalsTooLateError, match="early-thread"):
            stop_on_signals()
    finally:
        release.set()
        early.join()
    assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
