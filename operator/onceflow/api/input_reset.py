"""A SparkJob's input reset: where a stopped job reads from when it runs again.

Spark keeps a streaming query's input position in its checkpoint and ignores every
starting option once the checkpoint has one, so the only honest way to move it is a
new checkpoint (the Flink operator's "savepoint or empty state", Connect's KIP-875 for
sources). A new checkpoint is a new query: its batches are numbered from 0 again and
the exactly-once sinks tell them apart by the query's id, so nothing new is skipped;
but every record before the old position is read again (or every record between it
and a later position is never read). That is why the change needs
``acknowledgeReplays: true`` written out.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, Self

from pydantic import ConfigDict, Field, model_validator

from onceflow.api.base import ApiModel
from onceflow.api.handled_requests import earlier_field, handled

RESET_ID_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
RESETS_DIRECTORY = "resets"
"""Under the job's checkpoint, one new checkpoint per applied reset: inside it, so a
checkpoint on a volume keeps its resets on the same volume."""


class InputOffset(ApiModel):
    """One input partition's position: the offset of the first record to read."""

    topic: str = Field(min_length=1, description="An input topic.")
    partition: int = Field(ge=0, description="Its partition.")
    offset: int = Field(ge=0, description="The first offset to read.")


class InputReset(ApiModel):
    """Where the job reads from when it runs again (exactly one of startingOffsets,
    startingTimestamp or offsets)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "[has(self.startingOffsets), has(self.startingTimestamp), "
                    "has(self.offsets)].filter(x, x).size() == 1",
                    "message": "set exactly one of startingOffsets, startingTimestamp or offsets",
                },
                {
                    "rule": "self.acknowledgeReplays",
                    "message": "acknowledgeReplays: true is required: the output will hold "
                    "records a second time (or miss a range) after a reset",
                },
            ]
        }
    )

    id: str = Field(
        min_length=1,
        max_length=63,
        pattern=RESET_ID_PATTERN,
        description="Names this reset: applied once per id (applying the same manifest "
        "again repeats nothing); status.inputReset says what became of it. A new id "
        "while the job is not stopped is refused, never kept for later.",
    )
    starting_offsets: Literal["earliest", "latest"] | None = Field(
        default=None, description="Every input partition from its start, or its end."
    )
    starting_timestamp: int | None = Field(
        default=None,
        ge=0,
        description="Every input partition from its first record at or after this time "
        "(ms since the epoch); a partition with none starts at its end.",
    )
    offsets: list[InputOffset] | None = Field(
        default=None,
        min_length=1,
        max_length=1000,
        description="These partitions from these offsets; every other partition goes on "
        "where the stopped job's last finished batch ended.",
    )
    acknowledge_replays: bool = Field(
        default=False,
        description="Must be true: after the reset the output holds again what was read "
        "before (or misses what is skipped); the sinks stay exactly once from there on.",
    )

    @model_validator(mode="after")
    def _one_position_acknowledged(self) -> Self:
        given = [
            name
            for name, value in (
                ("startingOffsets", self.starting_offsets),
                ("startingTimestamp", self.starting_timestamp),
                ("offsets", self.offsets),
            )
            if value is not None
        ]
        if len(given) != 1:
            raise ValueError(
                "spec.inputReset: set exactly one of startingOffsets, startingTimestamp or "
                f"offsets (got {', '.join(given) or 'none'})"
            )
        if not self.acknowledge_replays:
            raise ValueError(
                "spec.inputReset.acknowledgeReplays: set it to true; after a reset the output "
                "holds records a second time (or misses a range)"
            )
        return self


class InputResetResult(StrEnum):
    APPLIED = "Applied"
    REFUSED = "Refused"


class InputResetStatus(ApiModel):
    """What became of the last spec.inputReset; an applied one stays in force (its
    checkpoint and starting position) until the next."""

    id: str = Field(description="The reset's id.")
    result: InputResetResult = Field(description="Applied or Refused.")
    message: str = Field(default="", description="What it does, or why not.")
    in_force: InputReset | None = Field(
        default=None,
        description="The last reset applied (whatever became of later ones): the job runs "
        "on its checkpoint, whose first driver starts from its position.",
    )
    checkpoint: str | None = Field(
        default=None,
        description="The checkpoint of the reset in force, under the job's own "
        f"({RESETS_DIRECTORY}/<n>-<id>: numbered, so an id used again gets a new one).",
    )
    earlier: list[str] = earlier_field("resets")

    def handled(self, reset_id: str) -> bool:
        return handled(reset_id, self.id, self.earlier)

    def checkpoint_in(self, base: str) -> str | None:
        """The checkpoint in force under ``base``; None while no reset was applied."""
        return f"{base.rstrip('/')}/{self.checkpoint}" if self.checkpoint else None

    def next_checkpoint(self, reset_id: str) -> str:
        """Where a reset applied after this one runs."""
        number = int(self.checkpoint.split("/")[-1].split("-")[0]) if self.checkpoint else 0
        return f"{RESETS_DIRECTORY}/{number + 1}-{reset_id}"
