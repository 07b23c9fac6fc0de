"""The libpq parameters a tenant may give a postgres source (security review #8):
nothing that names a file or a socket of the process that connects, which for the
check before start is the operator; certificates as PEM content, written to private
files."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from onceflow.connectors.postgres.libpq_keys import parameter_problems
from onceflow.connectors.postgres.server_checks import source_problems
from onceflow.connectors.postgres.settings import conninfo

URL = "postgresql://app@127.0.0.1:1/orders"
PEM_ROOT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"sslrootcert": "/etc/hostname"}, "'sslrootcert' takes the PEM content"),
        ({"sslkey": "/var/run/secrets/kubernetes.io/serviceaccount/token"}, "'sslkey' takes"),
        ({"passfile": "/etc/passwd"}, "'passfile' is not a libpq parameter Onceflow passes on"),
        ({"service": "other"}, "'service' is not"),
        ({"sslkeylogfile": "/tmp/keys"}, "'sslkeylogfile' is not"),
        ({"host": "/var/run/postgresql"}, "'host' names a Unix socket"),
        ({"host": "db.example,@abstract"}, "'host' names a Unix socket"),
        ({"host": "db.example,,other"}, "'host' names a Unix socket"),
    ],
)
def test_parameters_naming_files_or_sockets_of_the_connecting_process_are_refused(
    params: dict[str, str], says: str
) -> None:
    (problem,) = parameter_problems({"host": "db.example", **params})
    assert problem.startswith(says), problem


def test_the_check_refuses_them_before_connecting_naming_the_parameter() -> None:
    """127.0.0.1:1 answers nothing: the refusal comes before any connection."""
    config = {"url": URL + "?sslrootcert=/etc/hostname", "tables": ["t"], "mode": "cdc"}
    (problem,) = source_problems(config, {"passfile": "/etc/passwd", "password": "s3cret"})
    assert problem.field == "url"
    assert "'passfile' is not a libpq parameter" in problem.message
    assert "'sslrootcert' takes the PEM content" in problem.message
    assert "s3cret" not in problem.message


def test_certificates_given_as_content_reach_libpq_as_private_files() -> None:
    secrets = {"password": "s3cret", "sslmode": "verify-full", "sslrootcert": PEM_ROOT}
    params = conninfo_to_dict(conninfo(URL, secrets, "onceflow-check"))
    written = Path(params["sslrootcert"])
    assert written.read_text() == PEM_ROOT
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert stat.S_IMODE(written.parent.stat().st_mode) == 0o700
    again = conninfo_to_dict(conninfo(URL, secrets, "onceflow-check"))
    assert again["sslrootcert"] == str(written), "one file per content"
    assert params["password"] == "s3cret" and params["sslmode"] == "verify-full"
    assert params["connect_timeout"] == "10" and params["user"] == "app"


def test_the_systems_roots_and_ordinary_parameters_pass_as_they_are() -> None:
    params = {
        "sslrootcert": "system",
        "sslmode": "verify-full",
        "host": "db-1.example,db-2.example",
        "target_session_attrs": "read-write",
        "options": "-c statement_timeout=5000",
    }
    assert parameter_problems(params) == []
    assert conninfo_to_dict(conninfo(URL, params, "x"))["sslrootcert"] == "system"


def test_a_url_without_a_host_is_refused_rather_than_sent_to_a_local_socket() -> None:
    (problem,) = parameter_problems(conninfo_to_dict("postgresql:///orders?user=app"))
    assert problem.startswith("no host: without one libpq connects to a Unix socket")
