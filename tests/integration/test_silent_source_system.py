"""A PostgreSQL address whose server accepts the login and then never answers (the
security review of 2026-11-27, High 3): the check the operator runs before any task
starts, and the slot's retention it measures every pass, used to wait on it for good,
holding a reconcile worker each; eight such sources held them all. Now the server's
silence ends them with a problem naming ``config.url``.

On the code before the fix the check never returns (the test's timeout fails it).
And with the operator running, such sources no longer wait on reconcile workers at
all: their checks run on threads of their own while every other source reconciles.

The server is this module's own: a loopback socket speaking just enough of the
protocol for libpq to log in (no SSL or GSS, trust authentication, the parameters
libpq waits for), then reading and never writing.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from onceflow.connectors import kafka_mirror
from onceflow.connectors.postgres import answer_deadline
from onceflow.connectors.postgres.server_checks import source_problems
from onceflow.connectors.postgres.settings import SettingError
from onceflow.connectors.postgres.slot_retention import slot_retention
from onceflow.connectors.registry import load_connector
from tests.integration.test_operator import pipeline, source
from tests.support.cluster import running_operator
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

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


@contextmanager
def _loopback_server(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    """A loopback port whose every connection ``handle`` gets, on a thread of its own."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()


@pytest.fixture
def silent_server() -> Iterator[str]:
    with _loopback_server(_serve) as port:
        yield f"postgresql://onceflow@127.0.0.1:{port}/shop"


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


@pytest.mark.k8s
@pytest.mark.kafka
def test_sources_whose_systems_stay_silent_hold_no_reconcile_worker(
    silent_server: str, kubeconfig: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """One reconcile worker, two sources on the silent database, then a healthy one:
    its task pods are created while the silent checks are still being waited for (the
    operator's own deadline, 20 s each, would hold that worker 40 s on the old code)."""
    one_worker = (("ONCEFLOW_RECONCILE_WORKERS", "1"),)
    with running_operator(kubeconfig, tmp_path, "silent", one_worker) as (cluster, _, _):
        cluster.create("pipelines", pipeline(kafka_bootstrap, "disabled"))
        for index in range(2):
            silent = source(1, f"silent-{index}")
            silent["metadata"]["name"] = f"silent-{index}"
            silent["spec"]["connector"] = {
                "type": "postgres",
                "config": {"url": silent_server, "mode": "cdc", "tables": ["t"], "slot": "s"},
            }
            cluster.create("kafkasources", silent)
        wait_for(
            lambda: all(
                cluster.condition("kafkasources", f"silent-{i}", "Progressing").get("reason")
                == "CheckingSourceSystem"
                for i in range(2)
            ),
            15,
            "both silent sources' checks asked",
        )
        cluster.create("kafkasources", source(1, "healthy.counts"))
        wait_for(
            lambda: bool(cluster.pods("onceflow.io/source=counter")),
            15,
            "the healthy source's task pod while the silent systems are being asked",
        )
        refused = cluster.condition("kafkasources", "silent-0", "Progressing")
        assert refused.get("reason") == "CheckingSourceSystem", refused
        message = cluster.wait_for_reason(
            "kafkasources", "silent-0", "Degraded", "SourceSystemRefused", 60,
            "the silent source refused once the database's silence ran out",
        )["message"]  # fmt: skip
        assert "did not answer the check" in message, message


@pytest.fixture
def closing_port() -> Iterator[int]:
    """A loopback port that accepts a connection and closes it at once: open, and
    speaking neither PostgreSQL nor Kafka."""
    with _loopback_server(lambda conn: conn.close()) as port:
        yield port


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_checks_say_the_same_of_a_closed_port_and_an_open_one_that_is_not_the_system(
    closing_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Security review #8: the operator's checks connect from the operator's pod, and
    their messages told a tenant "Connection refused" from "server closed the
    connection": a scan of the operator's network through status. Only what a real
    server says (a refused login) may pass."""
    closed = _closed_port()
    monkeypatch.setattr(kafka_mirror, "CHECK_TIMEOUT_S", 2.0)  # neither port will answer

    def postgres(port: int) -> str:
        config = {"url": f"postgresql://app@127.0.0.1:{port}/shop", "mode": "cdc"}
        (problem,) = source_problems({**config, "tables": ["t"], "slot": "s"}, {})
        return problem.message.replace(str(port), "PORT")

    def kafka(port: int) -> str:
        config = {"bootstrapServers": f"127.0.0.1:{port}", "topics": ["t"]}
        mirror = load_connector("kafka")
        (problem,) = mirror.check(config, {}, shares_task_filesystem=False)
        return problem.message.replace(str(port), "PORT")

    assert postgres(closed) == postgres(closing_port), postgres(closed)
    assert "refused" not in postgres(closed).lower()
    assert kafka(closed) == kafka(closing_port), kafka(closed)
