"""Turning validation failures into messages that name the field and the fix."""

from __future__ import annotations

from pydantic import ValidationError


class InvalidResourceError(ValueError):
    """A resource failed validation; ``problems`` are ``(field path, message)`` pairs."""

    def __init__(self, resource: str, problems: list[tuple[str, str]]) -> None:
        self.resource = resource
        self.problems = problems
        lines = "; ".join(f"{path}: {message}" if path else message for path, message in problems)
        super().__init__(f"{resource} is invalid: {lines}")


def field_path(location: tuple[int | str, ...]) -> str:
    """``('spec', 'tasksMax')`` -> ``spec.tasksMax``; list indexes become ``[i]``."""
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def problems_from(error: ValidationError) -> list[tuple[str, str]]:
    """Field paths use the wire (camelCase) names users wrote in their YAML."""
    problems = []
    for item in error.errors(include_url=False):
        location = tuple(p for p in item["loc"] if not str(p).startswith("function-after"))
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown field; check its spelling against `kubectl explain`"
        problems.append((field_path(location), message))
    return problems
