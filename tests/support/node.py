"""The test bed's cluster with a real node (``scripts/node.sh``): what a test needs to
drive it as a user would (kubectl, helm) and to inject faults below Kubernetes
(killing a container the way the kernel's OOM killer or a crash would)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.testbed import helm, kubectl, script_value


def node_kafka_bootstrap() -> str:
    """The broker's listener on the node network (pods cannot reach loopback)."""
    return script_value("scripts/kafka.sh", "node-bootstrap")


def node_kafka_client() -> dict[str, str]:
    """librdkafka settings for that listener (SASL PLAIN over TLS, the test bed's CA):
    the keys of a Pipeline's auth Secret."""
    settings: dict[str, str] = json.loads(
        Path(script_value("scripts/kafka.sh", "node-client")).read_text()
    )
    return settings


def load_image(image: str) -> None:
    """Imports an image built by scripts/image.sh into the node's containerd."""
    script_value("scripts/node.sh", "load", image)


def tag_image(image: str, new: str) -> None:
    """Another name for a loaded image, as if a new version had been pushed."""
    script_value("scripts/node.sh", "tag", image, new)


@dataclass(frozen=True)
class Node:
    kubeconfig: str

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        return kubectl(self.kubeconfig, *args, stdin=stdin, check=check).stdout

    def helm(self, *args: str) -> str:
        out = helm(self.kubeconfig, *args, check=False)
        if out.returncode != 0:
            namespace = args[args.index("-n") + 1] if "-n" in args else "default"
            raise AssertionError(
                f"helm {' '.join(args[:2])} failed:\n{out.stderr[-3000:]}\n"
                f"{self.why_not_ready(namespace)}"
            )
        return out.stdout

    def why_not_ready(self, namespace: str) -> str:
        """What a reader of a timed-out ``--wait`` needs: the node's pressure
        conditions (a full disk taints it), the namespace's pods and its last events."""

        def shown(*args: str) -> str:
            out = kubectl(self.kubeconfig, *args, check=False)
            return out.stdout + out.stderr

        conditions = shown(
            "get", "nodes", "-o",
            "jsonpath={range .items[*].status.conditions[*]}{.type}={.status} {end}",
        )  # fmt: skip
        pods = shown("get", "pods", "-n", namespace, "-o", "wide")
        # Sorted by creation: a scheduler's events (FailedScheduling) have no lastTimestamp.
        events = shown("get", "events", "-n", namespace, "--sort-by=.metadata.creationTimestamp")
        return f"node: {conditions}\npods:\n{pods}\nevents:\n{events[-3000:]}"

    def apply(self, *documents: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in documents))

    def get(self, kind: str, namespace: str, selector: str = "") -> list[dict[str, Any]]:
        args = ["get", kind, "-n", namespace, "-o", "json"]
        if selector:
            args += ["-l", selector]
        items: list[dict[str, Any]] = json.loads(self.kubectl(*args))["items"]
        return items

    def running_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return [
            pod
            for pod in self.get("pods", namespace, selector)
            if pod["status"].get("phase") == "Running"
            and "deletionTimestamp" not in pod["metadata"]
            and all(c.get("ready") for c in pod["status"].get("containerStatuses", []))
        ]

    def wait_for_pods(
        self, namespace: str, selector: str, count: int = 1, timeout_s: float = 300
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pods = self.running_pods(namespace, selector)
            if len(pods) >= count:
                return pods
            time.sleep(1)
        described = self.kubectl("describe", "pods", "-n", namespace, "-l", selector, check=False)
        raise AssertionError(f"no {count} running pods for {selector}:\n{described[-4000:]}")

    def wait_for_restart(
        self, namespace: str, pod: dict[str, Any], timeout_s: float = 300
    ) -> dict[str, Any]:
        """The pod once the kubelet has restarted its killed container (a new id)."""
        killed = pod["status"]["containerStatuses"][0]["containerID"]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            now: dict[str, Any] = json.loads(
                self.kubectl("get", "pod", pod["metadata"]["name"], "-n", namespace, "-o", "json")
            )
            status = now["status"]["containerStatuses"][0]
            if status.get("containerID") != killed and "running" in status["state"]:
                return now
            time.sleep(1)
        raise AssertionError(f"{pod['metadata']['name']}: the killed container never restarted")

    def force_delete(self, namespace: str, pod: str) -> None:
        """The pod is gone at once, its containers killed (a node loss, a `kill -9`)."""
        self.kubectl("delete", "pod", pod, "-n", namespace, "--grace-period=0", "--force")

    def kill_container(self, pod: dict[str, Any]) -> None:
        """SIGKILLs the pod's first container in containerd; the kubelet restarts it."""
        container_id = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
        script_value("scripts/node.sh", "kill", container_id)
