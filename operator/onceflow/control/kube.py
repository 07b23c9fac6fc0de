"""The Kubernetes boundary: every API call the reconcilers make goes through here.

Objects cross it as plain dicts (the API's JSON), so the layers above never see
kubernetes-client model classes. Status writes carry the resourceVersion that was
read: a stale writer (another operator replica, or a reconcile that raced) gets
``StaleStatusError`` instead of overwriting newer truth.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from onceflow.api.base import API_GROUP, API_VERSION
from onceflow.control.ownership import refuse_unless_ours
from onceflow.model.objects import controller_of

Obj = dict[str, Any]
HTTP_FORBIDDEN, HTTP_NOT_FOUND, HTTP_CONFLICT = 403, 404, 409
_CLUSTER_PEERING = ("ClusterKopfPeering", "clusterkopfpeerings")


ALL_NAMESPACES = ""


class StaleStatusError(Exception):
    """The object changed since it was read; re-observe and decide again."""


CONNECTIONS = 32
"""Connections kept to the API server, at least: the reconcile workers, the webhook
and the concurrent LISTs of a graph read share them (the client's default, five per
core, discarded and reopened connections under a burst on a small node, with a
warning each)."""
LIST_CONCURRENCY = 8
"""Watched namespaces listed at once when "every namespace" means named ones: the
graph the reconcilers judge is three kinds in every watched namespace, and listed one
after another they took most of a pass at ten namespaces."""


def load_config(kubeconfig: str | None = None) -> client.ApiClient:
    configuration = client.Configuration()
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    else:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException:
            config.load_kube_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = max(CONNECTIONS, configuration.connection_pool_maxsize)
    return client.ApiClient(configuration)


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class KubeClient:
    """Typed-enough access to the objects Onceflow reads and writes."""

    def __init__(self, api: client.ApiClient, namespaces: tuple[str, ...] = ()) -> None:
        self.api = api
        self.namespaces = namespaces
        """The namespaces watched (empty: all): "every namespace" means these, so a
        namespaced install never asks for more than its Roles grant."""
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.rbac = client.RbacAuthorizationV1Api(api)
        self._status_written: dict[tuple[str, str, str], str] = {}

    def _plain(self, obj: Any) -> Obj:
        return cast(Obj, self.api.sanitize_for_serialization(obj))

    # -- custom resources -----------------------------------------------------------

    def get(self, plural: str, namespace: str, name: str) -> Obj | None:
        try:
            return cast(
                Obj,
                self.custom.get_namespaced_custom_object(
                    API_GROUP, API_VERSION, namespace, plural, name
                ),
            )
        except ApiException as error:
            if error.status == HTTP_NOT_FOUND:
                return None
            raise

    def list_objects(
        self, plural: str, namespace: str, timeout_s: float | None = None
    ) -> list[Obj]:
        """Onceflow objects of ``namespace``, or of every watched one for
        ``ALL_NAMESPACES``; ``timeout_s`` bounds each request."""
        if namespace == ALL_NAMESPACES and not self.namespaces:
            listing = self.custom.list_cluster_custom_object(
                API_GROUP, API_VERSION, plural, _request_timeout=timeout_s
            )
            return cast(list[Obj], listing["items"])

        def items(each: str) -> list[Obj]:
            listing = self.custom.list_namespaced_custom_object(
                API_GROUP, API_VERSION, each, plural, _request_timeout=timeout_s
            )
            return cast(list[Obj], listing["items"])

        named = self.namespaces if namespace == ALL_NAMESPACES else (namespace,)
        if len(named) == 1:
            return items(named[0])
        with ThreadPoolExecutor(min(LIST_CONCURRENCY, len(named)), "list") as pool:
            return [item for found in pool.map(items, named) for item in found]

    def replace_status(self, plural: str, obj: Obj, status: Obj) -> Obj:
        """Writes ``status`` if ``obj`` is still the latest version; returns the new object."""
        body = {**obj, "status": status}
        meta = obj["metadata"]
        try:
            written = cast(
                Obj,
                self.custom.replace_namespaced_custom_object_status(
                    API_GROUP, API_VERSION, meta["namespace"], plural, meta["name"], body
                ),
            )
        except ApiException as error:
            if error.status == HTTP_CONFLICT:
                raise StaleStatusError(f"{plural}/{meta['name']} changed; re-observing") from None
            raise
        where = (plural, meta["namespace"], meta["name"])
        self._status_written[where] = written["metadata"]["resourceVersion"]
        return written

    def wrote_status(self, plural: str, namespace: str, name: str, resource_version: str) -> bool:
        """Whether ``resource_version`` of the object is the one this client's last status
        write made (its watch event then tells the writer nothing new)."""
        return self._status_written.get((plural, namespace, name)) == resource_version

    def forget_status_write(self, plural: str, namespace: str, name: str) -> None:
        self._status_written.pop((plural, namespace, name), None)

    # -- objects of other operators (the Spark operator's SparkApplication) -----------

    def get_foreign(self, api_version: str, plural: str, namespace: str, name: str) -> Obj | None:
        group, version = api_version.split("/")
        try:
            return cast(
                Obj,
                self.custom.get_namespaced_custom_object(group, version, namespace, plural, name),
            )
        except ApiException as error:
            if error.status == HTTP_NOT_FOUND:
                return None
            raise

    def create_foreign(self, plural: str, manifest: Obj) -> Obj:
        group, version = manifest["apiVersion"].split("/")
        return cast(
            Obj,
            self.custom.create_namespaced_custom_object(
                group, version, manifest["metadata"]["namespace"], plural, manifest
            ),
        )

    def delete_foreign(
        self,
        api_version: str,
        plural: str,
        namespace: str,
        name: str,
        propagation: str = "Background",
    ) -> None:
        group, version = api_version.split("/")
        try:
            self.custom.delete_namespaced_custom_object(
                group, version, namespace, plural, name, propagation_policy=propagation
            )
        except ApiException as error:
            if error.status != HTTP_NOT_FOUND:
                raise

    # -- pods and config ------------------------------------------------------------

    def list_pods(self, namespace: str, selector: str) -> list[Obj]:
        """Pods of ``namespace``, or of every watched one for ``ALL_NAMESPACES``."""
        # The JSON as served: building V1Pod models and serialising them back was most
        # of a settled source's pass.
        if namespace == ALL_NAMESPACES and not self.namespaces:
            response = self.core.list_pod_for_all_namespaces(
                label_selector=selector, _preload_content=False
            )
            return cast(list[Obj], json.loads(response.data)["items"])
        found: list[Obj] = []
        for each in self.namespaces if namespace == ALL_NAMESPACES else (namespace,):
            response = self.core.list_namespaced_pod(
                each, label_selector=selector, _preload_content=False
            )
            found.extend(json.loads(response.data)["items"])
        return found

    def create_pod(self, manifest: Obj) -> bool:
        """True if created, False if a pod of that name already exists."""
        try:
            self.core.create_namespaced_pod(manifest["metadata"]["namespace"], manifest)
            return True
        except ApiException as error:
            if error.status == HTTP_CONFLICT:
                return False
            raise

    def delete_pod(self, namespace: str, name: str, grace_seconds: int) -> None:
        try:
            self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=grace_seconds)
        except ApiException as error:
            if error.status != HTTP_NOT_FOUND:
                raise

    def apply_configmap(self, manifest: Obj) -> None:
        """ConfigMaps of a generation never change once written: create or keep (one of
        the manifest's owner: someone else's of that name is refused, not used)."""
        namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        try:
            self.core.create_namespaced_config_map(namespace, manifest)
        except ApiException as error:
            if error.status != HTTP_CONFLICT:
                raise
            self._refuse_unless_owned(
                self.core.read_namespaced_config_map(name, namespace), manifest
            )

    def _refuse_unless_owned(self, current: Any, manifest: Obj) -> None:
        """``current`` (a client model) must have the controller ``manifest`` names."""
        owner = controller_of(manifest)
        if owner is not None:
            served = self.core.api_client.sanitize_for_serialization(current)
            refuse_unless_ours({"kind": manifest["kind"], **served}, *owner)

    def configmap_data(self, namespace: str, name: str) -> dict[str, str] | None:
        try:
            return dict(self.core.read_namespaced_config_map(name, namespace).data or {})
        except ApiException as error:
            if error.status != HTTP_NOT_FOUND:
                raise
            return None

    def put_configmap(self, manifest: Obj) -> None:
        """A ConfigMap whose content follows the spec: create, or replace if it differs."""
        namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        try:
            current = self.core.read_namespaced_config_map(name, namespace)
        except ApiException as error:
            if error.status != HTTP_NOT_FOUND:
                raise
            self.core.create_namespaced_config_map(namespace, manifest)
            return
        self._refuse_unless_owned(current, manifest)
        if (current.data or {}) != manifest.get("data", {}):
            self.core.replace_namespaced_config_map(name, namespace, manifest)

    def delete_configmaps(self, namespace: str, selector: str, keep: str | None) -> None:
        maps = self.core.list_namespaced_config_map(namespace, label_selector=selector)
        for item in maps.items:
            if item.metadata.name != keep:
                try:
                    self.core.delete_namespaced_config_map(item.metadata.name, namespace)
                except ApiException as error:
                    if error.status != HTTP_NOT_FOUND:
                        raise

    def ensure(self, manifest: Obj) -> None:
        """Creates a namespaced ServiceAccount, Role or RoleBinding unless it exists."""
        namespace = manifest["metadata"]["namespace"]
        create = {
            "ServiceAccount": self.core.create_namespaced_service_account,
            "Role": self.rbac.create_namespaced_role,
            "RoleBinding": self.rbac.create_namespaced_role_binding,
        }[manifest["kind"]]
        try:
            create(namespace, manifest)
        except ApiException as error:
            if error.status != HTTP_CONFLICT:
                raise

    def ensure_peering(self, name: str, namespaces: list[str], owner: str | None = None) -> None:
        """kopf insists that a named peering object exists; creating it here makes a
        fresh install (Helm, plain kubectl) start without a manual step. Cluster-wide
        operators share a ClusterKopfPeering, namespaced ones a KopfPeering each.

        ``owner`` names the Role (in each watched namespace) or ClusterRole the peering
        belongs to: Helm cannot create the peering itself (its CRD is in the same
        release), so the garbage collector removes it with the chart's RBAC on
        ``helm uninstall``, and a second install starts with no dead peers in it. A
        peering made before it had an owner is given one."""
        targets: list[str | None] = [*namespaces] if namespaces else [None]
        for namespace in targets:
            kind, plural = ("KopfPeering", "kopfpeerings") if namespace else _CLUSTER_PEERING
            where = (
                ("kopf.dev", "v1", namespace, plural) if namespace else ("kopf.dev", "v1", plural)
            )
            metadata: Obj = {"name": name}
            if owner is not None:
                metadata["ownerReferences"] = [self._rbac_owner(owner, namespace)]
            body = {"apiVersion": "kopf.dev/v1", "kind": kind, "metadata": metadata}
            create, patch = (
                (
                    self.custom.create_namespaced_custom_object,
                    self.custom.patch_namespaced_custom_object,
                )
                if namespace
                else (
                    self.custom.create_cluster_custom_object,
                    self.custom.patch_cluster_custom_object,
                )
            )
            try:
                create(*where, body)
            except ApiException as error:
                if error.status != HTTP_CONFLICT:
                    raise
                if owner is not None:
                    patch(*where, name, {"metadata": metadata})

    def _rbac_owner(self, name: str, namespace: str | None) -> Obj:
        """An owner reference to the Role ``name`` in ``namespace``, or the ClusterRole."""
        if namespace:
            role = self.rbac.read_namespaced_role(name, namespace)
        else:
            role = self.rbac.read_cluster_role(name)
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role" if namespace else "ClusterRole",
            "name": name,
            "uid": role.metadata.uid,
        }

    def secret_if_present(self, namespace: str, name: str) -> tuple[dict[str, str], str] | None:
        """The Secret's data and resourceVersion, or None."""
        try:
            secret = self.core.read_namespaced_secret(name, namespace)
        except ApiException as error:
            if error.status == HTTP_NOT_FOUND:
                return None
            raise
        data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
        return data, secret.metadata.resource_version

    def write_secret(
        self, namespace: str, name: str, data: dict[str, str], resource_version: str | None
    ) -> bool:
        """Creates the Secret (``resource_version`` None) or replaces that version of
        it; False when someone else wrote first (409)."""
        metadata: Obj = {"name": name, "namespace": namespace}
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": metadata,
            "type": "Opaque",
            "stringData": data,
        }
        try:
            if resource_version is None:
                self.core.create_namespaced_secret(namespace, body)
            else:
                metadata["resourceVersion"] = resource_version
                self.core.replace_namespaced_secret(name, namespace, body)
        except ApiException as error:
            if error.status == HTTP_CONFLICT:
                return False
            raise
        return True

    def set_webhook_ca_bundle(self, configuration: str, ca_pem: str) -> bool:
        """Points every webhook of the ValidatingWebhookConfiguration at this CA; False
        when the configuration does not exist (yet)."""
        admission = client.AdmissionregistrationV1Api(self.api)
        try:
            current = admission.read_validating_webhook_configuration(configuration)
        except ApiException as error:
            if error.status == HTTP_NOT_FOUND:
                return False
            raise
        bundle = base64.b64encode(ca_pem.encode()).decode()
        patch = [
            {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
            for i in range(len(current.webhooks or []))
        ]
        if patch:
            admission.patch_validating_webhook_configuration(configuration, patch)
        return True

    # -- events ---------------------------------------------------------------------

    def events_of(self, obj: Obj) -> list[Obj]:
        """The core/v1 Events about ``obj`` (by its UID)."""
        meta = obj["metadata"]
        found = self.core.list_namespaced_event(
            meta["namespace"], field_selector=f"involvedObject.uid={meta['uid']}"
        )
        return [self._plain(event) for event in found.items]

    def event(self, obj: Obj, reason: str, message: str, warning: bool = False) -> None:
        """A core/v1 Event on ``obj``; best effort, never fails the reconcile."""
        meta = obj["metadata"]
        stamp = now_rfc3339()
        body = {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": obj["apiVersion"],
                "kind": obj["kind"],
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": "onceflow-operator"},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self.core.create_namespaced_event(meta["namespace"], body)
        except ApiException:
            return
