"""Finding connector plugins: entry points of the ``onceflow.connectors`` group, or a
``package.module:Class`` reference (Kafka Connect's ``connector.class`` habit).

Importing a module runs it. A task imports its connector in the tenant's own pod, but
the operator and its webhook also load a source's connector (to plan its tasks and
check its config) in a process holding the operator's credentials: there a module
reference is imported only if the platform allowed its module by name, so writing a
KafkaSource never means running an arbitrary module of the image inside the operator.

Beside the connectors rather than in the task process (``onceflow.runtime``): the task,
the operator, its webhook, ``onceflow run`` and ``onceflow render`` all look connectors
up, and only the task is the task process.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Mapping
from functools import cache, partial
from importlib.metadata import EntryPoint, entry_points

from onceflow.api.connector import SourceConnector

ConnectorLoader = Callable[[str], SourceConnector]

ENTRY_POINT_GROUP = "onceflow.connectors"


class UnknownConnectorError(LookupError):
    """``spec.connector.type`` names no installed plugin."""


@cache
def _installed() -> Mapping[str, EntryPoint]:
    """The installed connectors by name (the first of a name wins), read once per
    process. Scanning every distribution's metadata on each load took a third of the
    operator's time under a burst of spec changes, since each such pass judges the
    topic graph, loading every stored source's connector. A connector installed later
    is found after a restart, as a plugin added to the image is."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def available_connectors() -> list[str]:
    return sorted(_installed())


def _allowed(module_name: str, allowed_modules: Collection[str]) -> bool:
    return any(module_name == m or module_name.startswith(f"{m}.") for m in allowed_modules)


def load_connector(
    type_name: str, allowed_modules: Collection[str] | None = None
) -> SourceConnector:
    """An instance of the connector named by ``spec.connector.type``. With
    ``allowed_modules`` (the operator), a module reference is imported only if its
    module is one of them or inside one of those packages."""
    if ":" in type_name:
        module_name, _, attribute = type_name.partition(":")
        if allowed_modules is not None and not _allowed(module_name, allowed_modules):
            raise UnknownConnectorError(
                f"{type_name!r} is a module reference, and the operator imports only "
                f"installed connectors ({', '.join(available_connectors()) or 'none'}) or "
                "modules the platform admin allows (chart value tenants.connectorModules)"
            )
        try:
            target = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as error:
            raise UnknownConnectorError(f"cannot import {type_name!r} ({error})") from None
    else:
        found = _installed().get(type_name)
        if found is None:
            raise UnknownConnectorError(
                f"unknown connector {type_name!r}; installed: "
                f"{', '.join(available_connectors()) or 'none'} (or use package.module:Class)"
            )
        try:
            target = found.load()
        except (ImportError, AttributeError) as error:  # a broken plugin, named as such
            raise UnknownConnectorError(f"cannot load connector {type_name!r} ({error})") from None
    if not (isinstance(target, type) and issubclass(target, SourceConnector)):
        raise UnknownConnectorError(f"{type_name!r} is not a SourceConnector subclass")
    return target()


def operator_loader(allowed_modules: Collection[str]) -> ConnectorLoader:
    """How the operator and its webhook load connectors: entry points, and module
    references only from ``allowed_modules``."""
    return partial(load_connector, allowed_modules=frozenset(allowed_modules))
