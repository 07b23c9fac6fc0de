"""A deadline for the database to answer, for the connections the operator itself opens
(the check before any task starts, the slot's retention measured every pass).

libpq bounds connecting (``connect_timeout``) but has no client-side limit on a query:
a server that accepts the login and then stays silent would hold the operator's
reconcile worker for good, and one tenant's source could hold them all. Past the
deadline the connection's socket is shut down, so the blocked read fails at once and
the thread that waited on it ends instead of lingering.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

from onceflow.connectors.postgres.settings import SettingError

ANSWER_DEADLINE_S = 20.0


def _shut_down(fd: int) -> None:
    # A duplicate descriptor: shutting it down ends the connection for libpq too, and
    # closing it leaves libpq's own descriptor alone.
    with contextlib.suppress(OSError), socket.socket(fileno=os.dup(fd)) as duplicate:
        duplicate.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def answering_within(conn: Any, what: str, seconds: float | None = None) -> Iterator[None]:
    """Runs the block with ``conn`` (a psycopg connection) cut off after ``seconds``;
    raises a SettingError naming ``config.url`` when it was."""
    deadline = ANSWER_DEADLINE_S if seconds is None else seconds
    cut = threading.Event()
    over = threading.Event()
    fd = conn.pgconn.socket
    # Taken around the cut and the block's end: once the block is over the descriptor
    # may be closed and its number reused by another connection, never to be cut.
    lock = threading.Lock()

    def cut_off() -> None:
        with lock:
            if not over.is_set():
                cut.set()
                _shut_down(fd)

    timer = threading.Timer(deadline, cut_off)
    timer.daemon = True
    timer.start()
    try:
        yield
    except Exception as error:
        if cut.is_set():
            raise SettingError(
                "url",
                f"the database accepted the connection but did not answer {what} within "
                f"{deadline:.0f} s; check that config.url points at PostgreSQL and that it "
                "is not overloaded",
            ) from error
        raise
    finally:
        with lock:
            over.set()
        timer.cancel()
