"""Onceflow as a user runs it, on the test bed's real node: the getting-started page
(docs/getting-started.md), run as written (``tests.support.guide``): its auth Secret,
namespace and `helm install` of the chart with the image built here, its first pipeline
(a source and a Spark job with `submitter: spark-submit`, its driver and executors real
pods) applied into a namespace that enforces Pod Security "restricted", its audit Job
and its clean-up. While the pipeline runs, the test breaks things and audits both
topics itself. The pods reach Kafka only through SASL PLAIN over TLS with the
Pipeline's auth Secret, so the operator's fencing, the tasks, Spark's (Java) reader,
the exactly-once sink and the audit Job all prove they are given the credentials, in
the words their client understands.

`make test` runs the short fault list; `make e2e-cluster` (ONCEFLOW_NODE_FAULTS=full)
runs every fault: also a task container killed under the kubelet, the active operator
deleted while a new task generation is being fenced, an executor killed, and a
`helm upgrade` to another operator image tag.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from onceflow.eos.audit_reader import read_sequences
from onceflow.logic.audit import audit_sequences
from tests.support.api_audit import calls_by, granted
from tests.support.checkpoint import batch_in_flight
from tests.support.guide import Guide, guide_file, guide_steps
from tests.support.kafka import CommittedTail
from tests.support.node import (
    Node,
    load_image,
    node_kafka_bootstrap,
    node_kafka_client,
    tag_image,
)
from tests.support.testbed import ROOT, helm_path, kubectl_path, onceflow_image

# alone: the real node and the broker's node listener are one per test bed, and the
# node's pods need every core they can get.
pytestmark = [
    pytest.mark.alone,
    pytest.mark.node,
    pytest.mark.image,
    pytest.mark.kafka,
    pytest.mark.timeout(2400),
]

FULL = os.environ.get("ONCEFLOW_NODE_FAULTS") == "full"
PAGE = (ROOT / "docs" / "getting-started.md").read_text()
PIPELINE = {
    d["kind"]: d["spec"] for d in yaml.safe_load_all(guide_file(PAGE, "first-pipeline.yaml"))
}
STREAMS = PIPELINE["KafkaSource"]["connector"]["config"]["streams"]
# Per stream; the source writes ~300 records/s.
LIMIT = 50_000 if FULL else PIPELINE["KafkaSource"]["connector"]["config"]["limit"]
# Spark copies at most BATCH records per 2 s trigger, slower than the source writes:
# the job has batches in flight from its first record until well after the source ends.
BATCH = PIPELINE["SparkJob"]["input"]["maxOffsetsPerTrigger"]
CHART = ROOT / "helm" / "onceflow"
# The page's pipeline only: broken workloads run beside it in the same namespace.
TASKS = "onceflow.io/source=counter"
DRIVER = "spark-role=driver,onceflow.io/sparkjob=copier"
EXECUTOR = "spark-role=executor,onceflow.io/sparkjob=copier"
TEST_LABEL = ("onceflow-test", "real-node")  # on this test's namespaces


@dataclass
class Run:
    """One pipeline on the node, and what the test saw of it."""

    node: Node
    kafka: str  # the test's own (loopback) address of the broker
    namespace: str
    operator_namespace: str
    release: str
    image: str
    name: str = field(default_factory=lambda: f"n{uuid.uuid4().hex[:6]}")
    faults: list[str] = field(default_factory=list)
    counted: dict[str, int] = field(default_factory=dict)
    tails: dict[str, CommittedTail] = field(default_factory=dict)
    installed_at: str = ""
    """When the chart was installed (RFC 3339 UTC): the audit log is read from there."""
    guide: Guide | None = None
    """The getting-started page's steps, run a stretch at a time."""

    @property
    def source_topic(self) -> str:
        return f"{self.name}.counts"

    @property
    def sink_topic(self) -> str:
        return f"{self.name}.copied"

    @property
    def checkpoint(self) -> Path:
        """The job's checkpoint claim, a hostPath volume: the test reads it as it runs."""
        return Path("/var/lib/onceflow-test-checkpoints") / self.namespace

    def committed(self, topic: str) -> int:
        """Committed records so far (duplicates too: the audit at the end judges them),
        each call reading only what was committed since the last; while a killed
        writer's transaction holds the topic back (until its successor fences it), what
        was committed below it."""
        tail = self.tails.setdefault(topic, CommittedTail(self.kafka, topic))
        try:
            fresh = tail.read()
        except LookupError:  # not created yet
            return 0
        self.counted[topic] = self.counted.get(topic, 0) + len(fresh)
        return self.counted[topic]

    def follow(self, words: str) -> str:
        """Runs the page on through its step with these words; returns the output."""
        assert self.guide is not None, "the fixture reads the page"
        return self.guide.run_through(words)

    def wait(self, what: str, check: Callable[[], bool], timeout_s: float = 600) -> float:
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if check():
                return time.monotonic() - started
            time.sleep(1)  # checks run kubectl: the node's pods need the cores more
        events = self.node.kubectl("get", "events", "-n", self.namespace, check=False)
        raise AssertionError(f"timed out waiting for {what}; events:\n{events[-4000:]}")


