"""A PostgreSQL address whose server accepts the login and then never answers (the
security review of 2026-11-27, High 3): the check the operator runs before any task
starts, and the slot's retention it measures every pass, used to wait on it for good,
holding a reconcile worker each; eight such sources held them all. Now the server's
silence ends them with a problem naming ``config.url``.

On the code before the fix the check never returns (the test's timeout fails it).

The server is this module's own: a loopback socket speaking just enough of the
protocol for libpq to log in (no SSL or GSS, trust authentication, the parameters
libpq waits for), then reading and never writing.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from onceflow.connectors.postgres import answer_deadline
from onceflow.connectors.postgres.server_checks import source_problems
from onceflow.connectors.postgres.settings import SettingError
from onceflow.connectors.postgres.slot_retention import slot_retention

pytestmark = pytest.mark.timeout(60)

SSL_OR_GSS_REQUESTS = {80877103, 80877104}
DEADLINE_S = 2.0


def _message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _logged_in() -> bytes:
    parameters = {
        "server_version": "16.0",
        "client_encoding": "UTF8",
        "server_encoding": "UTF8",
        "standard_conforming_strings": "on",
        "integer_datetimes": "on",
        "DateStyle": "ISO, MDY",
    }
    return (
        _message(b"R", struct.pack("!i", 0))  # AuthenticationOk
        + b"".join(
            _message(b"S", name.encode() + b"\0" + value.encode() + b"\0")
            for name, value in parameters.items()
        )
        + _message(b"K", struct.pack("!ii", 4242, 99))
        + _message(b"Z", b"I")  # ReadyForQuery
    )


def _read_exactly(conn: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = conn.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _serve(conn: socket.socket) -> None:
    with conn:
        try:
            while True:
                (length,) = struct.unpack("!i", _read_exactly(conn, 4))
                body = _read_exactly(conn, length - 4)
                if struct.unpack("!i", body[:4])[0] in SSL_OR_GSS_REQUESTS:
                    conn.sendall(b"N")
                    continue
                conn.sendall(_logged_in())
                break
            while conn.recv(65536):  # queries arrive; no answer ever leaves
                pass
        except (ConnectionError, OSError):
            pass


@pytest.fixture
def silent_server() -> Iterator[str]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    served: list[threading.Thread] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=_serve, args=(conn,), daemon=True)
            thread.start()
            served.append(thread)

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"postgresql://onceflow@127.0.0.1:{port}/shop"
    finally:
        listener.close()


@pytest.fixture(autouse=True)
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(answer_deadline, "ANSWER_DEADLINE_S", DEADLINE_S)


@pytest.mark.parametrize("mode", ["incrementing", "cdc"])
def test_the_check_ends_naming_the_url_when_the_database_stays_silent(
    silent_server: str, mode: str
) -> None:
    config = {"url": silent_server, "mode": mode, "tables": ["orders"], "slot": "s"}
    if mode == "incrementing":
        config["incrementingColumn"] = "id"
    (problem,) = source_problems(config, {})
    assert problem.field == "url"
    assert f"did not answer the check within {DEADLINE_S:.0f} s" in problem.message


def test_the_retention_measurement_ends_when_the_database_stays_silent(
    silent_server: str,
) -> None:
    config = {"url": silent_server, "mode": "cdc", "tables": ["orders"], "slot": "s"}
    with pytest.raises(SettingError, match="did not answer the retention query"):
        slot_retention(config, {})
