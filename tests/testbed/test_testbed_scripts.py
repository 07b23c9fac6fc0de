"""The test-bed scripts whose stdout is a value print that value and nothing else.

Callers capture them (`BOOTSTRAP="$(bash scripts/kafka.sh up)"`), so one stray byte
from a tool breaks the caller. The tools only run on a cold cache, which CI never
has, so these tests put noisy stand-ins for Maven and Go first on PATH and point the
cache at an empty directory: every download/build path runs, and every stand-in
writes ANSI codes and chatter to stdout, as a cold `mvn -q -B` once did.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# What a cold Maven 3.8 printed on stdout with -q -B, plus ordinary chatter.
NOISE = r"printf '\033[0m\033[0mDownloading from central: ...\n'"

FAKE_MVN = f"""#!/usr/bin/env bash
echo "mvn $*" >>"$FAKE_CALLS"
{NOISE}
for arg in "$@"; do
  case "$arg" in
    -Dlibs.dir=*) libs="${{arg#-Dlibs.dir=}}" ;;
    -Dkafka.version=*) jar="kafka_2.13-${{arg#-Dkafka.version=}}.jar" ;;
    -Dspark.version=*) jar="spark-sql-kafka-0-10_2.13-${{arg#-Dspark.version=}}.jar" ;;
  esac
done
mkdir -p "$libs" && touch "$libs/$jar"
"""

# `go mod download -json` is the one call whose stdout is data (the script reads it).
FAKE_GO = f"""#!/usr/bin/env bash
echo "go $*" >>"$FAKE_CALLS"
[[ "$1 $2" == "mod download" ]] || {NOISE}
case "$1 $2" in
  "mod download") printf '{{"GoMod": "%s"}}\\n' "$FAKE_GOMOD" ;;
  "install "*)
    mkdir -p "$GOBIN" && printf '#!/bin/sh\\n' >"$GOBIN/helm" && chmod +x "$GOBIN/helm" ;;
  "build "*)
    while [[ $# -gt 0 ]]; do
      if [[ "$1" == -o ]]; then printf '#!/bin/sh\\n' >"$2"; chmod +x "$2"; fi
      shift
    done ;;
esac
"""


# podman and mmdebstrap: nothing built or stored yet (`image exists` fails); the files
# the script keeps (rootfs, saved image) are made where it asks.
FAKE_PODMAN = f"""#!/usr/bin/env bash
echo "podman $*" >>"$FAKE_CALLS"
[[ "$1 $2" == "image exists" ]] && exit 1
{NOISE}
while [[ $# -gt 0 ]]; do [[ "$1" == -o ]] && touch "$2"; shift; done
"""

# skopeo: copies into the cache's layout (only its call is recorded: nothing reads the
# layout back in this test).
FAKE_SKOPEO = f"""#!/usr/bin/env bash
echo "skopeo $*" >>"$FAKE_CALLS"
{NOISE}
"""

FAKE_MMDEBSTRAP = f"""#!/usr/bin/env bash
echo "mmdebstrap $*" >>"$FAKE_CALLS"
{NOISE}
touch "${{@: -2:1}}"
"""


@pytest.fixture
def cold_env(tmp_path: Path) -> dict[str, str]:
    """An environment with an empty cache and noisy build tools first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tools = {
        "mvn": FAKE_MVN,
        "go": FAKE_GO,
        "podman": FAKE_PODMAN,
        "mmdebstrap": FAKE_MMDEBSTRAP,
        "skopeo": FAKE_SKOPEO,
        "runc": "#!/bin/sh\n",
    }
    for name, body in tools.items():
        tool = bin_dir / name
        tool.write_text(body)
        tool.chmod(0o755)
    gomod = tmp_path / "kubernetes.mod"
    gomod.write_text("replace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n)\n")
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "ONCEFLOW_CACHE": str(tmp_path / "cache"),
        "ONCEFLOW_STATE": str(tmp_path / "state"),
        "FAKE_CALLS": str(tmp_path / "calls.log"),
        "FAKE_GOMOD": str(gomod),
        "SPARK_VERSION": "4.2.0",
    }


@pytest.mark.parametrize(
    ("command", "tool", "value"),
    [
        (["kafka.sh", "libs"], "mvn", "kafka/4.1.1/libs"),
        (["spark-jars.sh"], "mvn", "spark-kafka/4.2.0/libs"),
        (["helm.sh"], "go", "helm/v3.19.5-k1.34/helm"),
        (["k8s-build.sh"], "go", "k8s/v1.34.4-etcd3.6.16"),
        (["k8s.sh", "bin"], "go", "k8s/v1.34.4-etcd3.6.16"),
    ],
)
def test_cold_cache_script_prints_only_its_value(
    cold_env: dict[str, str], command: list[str], tool: str, value: str
) -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / command[0]), *command[1:]],
        capture_output=True,
        text=True,
        env=cold_env,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    calls = Path(cold_env["FAKE_CALLS"]).read_text().splitlines()
    assert any(call.startswith(f"{tool} ") for call in calls), "the cold path never ran"
    assert done.stdout == f"{cold_env['ONCEFLOW_CACHE']}/{value}\n"
    assert "\033[0m" in done.stderr, "the tool's output should reach stderr, not vanish"


def test_debezium_script_prints_only_its_plugin_path(cold_env: dict[str, str]) -> None:
    """`debezium.sh libs` hands connect.sh's worker a plugin.path: its cache is keyed
    by Debezium's version and the POM, like connect.sh's."""
    pom = (ROOT / "benchmarks" / "debezium" / "pom.xml").read_bytes()
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "debezium.sh"), "libs"],
        capture_output=True,
        text=True,
        env=cold_env,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "-Ddebezium.version=3.6.1.Final" in Path(cold_env["FAKE_CALLS"]).read_text()
    digest = hashlib.sha256(pom).hexdigest()[:12]
    assert done.stdout == f"{cold_env['ONCEFLOW_CACHE']}/debezium/3.6.1.Final-{digest}/libs\n"
    assert "\033[0m" in done.stderr