def _checkpoint_volume(run: Run) -> dict[str, Any]:
    """The volume the page's claim binds to: the node has no provisioner, so a
    hostPath the test reads as the job runs."""
    checkpoint = run.checkpoint
    checkpoint.mkdir(parents=True, exist_ok=True)
    os.chown(checkpoint, 65532, 65532)  # the image's user; a hostPath has no fsGroup
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{run.namespace}-checkpoint"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
            "storageClassName": "",
            "claimRef": {"namespace": run.namespace, "name": "copier-checkpoint"},
            "hostPath": {"path": str(checkpoint), "type": "Directory"},
        },
    }


def _substitutions(run: Run) -> list[tuple[str, str]]:
    """What the test bed has in place of the page's examples, as (regex, replacement)."""
    repository, tag = run.image.rsplit(":", 1)
    return [
        # The image built here, loaded into the node's containerd rather than pushed.
        (re.escape("registry.example.com/onceflow:0.1.0"), run.image),
        (r"repository: registry\.example\.com/onceflow", f"repository: {repository}"),
        (r'tag: "0\.1\.0"', f'tag: "{tag}"\n  pullPolicy: Never'),
        # A failover in seconds, for the operator deleted in the full run.
        (r"(?m)^webhook:", "operator: {peeringLifetimeSeconds: 15}\nwebhook:"),
        # The broker's listener on the node network (SASL PLAIN over TLS).
        (r"my-cluster-kafka-bootstrap\.kafka\.svc:9093", node_kafka_bootstrap()),
        # A namespace and topics of this run: a reused node and broker keep earlier ones.
        (r"\bpipelines\b", run.namespace),
        (r"\bquickstart\.counts\b", run.source_topic),
        (r"\bquickstart\.copied\b", run.sink_topic),
        (r"\blimit: \d+", f"limit: {LIMIT}"),
        (r'--expect, "\d+"', f'--expect, "{LIMIT}"'),
    ]


def _guide(run: Run, workdir: Path) -> Guide:
    """The page's steps, run where a reader who cloned the repository stands (the chart
    and the venv at hand), with the test bed's tools and its Kafka's credentials."""
    for name in ("helm", ".venv"):
        (workdir / name).symlink_to(ROOT / name)
    client = node_kafka_client()
    (workdir / "ca.pem").write_text(client["ssl.ca.pem"])
    tools = f"{Path(kubectl_path()).parent}:{Path(helm_path()).parent}"
    env = {
        **os.environ,
        "KUBECONFIG": run.node.kubeconfig,
        "PATH": f"{tools}:{os.environ['PATH']}",
        "API_KEY": client["sasl.username"],
        "API_SECRET": client["sasl.password"],
    }
    return Guide(guide_steps(PAGE, _substitutions(run)), workdir, env)


