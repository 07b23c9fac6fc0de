"""Checks every built-in connector applies to its ``spec.connector.config``: settings it
does not know (a typo would otherwise be ignored) and integer bounds, each reported
under the setting's own name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onceflow.api.connector import ConfigProblem


def is_int(value: object, minimum: int) -> bool:
    """An integer (not a bool, which Python counts as one) of at least ``minimum``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def unknown_settings(config: Mapping[str, Any], known: Mapping[str, Any]) -> list[ConfigProblem]:
    return [
        ConfigProblem(key, "unknown setting; known: " + ", ".join(sorted(known)))
        for key in config
        if key not in known
    ]


def integer_problems(merged: Mapping[str, Any], minimums: Mapping[str, int]) -> list[ConfigProblem]:
    return [
        ConfigProblem(key, f"must be an integer >= {minimum}")
        for key, minimum in minimums.items()
        if not is_int(merged[key], minimum)
    ]


def same_config_per_task(
    defaults: Mapping[str, Any], config: Mapping[str, Any], max_tasks: int
) -> list[dict[str, Any]]:
    """For connectors whose tasks split the work among themselves at run time (by a hash
    of what they find): each task gets the config and the task count."""
    merged = {**defaults, **config}
    return [{**merged, "taskCount": max_tasks} for _ in range(max_tasks)]


def masked(text: str, secrets: Mapping[str, str]) -> str:
    """Client libraries and servers may echo a refused value in their messages: never
    let it be a Secret's."""
    for value in secrets.values():
        if value:
            text = text.replace(value, "***")
    return text
