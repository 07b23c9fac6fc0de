"""The API server is real: CRDs establish, watches stream, status and conflicts behave."""

from __future__ import annotations

import textwrap
import threading
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from tests.support.testbed import kubectl

pytestmark = pytest.mark.k8s

GROUP, VERSION, PLURAL = "smoke.onceflow.io", "v1", "widgets"

CRD = textwrap.dedent(
    f"""
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata: {{name: {PLURAL}.{GROUP}}}
    spec:
      group: {GROUP}
      scope: Namespaced
      names: {{plural: {PLURAL}, singular: widget, kind: Widget}}
      versions:
      - name: {VERSION}
        served: true
        storage: true
        subresources: {{status: {{}}}}
        schema:
          openAPIV3Schema:
            type: object
            properties:
              spec:
                type: object
                properties: {{size: {{type: integer, minimum: 0}}}}
              status:
                type: object
                properties: {{phase: {{type: string}}}}
    """
)


def _kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    return kubectl(kubeconfig, *args, stdin=stdin).stdout


@pytest.fixture(scope="module")
def api(kubeconfig: str) -> Iterator[client.CustomObjectsApi]:
    _kubectl(kubeconfig, "apply", "-f", "-", stdin=CRD)
    _kubectl(
        kubeconfig,
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        f"crd/{PLURAL}.{GROUP}",
    )
    api_client = config.new_client_from_config(config_file=kubeconfig)
    yield client.CustomObjectsApi(api_client)
    api_client.close()


def _create(api: client.CustomObjectsApi, size: int) -> dict[str, object]:
    name = f"w-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size},
    }
    created: dict[str, object] = api.create_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, body
    )
    return created


def test_crd_is_established_and_served(kubeconfig: str, api: client.CustomObjectsApi) -> None:
    status = _kubectl(
        kubeconfig,
        "get",
        f"crd/{PLURAL}.{GROUP}",
        "-o",
        "jsonpath={.status.conditions[?(@.type=='Established')].status}",
    )
    assert status == "True"
    assert PLURAL in _kubectl(kubeconfig, "api-resources", f"--api-group={GROUP}")


def test_schema_is_enforced_by_the_server(api: client.CustomObjectsApi) -> None:
    with pytest.raises(ApiException) as rejected:
        _create(api, -1)
    assert rejected.value.status == 422
    assert "spec.size" in str(rejected.value.body)


def test_create_get_patch_and_watch(api: client.CustomObjectsApi) -> None:
    obj = _create(api, 1)
    name = obj["metadata"]["name"]  # type: ignore[index]
    seen: list[tuple[str, int]] = []
    ready = threading.Event()

    def observe() -> None:
        w = watch.Watch()
        for event in w.stream(
            api.list_namespaced_custom_object,
            GROUP,
            VERSION,
            "default",
            PLURAL,
            field_selector=f"metadata.name={name}",
            timeout_seconds=30,
        ):
            seen.append((event["type"], event["object"]["spec"]["size"]))
            ready.set()
            if event["object"]["spec"]["size"] == 2:
                w.stop()

    watcher = threading.Thread(target=observe)
    watcher.start()
    assert ready.wait(30), "watch delivered no initial event"
    api.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, name, {"spec": {"size": 2}}
    )
    watcher.join(30)
    assert seen[0] == ("ADDED", 1)
    assert ("MODIFIED", 2) in seen
    got = api.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
    assert got["spec"]["size"] == 2


def test_status_subresource_is_separate_from_spec(api: client.CustomObjectsApi) -> None:
    name = _create(api, 1)["metadata"]["name"]  # type: ignore[index]
    api.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        name,
        {"status": {"phase": "Running"}, "spec": {"size": 9}},
    )
    got = api.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
    assert got["status"] == {"phase": "Running"}
    assert got["spec"]["size"] == 1, "a status write must not change spec"


def test_update_with_stale_resource_version_conflicts(api: client.CustomObjectsApi) -> None:
    obj = _create(api, 1)
    name = obj["metadata"]["name"]  # type: ignore[index]
    stale = obj["metadata"]["resourceVersion"]  # type: ignore[index]
    api.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, name, {"spec": {"size": 5}}
    )
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name, "resourceVersion": stale},
        "spec": {"size": 6},
    }
    with pytest.raises(ApiException) as conflict:
        api.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name, body)
    assert conflict.value.status == 409
    got = api.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
    assert got["spec"]["size"] == 5