@pytest.fixture
def run(real_node: Node, kafka_bootstrap: str, tmp_path: Path) -> Iterator[Run]:
    image = onceflow_image()
    load_image(image)
    suffix = uuid.uuid4().hex[:6]
    run = Run(
        node=real_node,
        kafka=kafka_bootstrap,
        namespace=f"pipes-{suffix}",
        # The page's names: CRDs outlive `helm uninstall` and belong to their release.
        operator_namespace="onceflow-system",
        release="onceflow",
        image=image,
    )
    # A reused node may hold what an interrupted run left: it would compete for 2 cores.
    real_node.kubectl("delete", "namespace", "-l", "=".join(TEST_LABEL), "--wait=false")
    real_node.helm(
        "uninstall", run.release, "-n", run.operator_namespace, "--ignore-not-found", "--wait"
    )
    run.guide = _guide(run, tmp_path)
    run.installed_at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    try:
        # The auth Secret (the page's managed Kafka), the namespace, the values, Helm.
        run.follow("helm install")
        run.node.kubectl("label", "namespace", run.namespace, "=".join(TEST_LABEL))
        yield run
    finally:
        for tail in run.tails.values():
            tail.close()
        real_node.kubectl("delete", "namespace", run.namespace, "--wait=false", check=False)
        real_node.kubectl("delete", "pv", f"{run.namespace}-checkpoint", check=False)
        real_node.helm("uninstall", run.release, "-n", run.operator_namespace, "--ignore-not-found")


def _active_operator(run: Run) -> str:
    """The pod of the replica kopf's peering made active (the highest priority)."""
    peering = yaml.safe_load(
        run.node.kubectl("get", "clusterkopfpeering", "onceflow", "-o", "yaml")
    )
    pods = run.node.running_pods(run.operator_namespace, "app.kubernetes.io/name=onceflow")
    live = {  # peers of earlier installs linger in the status until they expire
        peer: announced["priority"]
        for peer, announced in (peering.get("status") or {}).items()
        if any(pod["metadata"]["name"] in peer for pod in pods)
    }
    best = max(live, key=live.__getitem__)
    (pod,) = [p["metadata"]["name"] for p in pods if p["metadata"]["name"] in best]
    return pod


def _status(run: Run, plural: str, name: str) -> dict[str, Any]:
    found = json.loads(run.node.kubectl("get", plural, name, "-n", run.namespace, "-o", "json"))
    return dict(found.get("status") or {})


def _progress(run: Run) -> dict[str, Any]:
    return dict(_status(run, "sparkjobs", "copier").get("progress") or {})


def _source_status(run: Run) -> dict[str, Any]:
    return _status(run, "kafkasources", "counter")


def _source_enabled(run: Run) -> bool:
    """The rollout reached `enabled` and that generation's tasks are ready."""
    status = _source_status(run)
    ready = [c for c in status.get("conditions", []) if c["type"] == "Ready"]
    return status.get("mode") == "enabled" and bool(ready) and ready[0]["status"] == "True"


def _fault_on_the_source(run: Run) -> None:
    total = STREAMS * LIMIT
    run.wait("the source to run exactly-once", lambda: _source_enabled(run), 300)
    current = f"{TASKS},onceflow.io/generation={_source_status(run)['generation']}"
    (task,) = run.node.wait_for_pods(run.namespace, current)
    before = run.committed(run.source_topic)
    run.node.kubectl("delete", "pod", task["metadata"]["name"], "-n", run.namespace)
    run.faults.append(f"deleted task pod {task['metadata']['name']} at {before}/{total}")
    assert before < total, "the task pod was deleted after the source had finished"
    run.node.wait_for_pods(run.namespace, TASKS)
    if FULL:
        (task,) = run.node.wait_for_pods(run.namespace, TASKS)
        before = run.committed(run.source_topic)
        run.node.kill_container(task)
        run.faults.append(f"killed a task container at {before}/{total}")
        assert before < total, "the task container was killed after the source had finished"
        run.node.wait_for_restart(run.namespace, task)
        _operator_lost_while_fencing(run)


