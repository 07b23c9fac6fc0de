"""Start or reuse the real services the suite runs against.

Each service is driven through its ``scripts/<name>.sh`` (the same scripts behind
``make kafka-up`` and friends), so a developer's running broker is reused and left
alone, while a service this process had to start is stopped again at the end: the
suite never leaves orphan processes behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ScriptedService:
    """One test-bed service behind a script with ``up``, ``down`` and ``status``."""

    script: str
    started_here: bool = field(default=False, init=False)

    def _run(self, action: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHON": sys.executable}
        return subprocess.run(
            ["bash", str(ROOT / "scripts" / self.script), action],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )

    def ensure_up(self) -> str:
        """Returns the service's address, starting the service if nothing answers."""
        status = self._run("status")
        if status.returncode == 0 and status.stdout.strip():
            return status.stdout.strip()
        up = self._run("up")
        if up.returncode != 0:
            raise RuntimeError(f"{self.script} up failed:\n{up.stderr}\n{up.stdout}")
        self.started_here = True
        return up.stdout.strip()

    def release(self) -> None:
        """Stops the service only if this process started it."""
        if self.started_here and not os.environ.get("ONCEFLOW_KEEP_SERVICES"):
            self._run("down")
            self.started_here = False


def script_value(*args: str) -> str:
    """What a test-bed script prints (``script_value("scripts/kafka.sh", "node-client")``)."""
    out = subprocess.run(
        ["bash", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=900
    )
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{out.stderr[-3000:]}")
    return out.stdout.strip()


def spark_jars() -> list[str]:
    """Paths of the spark-sql-kafka jars matching the installed pyspark."""
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "spark-jars.sh")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
        check=True,
    )
    libs = Path(out.stdout.strip())
    return sorted(str(p) for p in libs.glob("*.jar"))


def jvm_writer_jars() -> list[str]:
    """Paths of the JVM sink writer's jar built from this checkout (scripts/jvm-writer.sh:
    built and tested on first use, then cached by its sources' digest)."""
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "jvm-writer.sh")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
        check=False,
        timeout=1800,
    )
    if out.returncode != 0:
        raise RuntimeError(f"scripts/jvm-writer.sh failed:\n{out.stderr[-3000:]}")
    libs = Path(out.stdout.strip())
    return sorted(str(p) for p in libs.glob("onceflow-spark-kafka-*.jar"))


def onceflow_image() -> str:
    """The image built from this checkout (scripts/image.sh: cached by content)."""
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "image.sh"), "build"],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"image build failed:\n{out.stderr[-5000:]}")
    return out.stdout.strip()


def podman(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    """podman with the test bed's settings (runtime, cgroups, ulimits)."""
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "image.sh"), "podman", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def kubectl_path() -> str:
    """The kubectl built alongside the test-bed apiserver (same version, no skew)."""
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "k8s.sh"), "bin"],
        capture_output=True,
        text=True,
        check=True,
    )
    return str(Path(out.stdout.strip()) / "kubectl")


def kubectl(
    kubeconfig: str, *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Runs the test bed's kubectl; ``check=False`` returns failures for inspection."""
    return subprocess.run(
        [kubectl_path(), "--kubeconfig", kubeconfig, *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=check,
    )


def helm_path() -> str:
    """Helm built by ``scripts/helm.sh`` (cached by version)."""
    built = subprocess.run(
        ["bash", str(ROOT / "scripts" / "helm.sh")], capture_output=True, text=True, check=True
    )
    return built.stdout.strip()


def helm(kubeconfig: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Runs the test bed's helm against a cluster of the test bed."""
    return subprocess.run(
        [helm_path(), "--kubeconfig", kubeconfig, *args],
        capture_output=True,
        text=True,
        check=check,
    )


def restart_postgres(mode: str = "fast") -> bool:
    """Restarts the test bed's server (``immediate``: a crash); true once it is back."""
    return script_value("scripts/postgres.sh", "restart", mode).startswith("postgresql://")
