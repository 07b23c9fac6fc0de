"""A task's Prometheus endpoint, read as a test would scrape it."""

from __future__ import annotations

import socket
import urllib.request


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape(port: int, prefix: str = "onceflow_source_") -> dict[str, float]:
    """``{series name: value}`` of the labelled series whose name starts with
    ``prefix`` (one task per endpoint, so the labels add nothing)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as page:
        text = page.read().decode()
    return {
        line.split("{")[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(prefix) and "{" in line
    }