def _operator_lost_while_fencing(run: Run) -> None:
    """A spec change starts a new task generation (fence, then new pods); the active
    operator is deleted at once, and the standby must finish the step."""
    active = _active_operator(run)
    generation = _source_status(run)["generation"]
    run.node.kubectl(
        "patch", "kafkasource", "counter", "-n", run.namespace, "--type=merge",
        "-p", '{"spec": {"connector": {"config": {"pollIntervalMs": 90}}}}',
    )  # fmt: skip
    run.node.force_delete(run.operator_namespace, active)
    run.faults.append(f"deleted the active operator {active} as a new generation began")
    run.wait(
        "the standby to roll the new generation out",
        lambda: _source_status(run).get("generation", 0) > generation and _source_enabled(run),
        300,
    )
    assert _active_operator(run) != active


def _fault_on_the_driver(run: Run) -> None:
    """The driver pod lost (the Job starts another on the same checkpoint claim), then
    the driver's container SIGKILLed inside a batch (restarted in place), retried until
    a kill leaves a planned batch uncommitted in the checkpoint."""
    total = STREAMS * LIMIT
    run.wait("a first committed batch", lambda: run.committed(run.sink_topic) >= BATCH)
    (driver,) = run.node.wait_for_pods(run.namespace, DRIVER)
    if FULL:
        (executor, *_) = run.node.wait_for_pods(run.namespace, EXECUTOR)
        run.node.force_delete(run.namespace, executor["metadata"]["name"])
        run.faults.append(f"deleted executor pod {executor['metadata']['name']}")
        before = run.committed(run.sink_topic)
        run.wait("a batch on a new executor", lambda: run.committed(run.sink_topic) > before)
    before = run.committed(run.sink_topic)
    run.node.force_delete(run.namespace, driver["metadata"]["name"])
    run.faults.append(f"deleted the driver pod at {before}/{total}")
    (driver,) = run.node.wait_for_pods(run.namespace, DRIVER, timeout_s=600)
    run.wait("the new driver's first batch", lambda: run.committed(run.sink_topic) > before)
    for _ in range(5):
        before = run.committed(run.sink_topic)
        # A driver restarted after a kill (in CrashLoopBackOff after two) needs its JVM,
        # session and first plan before a batch is in flight: 10 s was not always enough.
        deadline = time.monotonic() + 90
        while not batch_in_flight(run.checkpoint) and time.monotonic() < deadline:
            time.sleep(0.01)
        run.node.kill_container(driver)
        if batch_in_flight(run.checkpoint):  # planned, never committed: to be replayed
            run.faults.append(f"SIGKILLed the driver inside a batch at {before}/{total}")
            break
        driver = run.node.wait_for_restart(run.namespace, driver)
    else:
        raise AssertionError("five driver kills, none inside a batch")
    assert before < total, "the driver was killed after the job had copied everything"


def _upgrade_the_operator(run: Run) -> None:
    """`helm upgrade` to another image tag: the operator pods roll, the pipeline runs on."""
    retagged = f"{run.image}-upgrade"
    tag_image(run.image, retagged)
    run.node.helm(
        "upgrade", run.release, str(CHART), "-n", run.operator_namespace, "--reuse-values",
        "--set", f"image.tag={retagged.rsplit(':', 1)[1]}", "--wait", "--timeout", "5m",
    )  # fmt: skip
    run.faults.append("helm upgrade to another operator image tag")


def _editors_and_viewers_get_onceflows_kinds(run: Run) -> None:
    """Kubernetes' own `edit` and `view` roles carry Onceflow's kinds once the chart is
    installed: the node's controller-manager aggregates the chart's roles into them."""
    for user, role in (("an-editor", "edit"), ("a-viewer", "view")):
        run.node.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": user, "namespace": run.namespace},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": role,
                },
                "subjects": [
                    {"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}
                ],
            }
        )

    def answer(user: str, verb: str, what: str) -> str:
        return run.node.kubectl(
            "auth", "can-i", verb, what, "-n", run.namespace, f"--as={user}", check=False
        ).strip()

    def can(user: str, verb: str, what: str) -> bool:
        return answer(user, verb, what) == "yes"

    run.wait(
        "the edit role to gain Onceflow's kinds",
        lambda: all(
            can("an-editor", verb, f"{kind}.onceflow.io")
            for verb in ("create", "patch", "delete")
            for kind in ("pipelines", "kafkasources", "sparkjobs")
        ),
        60,
    )
    assert all(
        can("a-viewer", verb, f"{kind}.onceflow.io")
        for verb in ("get", "list", "watch")
        for kind in ("pipelines", "kafkasources", "sparkjobs")
    ), "the view role reads Onceflow's kinds"
    assert answer("a-viewer", "create", "pipelines.onceflow.io") == "no", "viewers only read"


