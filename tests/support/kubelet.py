"""A stand-in kubelet for the test API server: runs each pod's container command as a
local process (real task processes against the real broker) and reports pod status.

It binds Pending pods to a pretend node, materialises ConfigMap and Secret volumes
into a work directory, rewrites the mount paths in the command, honours
``restartPolicy`` and graceful deletion (SIGTERM, grace period, SIGKILL, then the
final delete), and can "lose" a pod the way a partitioned node would: the API object
goes away while the process lives on, to make zombies on purpose.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.support.testbed import ROOT

NODE = "onceflow-test-node"
TICK_S = 0.2


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Container:
    pod: str
    uid: str
    command: list[str]
    env: dict[str, str]
    log: Path
    restart_policy: str
    grace_s: float
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    terminating_since: float | None = None
    exit_codes: list[int] = field(default_factory=list)

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.command, stdout=log, stderr=log, env=self.env, cwd=ROOT
            )


class LocalKubelet:
    def __init__(self, kubeconfig: str, namespace: str, workdir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.workdir = workdir
        self.api = config.new_client_from_config(config_file=kubeconfig)
        self.core = client.CoreV1Api(self.api)
        self.containers: dict[str, Container] = {}
        self.lost: set[str] = set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="kubelet")

    # -- public controls for tests ---------------------------------------------------

    def start(self) -> LocalKubelet:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for container in self.containers.values():
            if container.process and container.process.poll() is None:
                container.process.send_signal(signal.SIGCONT)
                container.process.kill()
                container.process.wait()

    def process(self, pod: str) -> subprocess.Popen[bytes]:
        with self._lock:
            for container in self.containers.values():
                if container.pod == pod and container.process is not None:
                    return container.process
        raise KeyError(f"no process for pod {pod}")

    def lose(self, pod: str) -> None:
        """From now on this pod's process is beyond reach, as on a partitioned node."""
        with self._lock:
            self.lost.add(pod)

    def log_of(self, pod: str) -> str:
        return "".join(
            c.log.read_text(errors="replace") for c in self.containers.values() if c.pod == pod
        )

    # -- the loop ---------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(ApiException):  # a hiccup: the next tick re-observes
                self._sync()
            self._stop.wait(TICK_S)

    def _sync(self) -> None:
        pods = self.core.list_namespaced_pod(self.namespace).items
        seen = set()
        for pod in pods:
            uid, name = pod.metadata.uid, pod.metadata.name
            seen.add(uid)
            with self._lock:
                lost = name in self.lost
            if pod.metadata.deletion_timestamp is not None:
                self._terminate(pod, lost)
            elif uid not in self.containers and not pod.spec.node_name:
                self._bind_and_start(pod)
            elif uid in self.containers and not lost:
                self._watch_exit(pod, self.containers[uid])

    def _bind_and_start(self, pod: Any) -> None:
        name = pod.metadata.name
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": NODE},
        }
        self.core.create_namespaced_pod_binding(name, self.namespace, body, _preload_content=False)
        spec = pod.spec.containers[0]
        root = self.workdir / pod.metadata.uid
        root.mkdir(parents=True, exist_ok=True)
        mounts = self._materialise_volumes(pod, root)
        # No command: the image's entry point, which runs `onceflow ARGS` for every role
        # but Spark's (image/entrypoint.sh).
        given = [*(spec.command or ["onceflow"]), *(spec.args or [])]
        command = [self._local_path(arg, mounts) for arg in given]
        if command and command[0] == "onceflow":
            command = [sys.executable, "-m", "onceflow", *command[1:]]
        env = {
            **os.environ,
            "KUBECONFIG": self._service_account_kubeconfig(pod, root),
            "PYTHONPATH": str(ROOT),
        }
        container = Container(
            pod=name,
            uid=pod.metadata.uid,
            command=command,
            env=env,
            log=root / "container.log",
            restart_policy=pod.spec.restart_policy or "Always",
            grace_s=float(pod.spec.termination_grace_period_seconds or 30),
        )
        container.start()
        with self._lock:
            self.containers[pod.metadata.uid] = container
        self._report(pod, container, running=True)

    def _materialise_volumes(self, pod: Any, root: Path) -> dict[str, Path]:
        """Writes volumes to local folders; paths inside config files are rewritten
        too, since every local process shares this one filesystem."""
        container = pod.spec.containers[0]
        mounts = {m.mount_path: root / m.name for m in container.volume_mounts or []}
        volumes = {v.name: v for v in pod.spec.volumes or []}
        for mount in container.volume_mounts or []:
            volume = volumes[mount.name]
            target = mounts[mount.mount_path]
            target.mkdir(parents=True, exist_ok=True)
            if volume.config_map is not None:
                source = self.core.read_namespaced_config_map(
                    volume.config_map.name, self.namespace
                )
                for key, value in (source.data or {}).items():
                    text = self._local_paths_in(value, mounts)
                    (target / key).write_text(self._without_fixed_ports(key, text))
            elif volume.secret is not None:
                secret = self.core.read_namespaced_secret(volume.secret.secret_name, self.namespace)
                for key, value in (secret.data or {}).items():
                    (target / key).write_bytes(base64.b64decode(value))
        return mounts

    def _service_account_kubeconfig(self, pod: Any, root: Path) -> str:
        """A kubeconfig carrying a token of the pod's ServiceAccount, so processes get
        exactly the permissions the operator granted that account, as in a cluster."""
        account = pod.spec.service_account_name
        if not account:
            return self.kubeconfig
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        }
        token = self.core.create_namespaced_service_account_token(
            account, self.namespace, request
        ).status.token
        admin = yaml.safe_load(Path(self.kubeconfig).read_text())
        admin["users"] = [{"name": account, "user": {"token": token}}]
        admin["contexts"][0]["context"]["user"] = account
        admin["contexts"][0]["context"]["namespace"] = self.namespace
        path = root / "kubeconfig"
        path.write_text(yaml.safe_dump(admin))
        return str(path)

    @staticmethod
    def _without_fixed_ports(key: str, value: str) -> str:
        """Local processes share one network namespace: drop the fixed metrics port."""
        if not key.endswith(".json"):
            return value
        settings = json.loads(value)
        if "metricsPort" in settings:
            settings["metricsPort"] = 0
        return json.dumps(settings)

    @staticmethod
    def _local_paths_in(text: str, mounts: dict[str, Path]) -> str:
        """Quoted mount paths in a config file, rewritten in one pass: a rewritten path
        (under /tmp) must not be rewritten again by a mount at /tmp."""
        if not mounts:
            return text
        paths = sorted(mounts, key=len, reverse=True)
        pattern = re.compile('"(' + "|".join(map(re.escape, paths)) + ')(?=["/])')
        return pattern.sub(lambda m: f'"{mounts[m.group(1)]}', text)

    @staticmethod
    def _local_path(arg: str, mounts: dict[str, Path]) -> str:
        for mount_path, local in mounts.items():
            if arg.startswith(mount_path + "/") or arg == mount_path:
                return str(local) + arg[len(mount_path) :]
        return arg

    def _watch_exit(self, pod: Any, container: Container) -> None:
        assert container.process is not None
        code = container.process.poll()
        if code is None:
            return
        container.exit_codes.append(code)
        if container.restart_policy == "Always" or (
            container.restart_policy == "OnFailure" and code != 0
        ):
            container.restarts += 1
            container.start()
            self._report(pod, container, running=True)
        else:
            self._report(pod, container, running=False, exit_code=code)

    def _terminate(self, pod: Any, lost: bool) -> None:
        container = self.containers.get(pod.metadata.uid)
        alive = container and container.process and container.process.poll() is None
        if alive and not lost:
            assert container is not None and container.process is not None
            if container.terminating_since is None:
                container.terminating_since = time.monotonic()
                container.process.send_signal(signal.SIGTERM)
                return
            if time.monotonic() - container.terminating_since < container.grace_s:
                return
            container.process.kill()
            container.process.wait()
        try:
            self.core.delete_namespaced_pod(
                pod.metadata.name, self.namespace, grace_period_seconds=0
            )
        except ApiException as error:
            if error.status != 404:
                raise

    def _report(
        self, pod: Any, container: Container, running: bool, exit_code: int | None = None
    ) -> None:
        if running:
            state: dict[str, Any] = {"running": {"startedAt": _now()}}
            phase = "Running"
        else:
            state = {"terminated": {"exitCode": exit_code, "finishedAt": _now()}}
            phase = "Succeeded" if exit_code == 0 else "Failed"
        status = {
            "phase": phase,
            "startTime": _now(),
            "conditions": [{"type": "Ready", "status": "True" if running else "False"}],
            "containerStatuses": [
                {
                    "name": pod.spec.containers[0].name,
                    "image": pod.spec.containers[0].image,
                    "imageID": "",
                    "ready": running,
                    "started": running,
                    "restartCount": container.restarts,
                    "state": state,
                }
            ],
        }
        self.core.patch_namespaced_pod_status(pod.metadata.name, self.namespace, {"status": status})
