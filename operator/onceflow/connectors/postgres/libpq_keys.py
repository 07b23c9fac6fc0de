"""Which libpq connection parameters a tenant may give, in the connector's ``url`` or
its ``secretRef``, and how certificates reach libpq.

The connection is opened by the task in the tenant's pod and, for the check before
start, by the operator in its own. libpq reads files for some parameters (root and
client certificates, a key, a CRL, a password file, a service file; libpq 18 also
writes a TLS key log) and connects to a Unix socket for a host given as a path: in
the operator's process, either would be a tenant choosing files or sockets of the
operator's pod. So parameters are an allow-list, as the Kafka settings of an auth
Secret are (``logic.client_keys``), and certificates are given as their PEM content,
which this module writes to private files of the process that connects.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

CONTENT_KEYS = frozenset({"sslrootcert", "sslcert", "sslkey", "sslcrl"})
"""Certificates and a key: PEM content, written to a private file for libpq."""
ALLOWED = CONTENT_KEYS | frozenset(
    {
        "host",
        "hostaddr",
        "port",
        "dbname",
        "user",
        "password",
        "connect_timeout",
        "client_encoding",
        "options",
        "application_name",
        "fallback_application_name",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
        "sslmode",
        "sslnegotiation",
        "sslcompression",
        "sslpassword",
        "sslcertmode",
        "sslsni",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "channel_binding",
        "require_auth",
        "requirepeer",
        "gssencmode",
        "krbsrvname",
        "gsslib",
        "gssdelegation",
        "target_session_attrs",
        "load_balance_hosts",
        "replication",
    }
)
"""Parameters that name no file and no socket of the connecting process."""
SYSTEM_ROOTS = "system"
"""``sslrootcert=system``: the system's trusted roots, no file of the tenant's."""
PEM = "-----BEGIN "


def parameter_problems(params: Mapping[str, str]) -> list[str]:
    """What is wrong with ``params`` (the URL's and the Secret's together), one
    sentence each naming the parameter and the fix."""
    problems = []
    for key in sorted(params):
        value = str(params[key])
        if key not in ALLOWED:
            problems.append(
                f"{key!r} is not a libpq parameter Onceflow passes on (it names a file or "
                "socket of the connecting process, or is unknown); certificates go in "
                "sslrootcert, sslcert and sslkey as PEM content"
            )
        elif key in CONTENT_KEYS and not (value.lstrip().startswith(PEM) or _system(key, value)):
            problems.append(
                f"{key!r} takes the PEM content of the certificate or key (-----BEGIN …), "
                "not a path: the check before start runs in the operator's pod, where a "
                "path would name the operator's files"
            )
        elif key in ("host", "hostaddr") and any(
            h.strip().startswith(("/", "@")) or not h.strip() for h in value.split(",")
        ):
            problems.append(
                f"{key!r} names a Unix socket ({value!r}: a path, or an empty entry); give "
                "the database's network address"
            )
    if not (params.get("host") or params.get("hostaddr")):
        problems.append(
            "no host: without one libpq connects to a Unix socket of the connecting "
            "process's machine; give the database's network address in the url"
        )
    return problems


def _system(key: str, value: str) -> bool:
    return key == "sslrootcert" and value == SYSTEM_ROOTS


def with_content_files(params: Mapping[str, str]) -> dict[str, str]:
    """``params`` with each certificate's content replaced by the path of a private
    file holding it (0600, in a directory only this process's user can enter), named
    by the content's digest so that every connection with it shares one file."""
    found = dict(params)
    for key in CONTENT_KEYS & found.keys():
        if _system(key, found[key]):
            continue
        content = found[key].encode()
        path = _directory() / hashlib.sha256(content).hexdigest()
        if not path.exists():
            partial = path.with_suffix(f".{os.getpid()}.partial")
            descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "wb") as out:
                out.write(content)
            partial.rename(path)
        found[key] = str(path)
    return found


_made: list[Path] = []


def _directory() -> Path:
    """A directory of this process's own (mkdtemp makes it 0700), made once."""
    if not _made:
        _made.append(Path(tempfile.mkdtemp(prefix="onceflow-libpq-")))
    return _made[0]