def test_a_cold_image_build_prints_only_the_image_reference(cold_env: dict[str, str]) -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "image.sh"), "build"],
        capture_output=True,
        text=True,
        env=cold_env,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    calls = Path(cold_env["FAKE_CALLS"]).read_text()
    assert "mmdebstrap " in calls and "podman build " in calls, "the cold path never ran"
    assert "skopeo copy " in calls, "the build is kept in the cache's layout"
    assert re.fullmatch(r"localhost/onceflow:[0-9a-f]{16}\n", done.stdout), done.stdout
    assert "\033[0m" in done.stderr


def test_two_builds_at_once_take_turns(tmp_path: Path) -> None:
    """Two `make k8s-up` at once used to write the same .partial files; a build holds
    its lock until it is done and the other then starts."""
    journal = tmp_path / "journal"
    script = (
        f'source "{ROOT}/scripts/lib.sh"; '
        f'with_lock demo bash -c "echo start >>{journal}; sleep 0.5; echo end >>{journal}"'
    )
    env = {**os.environ, "ONCEFLOW_CACHE": str(tmp_path / "cache"), "ONCEFLOW_STATE": str(tmp_path)}
    builds = [subprocess.Popen(["bash", "-c", script], env=env) for _ in range(2)]
    assert [b.wait(30) for b in builds] == [0, 0]
    assert journal.read_text().split() == ["start", "end", "start", "end"]


def test_maven_runs_without_colour(cold_env: dict[str, str]) -> None:
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "kafka.sh"), "libs"],
        capture_output=True,
        env=cold_env,
        check=True,
        timeout=60,
    )
    (mvn,) = Path(cold_env["FAKE_CALLS"]).read_text().splitlines()
    assert "-Dstyle.color=never" in mvn.split()
    assert "-B" in mvn.split()
