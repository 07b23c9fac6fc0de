"""Turning validation failures into messages that name the field and the fix."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from pydantic import ValidationError

PIPELINE_NOT_FOUND = "PipelineNotFound"
SOURCE_NOT_FOUND = "SourceNotFound"
SECRET_NOT_FOUND = "SecretNotFound"
TRANSFORM_CODE_NOT_FOUND = "TransformCodeNotFound"
MISSING_OBJECT_REASONS = frozenset(
    {PIPELINE_NOT_FOUND, SOURCE_NOT_FOUND, SECRET_NOT_FOUND, TRANSFORM_CODE_NOT_FOUND}
)


@dataclass(frozen=True)
class Problem:
    """One reason a resource cannot be accepted or run, the same in a CR's status, an
    admission response and the CLI."""

    field: str
    """The wire path of the field to fix ("" for the whole object)."""
    message: str
    reason: str = "InvalidSpec"
    """The status condition's reason."""

    @property
    def missing_object(self) -> bool:
        """Another object is missing, not this one wrong: it may still arrive (GitOps
        tools apply a directory in any order), so admission only warns."""
        return self.reason in MISSING_OBJECT_REASONS

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class InvalidResourceError(ValueError):
    """A resource failed validation, for one or more ``problems``."""

    def __init__(self, resource: str, problems: Sequence[Problem]) -> None:
        self.resource = resource
        self.problems = list(problems)
        super().__init__(f"{resource} is invalid: {'; '.join(map(str, problems))}")


def labelled(label: str, problems: Iterable[Problem]) -> list[Problem]:
    """Problems of many resources in one error (``onceflow render`` and ``run`` report
    every resource's at once): each field starts with the resource's ``label``."""
    return [replace(p, field=": ".join(filter(None, [label, p.field]))) for p in problems]


def field_path(location: tuple[int | str, ...]) -> str:
    """``('spec', 'tasksMax')`` -> ``spec.tasksMax``; list indexes become ``[i]``."""
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def problems_from(error: ValidationError) -> list[Problem]:
    """Field paths use the wire (camelCase) names users wrote in their YAML."""
    problems = []
    for item in error.errors(include_url=False):
        location = tuple(p for p in item["loc"] if not str(p).startswith("function-after"))
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown field; check its spelling against `kubectl explain`"
        problems.append(Problem(field_path(location), message))
    return problems
