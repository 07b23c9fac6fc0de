"""The Helm chart on a real API server: it lints, every object it renders is accepted
(server-side dry run, CRDs included), it installs and upgrades for real with a stable
webhook CA bundle (the operator's to fill in), and values.schema.json refuses bad
values by name."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.support.cluster import new_namespace
from tests.support.testbed import ROOT, helm, kubectl

# alone: a release installs cluster-wide objects (CRDs, ClusterRoles, the webhook).
pytestmark = [pytest.mark.alone, pytest.mark.k8s]

CHART = str(ROOT / "helm" / "onceflow")


def _render(kubeconfig: str, namespace: str, *values: str) -> list[dict[str, Any]]:
    """`helm template` as a user types it: no --kube-version (helm's own, 1.34, passes
    the chart's kubeVersion)."""
    out = helm(kubeconfig, "template", "of", CHART, "-n", namespace, *values)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def test_chart_lints_and_every_rendered_object_is_accepted(kubeconfig: str) -> None:
    assert "0 chart(s) failed" in helm(kubeconfig, "lint", CHART, "--strict").stdout
    namespace = new_namespace(kubeconfig, "chart")
    documents = _render(kubeconfig, namespace)
    kinds = sorted({d["kind"] for d in documents})
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "Deployment",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingWebhookConfiguration",
    ]
    assert _render(kubeconfig, namespace) == documents, "helm template is deterministic"
    aggregated = {
        d["metadata"]["name"].removeprefix("of-onceflow-"): d
        for d in documents
        if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith(("-view", "-edit"))
    }
    aggregates = "rbac.authorization.k8s.io/aggregate-to-"
    assert aggregated["view"]["metadata"]["labels"][f"{aggregates}view"] == "true"
    assert f"{aggregates}view" not in aggregated["edit"]["metadata"]["labels"], "viewers read"
    assert {v for r in aggregated["view"]["rules"] for v in r["verbs"]} == {"get", "list", "watch"}
    assert all(r["apiGroups"] == ["onceflow.io"] for d in aggregated.values() for r in d["rules"])
    crds = [d for d in documents if d["kind"] == "CustomResourceDefinition"]
    assert len(crds) == 5
    assert all(c["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep" for c in crds)
    applied = kubectl(
        kubeconfig, "apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump_all(documents)
    )
    assert applied.stdout.count("(server dry run)") == len(documents)
    role = r"eks\.amazonaws\.com/role-arn=arn:aws:iam::1:role/spark"
    annotated = _render(
        kubeconfig, namespace, "--set-string", f"spark.serviceAccount.annotations.{role}"
    )
    (spark,) = [
        d for d in annotated if d["kind"] == "ServiceAccount" and "spark" in d["metadata"]["name"]
    ]
    assert spark["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/spark"
    }


@pytest.fixture
def release(kubeconfig: str) -> Iterator[tuple[str, str]]:
    namespace = new_namespace(kubeconfig, "helm")
    name = f"of-{uuid.uuid4().hex[:6]}"
    try:
        yield name, namespace
    finally:
        helm(kubeconfig, "uninstall", name, "-n", namespace, "--wait", check=False)


def test_chart_installs_and_upgrades_keeping_the_operators_ca_bundle(
    kubeconfig: str, release: tuple[str, str]
) -> None:
    release_name, namespace = release
    name = f"{release_name}-onceflow"  # the chart's full name for this release
    # The test bed already has the CRDs (installed by kubectl), and no pod runs here:
    # the webhook is confined to this namespace so other tests never call it.
    values = ["--set", "crds.install=false", "--set", f"watchNamespaces={{{namespace}}}"]
    held = _pipeline_with_a_finalizer(kubeconfig, namespace)
    helm(kubeconfig, "install", release_name, CHART, "-n", namespace, *values)
    _an_operator_outage_blocks_spec_changes_but_never_finalizer_removal(kubeconfig, namespace, held)
    webhook = yaml.safe_load(
        kubectl(kubeconfig, "get", "validatingwebhookconfiguration", name, "-o", "yaml").stdout
    )
    # No operator pod runs here: stand in for it, filling in the CA as it would.
    assert "caBundle" not in webhook["webhooks"][0]["clientConfig"], "the operator's to set"
    first_ca = "Y2E="
    patch = [
        {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": first_ca}
        for i in range(len(webhook["webhooks"]))
    ]
    kubectl(
        kubeconfig,
        "patch",
        "validatingwebhookconfiguration",
        name,
        "--type=json",
        "-p",
        json.dumps(patch),
    )
    assert [w["clientConfig"]["service"]["path"] for w in webhook["webhooks"]] == [
        "/validate-pipelines",
        "/validate-kafkasources",
        "/validate-sparkjobs",
    ]
    selector = webhook["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]
    assert selector["values"] == [namespace]
    deployment = yaml.safe_load(
        kubectl(kubeconfig, "get", "deployment", name, "-n", namespace, "-o", "yaml").stdout
    )
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--namespace={namespace}" in args
    assert "--webhook-port=9443" in args
    assert f"--webhook-cert-secret={namespace}/{name}-webhook-tls" in args

    helm(
        kubeconfig,
        "upgrade",
        release_name,
        CHART,
        "-n",
        namespace,
        *values,
        "--set",
        "replicaCount=3",
    )
    webhook = yaml.safe_load(
        kubectl(kubeconfig, "get", "validatingwebhookconfiguration", name, "-o", "yaml").stdout
    )
    assert webhook["webhooks"][0]["clientConfig"]["caBundle"] == first_ca, "upgrade dropped the CA"
    replicas = kubectl(
        kubeconfig, "get", "deployment", name, "-n", namespace, "-o", "jsonpath={.spec.replicas}"
    ).stdout
    assert replicas == "3"


def _pipeline_with_a_finalizer(kubeconfig: str, namespace: str) -> str:
    """Created before the webhook exists (no operator pod ever runs here)."""
    name = "held"
    pipeline = {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": name, "namespace": namespace, "finalizers": ["test.onceflow.io/hold"]},
        "spec": {"kafka": {"bootstrapServers": "kafka:9092"}},
    }
    kubectl(kubeconfig, "create", "-f", "-", stdin=yaml.safe_dump(pipeline))
    return name


def _an_operator_outage_blocks_spec_changes_but_never_finalizer_removal(
    kubeconfig: str, namespace: str, name: str
) -> None:
    """The webhook's Service has no ready pod (failurePolicy Fail): a spec change is
    refused, but deleting the object and removing its finalizer go through."""

    def patch(body: str) -> Any:
        return kubectl(
            kubeconfig,
            "-n",
            namespace,
            "patch",
            "pipelines",
            name,
            "--type=merge",
            "-p",
            body,
            check=False,
        )

    refused = patch('{"spec": {"exactlyOnce": "enabled"}}')
    assert refused.returncode != 0 and "validation.onceflow.io" in refused.stderr, refused
    deleted = kubectl(
        kubeconfig, "-n", namespace, "delete", "pipelines", name, "--wait=false", check=False
    )
    assert deleted.returncode == 0, deleted.stderr
    released = patch('{"metadata": {"finalizers": null}}')
    assert released.returncode == 0, released.stderr


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("replicaCount=0", "replicaCount"),
        ("webhook.failurePolicy=Sometimes", "failurePolicy"),
        ("operator.fenceTimeoutSeconds=0", "fenceTimeoutSeconds"),
        ("watchNamespaces={Not_A_Namespace}", "watchNamespaces"),
        ("replicas=2", "replicas"),
        ("operator.resources.limits.memory=lots", "/operator/resources/limits/memory"),
        ("imagePullSecrets[0].secret=regcred", "imagePullSecrets"),
        ("serviceAccount.create=false", "serviceAccount.name"),
    ],
)
def test_values_schema_refuses_bad_values_naming_them(
    kubeconfig: str, value: str, named: str
) -> None:
    refused = helm(kubeconfig, "template", "of", CHART, "--set", value, check=False)
    assert refused.returncode != 0
    assert named in refused.stderr, refused.stderr


def test_the_charts_pod_options_reach_the_operator_and_its_workloads(kubeconfig: str) -> None:
    documents = _render(
        kubeconfig,
        "default",
        "--set",
        "imagePullSecrets[0].name=regcred,priorityClassName=critical,podLabels.team=a",
        "--set",
        "podAnnotations.scrape=yes,fullnameOverride=flow,serviceAccount.annotations.who=me",
    )
    (deployment,) = [d for d in documents if d["kind"] == "Deployment"]
    assert deployment["metadata"]["name"] == "flow"
    template = deployment["spec"]["template"]
    assert template["metadata"]["labels"]["team"] == "a"
    assert template["metadata"]["annotations"] == {"scrape": "yes"}
    pod = template["spec"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["priorityClassName"] == "critical"
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["ONCEFLOW_IMAGE_PULL_SECRETS"] == "regcred", "the workloads' pods get it too"
    (account,) = [
        d for d in documents if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == "flow"
    ]
    assert account["metadata"]["annotations"] == {"who": "me"}
    own = _render(
        kubeconfig, "default", "--set", "serviceAccount.create=false,serviceAccount.name=ops"
    )
    assert not [
        d for d in own if d["kind"] == "ServiceAccount" and "spark" not in d["metadata"]["name"]
    ]
    (deployment,) = [d for d in own if d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "ops"
    bound = [s["name"] for d in own if "Binding" in d["kind"] for s in d.get("subjects", [])]
    assert "ops" in bound, bound


def _pod(image: str, account: str = "onceflow-spark", **spec: Any) -> dict[str, Any]:
    """A pod as Spark creates an executor of SparkJob 'agg', changed by ``spec``."""
    labels = spec.pop("labels", {"spark-role": "executor", "onceflow.io/sparkjob": "agg"})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "agg-exec-", "labels": labels},
        "spec": {
            "serviceAccountName": account,
            "containers": [{"name": "executor", "image": image}],
            **spec,
        },
    }


def test_a_drivers_token_creates_only_executors_of_allowed_images_as_its_own_account(
    kubeconfig: str,
) -> None:
    """Security review #2: a driver runs tenant code, which can read the driver's
    token, and that token may create pods. The chart's admission policy lets it create
    executors and nothing else: under its own account, from the operator's image or
    tenants.imagePrefixes, labelled as a SparkJob's executors, with no host path or
    host namespace. Anyone else's pods are not its business."""
    namespace = new_namespace(kubeconfig, "vap")
    release = f"vap-{uuid.uuid4().hex[:6]}"  # the policy is cluster-wide: its own name
    rendered = helm(
        kubeconfig,
        "template",
        release,
        CHART,
        "-n",
        namespace,
        "--set",
        "tenants.imagePrefixes={registry.example.com/team}",
        "--set",
        f"spark.serviceAccount.namespaces={{{namespace}}}",
    )
    documents = [
        d
        for d in yaml.safe_load_all(rendered.stdout)
        if d
        and (
            d["kind"].startswith("ValidatingAdmissionPolicy")
            or d["metadata"]["name"] == "onceflow-spark"
        )
    ]
    assert sorted(d["kind"] for d in documents) == [
        "Role",
        "RoleBinding",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(documents))
    driver = f"system:serviceaccount:{namespace}:onceflow-spark"

    def create(pod: dict[str, Any], who: str = driver) -> str:
        """The API server's answer to ``who`` creating ``pod`` (a server-side dry run:
        admission runs in full, and nothing is stored)."""
        answer = kubectl(
            kubeconfig,
            "create",
            "--dry-run=server",
            "-n",
            namespace,
            f"--as={who}",
            "-f",
            "-",
            stdin=json.dumps(pod),
            check=False,
        )
        return answer.stdout + answer.stderr

    def refused() -> bool:
        return "denied request" in create(_pod("evil.example/anything:latest"))

    try:
        deadline = time.monotonic() + 30  # the policy takes effect once it is compiled
        while not refused() and time.monotonic() < deadline:
            time.sleep(0.5)
        for image in ("ghcr.io/onceflow/onceflow:0.1.0", "registry.example.com/team/spark:4"):
            assert "created (server dry run)" in create(_pod(image)), create(_pod(image))
        cases = {
            "another image": (_pod("evil.example/anything:latest"), "tenants.imagePrefixes"),
            "a prefix that is not a path": (
                _pod("registry.example.com/team-b/x:1"),
                "tenants.imagePrefixes",
            ),
            "another account": (
                _pod("ghcr.io/onceflow/onceflow:0.1.0", account="db-admin"),
                "run as onceflow-spark",
            ),
            "not an executor": (
                _pod("ghcr.io/onceflow/onceflow:0.1.0", labels={"app": "x"}),
                "executor pods of its SparkJob only",
            ),
            "a host path": (
                _pod(
                    "ghcr.io/onceflow/onceflow:0.1.0",
                    volumes=[{"name": "root", "hostPath": {"path": "/"}}],
                ),
                "no host path",
            ),
            "the host's network": (
                _pod("ghcr.io/onceflow/onceflow:0.1.0", hostNetwork=True),
                "no host namespace",
            ),
        }
        for case, (pod, says) in cases.items():
            answer = create(pod)
            assert "denied request" in answer and says in answer, f"{case}: {answer}"
        admin = kubectl(
            kubeconfig,
            "create",
            "--dry-run=server",
            "-n",
            namespace,
            "-f",
            "-",
            stdin=json.dumps(_pod("evil.example/anything:latest")),
            check=False,
        )
        assert "created (server dry run)" in admin.stdout, "only drivers' requests are judged"
        # A driver annotates its own pods with progress (metadata only: allowed), but may
        # not change what one runs: an executor swapped to another image is refused by
        # the image rule, the only one it breaks.
        executor = _pod("ghcr.io/onceflow/onceflow:0.1.0")
        executor["metadata"] = {**executor["metadata"], "name": "theirs"}
        del executor["metadata"]["generateName"]
        kubectl(kubeconfig, "create", "-n", namespace, "-f", "-", stdin=json.dumps(executor))
        as_driver = ("-n", namespace, f"--as={driver}")
        annotated = kubectl(
            kubeconfig,
            "annotate",
            "pod",
            "theirs",
            "onceflow.io/progress=1",
            *as_driver,
            check=False,
        )
        assert annotated.returncode == 0, annotated.stderr
        swapped = kubectl(
            kubeconfig,
            "set",
            "image",
            "pod/theirs",
            "executor=evil.example/anything:latest",
            *as_driver,
            check=False,
        )
        assert swapped.returncode != 0 and "tenants.imagePrefixes" in swapped.stderr, swapped.stderr
    finally:
        for d in documents:
            if d["kind"].startswith("ValidatingAdmissionPolicy"):
                kubectl(kubeconfig, "delete", d["kind"], d["metadata"]["name"], check=False)


def test_one_cloud_identity_for_several_namespaces_is_refused_and_each_gets_its_own(
    kubeconfig: str,
) -> None:
    """Security review #4: annotations shared by every namespace's onceflow-spark give
    every tenant's drivers one cloud identity, which reads and writes all their
    checkpoints and outputs."""
    role = r"eks\.amazonaws\.com/role-arn"
    shared = helm(
        kubeconfig,
        "template",
        "of",
        CHART,
        "--set",
        "spark.serviceAccount.namespaces={team-a,team-b}",
        "--set-string",
        f"spark.serviceAccount.annotations.{role}=arn:aws:iam::1:role/spark",
        check=False,
    )
    assert shared.returncode != 0
    assert "spark.serviceAccount.namespaceAnnotations" in shared.stderr, shared.stderr
    own = _render(
        kubeconfig,
        "default",
        "--set",
        "spark.serviceAccount.namespaces={team-a,team-b}",
        "--set-string",
        f"spark.serviceAccount.namespaceAnnotations.team-a.{role}=arn:aws:iam::1:role/a",
        "--set-string",
        f"spark.serviceAccount.namespaceAnnotations.team-b.{role}=arn:aws:iam::1:role/b",
    )
    accounts = {
        d["metadata"]["namespace"]: d["metadata"].get("annotations")
        for d in own
        if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == "onceflow-spark"
    }
    assert accounts == {
        "team-a": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/a"},
        "team-b": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/b"},
    }
