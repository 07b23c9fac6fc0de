"""A real Prometheus server (Debian's package, scripts/prometheus.sh) for one test: it
scrapes the targets it is given every second, and is queried over its HTTP API."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.support.metrics import free_port
from tests.support.testbed import script_value
from tests.support.waiting import wait_for


class Prometheus:
    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"

    def _get(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=10) as answer:
            body = json.loads(answer.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` gives now."""
        return list(self._get("/api/v1/query", query=expr)["result"])

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> list[Any]:
        """Each series of ``expr`` over the range: {metric, values: [[t, "v"], ...]}."""
        data = self._get(
            "/api/v1/query_range", query=expr, start=str(start), end=str(end), step=str(step_s)
        )
        return list(data["result"])

    def targets_up(self) -> int:
        return sum(1 for t in self._get("/api/v1/targets")["activeTargets"] if t["health"] == "up")


@contextmanager
def prometheus(targets: dict[str, list[str]], workdir: Path) -> Iterator[Prometheus]:
    """A server scraping ``targets`` (job -> host:port list) every second."""
    binary = script_value("scripts/prometheus.sh", "path")
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": found}]}
            for job, found in targets.items()
        ],
    }
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    with (workdir / "prometheus.log").open("ab") as log:
        server = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=log,
        )
    try:
        found = Prometheus(port)
        wait_for(lambda: _ready(found), 60, "Prometheus ready")
        expected = sum(len(t) for t in targets.values())
        wait_for(lambda: found.targets_up() == expected, 60, "every target scraped")
        yield found
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _ready(server: Prometheus) -> bool:
    try:
        with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        time.sleep(0.2)
        return False
