"""Base shapes shared by every Onceflow resource.

Fields are snake_case in Python and camelCase on the wire (``kubectl`` and YAML),
exactly one spelling each way. Unknown spec fields are rejected instead of ignored,
so a typo such as ``taskMax`` fails loudly rather than silently using a default.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

API_GROUP = "onceflow.io"
API_VERSION = "v1alpha1"
GROUP_VERSION = f"{API_GROUP}/{API_VERSION}"


class ApiModel(BaseModel):
    """A frozen, camelCase-on-the-wire model that rejects unknown fields."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=False,
    )

    def to_wire(self) -> dict[str, object]:
        """The JSON-ready dict with camelCase keys and no unset optionals."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class ObjectMeta(BaseModel):
    """The parts of Kubernetes metadata Onceflow reads; the rest is kept, not checked."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    # What the API server takes as an object name (an RFC 1123 subdomain), so that a
    # manifest checked offline (`onceflow render`, the standalone runner) is one a
    # cluster would store.
    name: str = Field(
        min_length=1,
        max_length=63,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="Name of the resource.",
    )
    namespace: str = Field(default="default", description="Namespace of the resource.")
    generation: int | None = Field(default=None, description="Spec generation (set by the API).")
    resource_version: str | None = Field(default=None, description="Optimistic-lock token.")
    uid: str | None = Field(default=None, description="Unique id (set by the API).")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels.")


class LocalObjectReference(ApiModel):
    """A reference to an object in the same namespace."""

    name: str = Field(
        min_length=1,
        max_length=253,
        # A DNS subdomain, as Kubernetes names these objects: "." and ".." would make
        # the client's request path another resource's (security review #11).
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="Name of the referenced object.",
    )