def _the_cluster_role_grants_what_the_operator_used(run: Run) -> None:
    """The cluster-mode ClusterRole is the namespaced mode's Role (whose every grant
    test_least_privilege sees used) plus what kopf needs to watch every namespace; the
    operator, in its pod as the chart's ServiceAccount, used each of those extras here
    and was refused nothing."""
    (deployment,) = run.node.get("deployments", run.operator_namespace)
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    audit_log = Path(run.node.kubeconfig).parent / "audit.log"  # scripts/k8s.sh writes it
    used, refused = calls_by(
        audit_log, f"system:serviceaccount:{run.operator_namespace}:{account}", run.installed_at
    )
    assert not refused, refused
    cluster_role = json.loads(run.node.kubectl("get", "clusterrole", account, "-o", "json"))
    server = json.loads(run.node.kubectl("version", "-o", "json"))["serverVersion"]
    rendered = run.node.helm(
        "template", run.release, str(CHART), "-n", run.operator_namespace,
        f"--kube-version={server['gitVersion']}", "--set", f"watchNamespaces={{{run.namespace}}}",
    )  # fmt: skip
    (role,) = [
        d
        for d in yaml.safe_load_all(rendered)
        if d and d["kind"] == "Role" and d["metadata"]["name"] == account
    ]
    extras = granted(cluster_role) - granted(role)
    assert extras, "cluster mode needs more than a namespace's Role"
    assert extras <= used, f"granted in cluster mode but never used: {sorted(extras - used)}"
    only_namespaced = granted(role) - granted(cluster_role)
    # The peering and its owner: in each namespace rather than cluster-wide.
    assert {resource for _, resource, _ in only_namespaced} == {"kopfpeerings", "roles"}, (
        only_namespaced
    )


def _audit(run: Run, topic: str) -> None:
    pairs, unparsable = read_sequences(run.kafka, topic, key_field="stream", seq_field="seq")
    report = audit_sequences(
        pairs, expect=LIMIT, expected_keys=[f"s{i}" for i in range(STREAMS)], unparsable=unparsable
    )
    assert report.ok, (topic, report, run.faults)


def test_a_helm_installed_pipeline_runs_in_real_pods_exactly_once_through_faults(run: Run) -> None:
    total = STREAMS * LIMIT
    started = time.monotonic()
    run.node.apply(_checkpoint_volume(run))
    run.follow("kubectl apply -f checkpoint-pvc.yaml")  # `onceflow render` first
    broken = _broken_workloads(run)
    _editors_and_viewers_get_onceflows_kinds(run)
    first = run.wait("a first source record", lambda: run.committed(run.source_topic) > 0)
    print(f"apply -> first record committed by the source: {first:.0f} s")
    _fault_on_the_source(run)
    run.wait("a first copied record", lambda: run.committed(run.sink_topic) > 0)
    print(f"apply -> first record copied by Spark: {time.monotonic() - started:.0f} s")
    _fault_on_the_driver(run)
    # Early, while the copy finishes: the crash-looping ones take CPU from it.
    _broken_workloads_say_why(run, broken)
    if FULL:
        _upgrade_the_operator(run)
    run.wait("the source to finish", lambda: run.committed(run.source_topic) >= total, 900)
    run.wait("the copy to finish", lambda: run.committed(run.sink_topic) >= total, 900)
    print(f"faults: {run.faults}; whole run {time.monotonic() - started:.0f} s")
    _audit(run, run.source_topic)
    _audit(run, run.sink_topic)
    # The driver annotates its pod after batches; the operator copies that to status.
    run.wait("the driver's query progress in the SparkJob's status", lambda: bool(_progress(run)))
    print(f"SparkJob status.progress: {_progress(run)}")
    assert _progress(run)["batchId"] > 0
    # Pod Security "restricted" is enforced there: every pod that ran was admitted by it.
    for selector in (TASKS, DRIVER, EXECUTOR):
        pods = run.node.get("pods", run.namespace, selector)
        assert pods, selector
        for pod in pods:
            assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    _the_cluster_role_grants_what_the_operator_used(run)
    _a_drivers_token_starts_nothing_but_executors(run)
    phase = time.monotonic()
    verdict = run.follow("kubectl logs")  # the page's status commands and its audit Job
    assert "OK: exactly once" in verdict, verdict
    print(f"the page's status commands and audit Job: {time.monotonic() - phase:.0f} s")
    phase = time.monotonic()
    _cleaning_up_removes_the_pipeline_and_the_release(run)
    print(f"the page's clean-up, the peering gone: {time.monotonic() - phase:.0f} s")


