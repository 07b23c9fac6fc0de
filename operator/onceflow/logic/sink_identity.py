"""Who may have left a batch in flight in a checkpoint: the sink identity a checkpoint
records.

A checkpoint outlives the name of the job that runs on it. A SparkJob renamed in Git
(Argo CD deletes the old object and creates the new one on the same checkpoint volume),
moved to another Pipeline or namespace, or renamed in a file `onceflow run` runs,
resumes the same streaming query, and the batch an earlier driver left in flight was
committed, wholly or partly, under the old name's markers and transactional ids. The
supervisor can tell a driver about a renamed prefix it saw, but not about a rename it
cannot see (a new object is not a renamed one to Kubernetes). So the sink records its
identity in the checkpoint before it writes a batch under it, and the next driver
finishes a batch in flight where that record says, whoever started it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass


class SinkIdentityError(ValueError):
    """A recorded identity that cannot be read: the driver must not guess."""


@dataclass(frozen=True)
class SinkIdentity:
    """What names a sink's markers and transactional ids."""

    namespace: str
    job: str
    prefix: str
    """The transactional-id prefix."""
    partitions: int = 0
    """The Kafka sink's output partitions (one id each); 0 for other sinks."""

    @property
    def qualified_job(self) -> str:
        """``<namespace>/<job>``, as the Postgres sink's markers name it."""
        return f"{self.namespace}/{self.job}"

    def same_writer(self, other: SinkIdentity) -> bool:
        """Whether both name the same markers and ids (a partition count change is the
        sink's layout, which its markers record)."""
        return (self.namespace, self.job, self.prefix) == (
            other.namespace,
            other.job,
            other.prefix,
        )

    def encode(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes, where: str) -> SinkIdentity:
        try:
            fields = json.loads(raw)
            return cls(
                namespace=str(fields["namespace"]),
                job=str(fields["job"]),
                prefix=str(fields["prefix"]),
                partitions=int(fields.get("partitions", 0)),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise SinkIdentityError(
                f"{where} does not name the sink that wrote the checkpoint ({error}); it is "
                "written only by Onceflow's drivers: restore it from a backup of the "
                "checkpoint, or start the job on a new checkpoint"
            ) from None


def identity_in_flight(
    recorded: SinkIdentity | None, current: SinkIdentity, told_previous_prefix: str | None
) -> SinkIdentity | None:
    """The identity, other than ``current``, under which a batch left in flight may have
    been written: the checkpoint's record when there is one (it is what wrote), else
    the previous prefix the supervisor told (a checkpoint older than the record)."""
    if recorded is not None:
        return None if recorded.same_writer(current) else recorded
    if told_previous_prefix in (None, current.prefix):
        return None
    return dataclasses.replace(current, prefix=told_previous_prefix)
