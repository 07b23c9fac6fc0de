"""SIGTERM and SIGINT as a stop request, without Python code running inside a client call.

Invariant: no Python signal handler runs on a thread that is inside a blocking
confluent-kafka call. A Python handler (``signal.signal``) runs on the main thread
wherever the interpreter next checks for signals, and confluent-kafka checks inside
its calls: when a blocking call such as ``commit_transaction`` or
``init_transactions`` re-takes the GIL, between the chunks of ``poll``/``flush``, and in
the callbacks it serves on the caller's thread. The handler then runs while the call
is still on the stack, and the call's outcome is no longer the client's alone: a task
SIGTERMed while its commit was blocked ended in a ``SystemError`` and exit 1 instead of
its graceful stop (issue 26, item 8).

So these processes install no handler. ``stop_on_signals`` blocks both signals in the
main thread before any other thread exists (every thread inherits its creator's mask,
and librdkafka blocks all signals in its own threads), so the kernel holds them for
the process; one thread takes them with ``sigwait`` and sets the stop event. The main
thread sees the request between calls, a ``stop.wait(...)`` it sits in wakes at once,
and a blocking call runs to its own end (a commit completes or fails the way
``eos/writer.py`` decides), after which the stop path is the one it always was.

The mask survives fork and exec, so a process started by one of these begins with
both signals blocked: every ``onceflow`` command clears them first
(``unblock_inherited_stop_signals``, from ``cli.main``, and from the Spark driver's own
entry, ``spark.driver_main``), and a program that a connector starts itself must do the
same or never see SIGTERM.

In ``eos`` rather than in the task process (``runtime``): the task, the Spark driver
and ``onceflow run`` all hold Kafka clients and all start this way.
"""

from __future__ import annotations

import logging
import signal
import threading

log = logging.getLogger(__name__)

STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})


class StopSignalsTooLateError(RuntimeError):
    """Another thread already runs: it keeps the signals unblocked, and the kernel may
    deliver one to it (SIGTERM's default action then ends the process at once)."""


def stop_on_signals() -> threading.Event:
    """Blocks SIGTERM and SIGINT for the whole process and starts the thread that turns
    them into the returned event. Call it from the main thread before any other thread
    starts (and before any client is created)."""
    if threading.current_thread() is not threading.main_thread():
        raise StopSignalsTooLateError("stop signals must be set up from the main thread")
    others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if others:
        raise StopSignalsTooLateError(
            "stop signals must be set up before any other thread starts; running: "
            + ", ".join(others)
        )
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    stop = threading.Event()
    threading.Thread(
        target=_take_stop_signals, args=(stop,), name="stop-signals", daemon=True
    ).start()
    return stop


def _take_stop_signals(stop: threading.Event) -> None:
    # Forever: a second SIGTERM asks again, as it did with a handler (no escalation).
    while True:
        signum = signal.sigwait(STOP_SIGNALS)
        log.info("%s received: stopping after the current call", signal.Signals(signum).name)
        stop.set()


def unblock_inherited_stop_signals() -> None:
    """Undoes a mask inherited from a parent that blocked the stop signals (``onceflow
    run`` starts its tasks and drivers that way): until this, SIGTERM would stay
    pending for good instead of stopping the process."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


__all__ = [
    "STOP_SIGNALS",
    "StopSignalsTooLateError",
    "stop_on_signals",
    "unblock_inherited_stop_signals",
]