def _sparkjob(name: str, namespace: str, topic: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "SparkJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "pipeline": "quickstart",
            "submitter": "spark-submit",
            "input": {"topics": [topic]},
            "transform": {"sql": "SELECT key, value FROM input"},
            "sink": {"kafka": {"topic": f"{topic}.{name}", "partitions": 1}},
            "checkpoint": {"path": f"/tmp/{name}"},
            **spec,
        },
    }


def _degraded_reason(run: Run, plural: str, namespace: str, name: str) -> str:
    (found,) = [o for o in run.node.get(plural, namespace) if o["metadata"]["name"] == name]
    conditions = (found.get("status") or {}).get("conditions") or []
    degraded = [c for c in conditions if c["type"] == "Degraded" and c["status"] == "True"]
    return str(degraded[0]["reason"]) if degraded else ""


Broken = dict[tuple[str, str, str, str], dict[str, Any]]
"""(plural, namespace, name, the Degraded reason it must show) -> the workload."""


def _broken_workloads(run: Run) -> Broken:
    """Workloads that cannot run, applied beside the pipeline (they use little CPU: a
    driver or task start now and then): a driver whose query fails at once (its
    container exits 1, again and again), one asking more CPU than the node has (its pod
    Pending), one in a namespace the chart made no `onceflow-spark` ServiceAccount in
    (its Job cannot create the pod), and a source whose task is killed for memory as it
    starts (a crash loop, as on an unreachable broker)."""
    elsewhere = f"{run.namespace}-nosa"
    secret = {"kind": "Secret", "apiVersion": "v1", "stringData": node_kafka_client()}
    run.node.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": elsewhere, "labels": dict([TEST_LABEL])},
        },
        secret | {"metadata": {"name": "kafka-auth", "namespace": elsewhere}},
        {
            "apiVersion": "onceflow.io/v1alpha1",
            "kind": "Pipeline",
            "metadata": {"name": "quickstart", "namespace": elsewhere},
            "spec": {
                "kafka": {
                    "bootstrapServers": node_kafka_bootstrap(),
                    "authSecretRef": {"name": "kafka-auth"},
                },
                "exactlyOnce": "enabled",
            },
        },
    )
    source = run.source_topic
    starved = {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "KafkaSource",
        "metadata": {"name": "starved", "namespace": run.namespace},
        "spec": {
            "pipeline": "quickstart",
            "topic": f"{run.name}.starved",
            "connector": {"type": "sequence", "config": {"streams": 1, "limit": 10}},
            "resources": {"requests": {"memory": "8Mi"}, "limits": {"memory": "8Mi"}},
        },
    }
    broken = {
        ("sparkjobs", run.namespace, "fails", "ContainerFailing"): _sparkjob(
            "fails", run.namespace, source, transform={"sql": "SELECT no_such_column FROM input"}
        ),
        ("sparkjobs", run.namespace, "greedy", "Unschedulable"): _sparkjob(
            "greedy",
            run.namespace,
            source,
            sparkConf={"spark.kubernetes.driver.request.cores": "64"},
        ),
        ("sparkjobs", elsewhere, "orphan", "FailedCreate"): _sparkjob(
            "orphan", elsewhere, f"{run.name}.none"
        ),
        ("kafkasources", run.namespace, "starved", "ContainerFailing"): starved,
    }
    run.node.apply(*broken.values())
    return broken


def _broken_workloads_say_why(run: Run, broken: Broken) -> None:
    """Each is Degraded with the reason Kubernetes gave: a SparkJob used to read
    Ready=False "submitted", Degraded=False, and a crash-looping source flipped Ready
    without saying why."""
    for plural, namespace, name, reason in broken:
        run.wait(
            f"{plural} {name} Degraded with {reason}",
            lambda: _degraded_reason(run, plural, namespace, name) == reason,  # noqa: B023
            300,
        )
        # At once: a crash-looping driver's restarts take CPU from the pipeline.
        run.node.kubectl("delete", plural, name, "-n", namespace, "--wait")
    (elsewhere,) = {namespace for _, namespace, _, _ in broken} - {run.namespace}
    run.node.kubectl("delete", "namespace", elsewhere, "--wait=false")


def _cleaning_up_removes_the_pipeline_and_the_release(run: Run) -> None:
    """The page's clean-up, to its last step. Two installs in a row: the first one's
    peers used to stay in the peering, and a second release under the same name started
    beside its predecessor's ghosts."""
    peering = ("clusterkopfpeering", run.release)
    assert run.node.kubectl("get", *peering, "-o", "name", check=False).strip(), "no peering"
    run.follow("helm uninstall")
    assert run.guide is not None and run.guide.done, "a step of the page was left out"
    assert not run.node.get("kafkasources", run.namespace), "deleted with the pipeline"
    run.wait(
        "the garbage collector to remove the peering with the release",
        lambda: not run.node.kubectl("get", *peering, "--ignore-not-found", "-o", "name").strip(),
        60,
    )


# Run in the driver's container as the job's code could: its token, the API server,
# a pod any image could be given.
FOREIGN_POD = """
import json, sys
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
config.load_incluster_config()
namespace = open("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read()
labels = {"spark-role": "executor", "onceflow.io/sparkjob": "copier"}  # disguised
restricted = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
pod = {"metadata": {"name": "not-an-executor", "labels": labels}, "spec": {
    "serviceAccountName": "onceflow-spark", "automountServiceAccountToken": False,
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{"name": "x", "image": "evil.example/anything:latest",
                    "securityContext": restricted}]}}  # Pod Security would let it in
try:
    client.CoreV1Api().create_namespaced_pod(namespace, pod, dry_run="All")
    print(json.dumps({"created": True}))
except ApiException as error:
    print(json.dumps({"created": False, "status": error.status, "body": error.body}))
"""


def _a_drivers_token_starts_nothing_but_executors(run: Run) -> None:
    """Security review #2 on the node: code in the driver reads the driver's token
    (it can: Spark needs it to start executors) and asks for a pod of its own; the
    chart's admission policy refuses it. Executors have no token to read at all."""
    (driver,) = run.node.running_pods(run.namespace, DRIVER)
    said = run.node.kubectl(
        "exec", "-n", run.namespace, driver["metadata"]["name"], "--",
        "python3", "-c", FOREIGN_POD,
    )  # fmt: skip
    answer = json.loads(said.strip().splitlines()[-1])
    assert answer["created"] is False and answer["status"] == 403, answer  # Forbidden
    assert "spark-pods" in answer["body"] and "tenants.imagePrefixes" in answer["body"], answer
    executors = run.node.get("pods", run.namespace, EXECUTOR)
    assert executors, "the job's executors"
    for executor in executors:
        assert executor["spec"]["automountServiceAccountToken"] is False
        assert not any(
            m["mountPath"].startswith("/var/run/secrets/kubernetes.io")
            for c in executor["spec"]["containers"]
            for m in c.get("volumeMounts", [])
        ), executor["metadata"]["name"]
