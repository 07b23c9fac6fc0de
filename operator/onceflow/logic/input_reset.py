"""A SparkJob's input reset as decisions, for the operator and ``onceflow run`` alike:
when a requested reset is refused or applied, and what the driver is told once one is
in force. Applying writes nothing but the record: the new checkpoint is empty until the
driver starts on it, and only then does Spark read the starting position.
"""

from __future__ import annotations

from onceflow.api.driver import SparkJobSettings
from onceflow.api.handled_requests import earlier_ids
from onceflow.api.input_reset import InputReset, InputResetResult, InputResetStatus
from onceflow.api.pipeline import WorkloadState
from onceflow.api.spark import Sink

NOT_STOPPED = (
    "an input reset applies only while the job is stopped: this one was asked of a job "
    "in state {state} and is never applied; set spec.state: stopped, then give the reset "
    "a new id"
)
FILE_SINK = (
    "the files sink keeps its own log of written batches in its output directory, and a "
    "new checkpoint's batches (numbered from 0 again) would be skipped as written: point "
    "sink.files.path and checkpoint at new locations instead of resetting"
)


def input_reset_outcome(
    request: InputReset | None,
    recorded: InputResetStatus | None,
    desired: WorkloadState,
    held_stopped: bool,
    sink: Sink,
    topics: list[str],
) -> InputResetStatus | None:
    """The status to record for ``request`` now, or None (nothing to record yet).

    ``held_stopped``: the job's stop is recorded and its sink's ids fenced, so nothing
    of the old query writes any more. Refused at once unless the spec stops the job
    (kept for later, it would fire at some unrelated stop); applied once held."""
    if request is None or (recorded is not None and recorded.handled(request.id)):
        return None
    earlier = list(earlier_ids(recorded.id, recorded.earlier, request.id)) if recorded else []
    kept = {
        "in_force": recorded.in_force if recorded else None,
        "checkpoint": recorded.checkpoint if recorded else None,
        "earlier": earlier,
    }
    refusal = _refusal(request, desired, sink, topics)
    if refusal is not None:
        return InputResetStatus(
            id=request.id, result=InputResetResult.REFUSED, message=refusal, **kept
        )
    if not held_stopped:
        return None
    before = recorded or InputResetStatus(id="", result=InputResetResult.APPLIED)
    checkpoint = before.next_checkpoint(request.id)
    return InputResetStatus(
        id=request.id,
        result=InputResetResult.APPLIED,
        message=f"the job runs on the new checkpoint {checkpoint} from {_position(request)} "
        "once running; the old checkpoint is kept",
        in_force=request,
        checkpoint=checkpoint,
        earlier=earlier,
    )


def _refusal(
    request: InputReset, desired: WorkloadState, sink: Sink, topics: list[str]
) -> str | None:
    if desired is not WorkloadState.STOPPED:
        return NOT_STOPPED.format(state=desired)
    if sink.files is not None:
        return FILE_SINK
    strangers = [
        f"spec.inputReset.offsets[{index}].topic: {entry.topic} is not an input of the job "
        f"({', '.join(topics)})"
        for index, entry in enumerate(request.offsets or [])
        if entry.topic not in topics
    ]
    return "; ".join(strangers) + "; nothing was changed" if strangers else None


def _position(reset: InputReset) -> str:
    if reset.starting_offsets is not None:
        return f"the {reset.starting_offsets} offsets"
    if reset.starting_timestamp is not None:
        return f"timestamp {reset.starting_timestamp}"
    named = len(reset.offsets or [])
    return f"the {named} offset(s) given (other partitions where the job stopped)"


def with_input_reset(
    settings: SparkJobSettings, recorded: InputResetStatus | None
) -> SparkJobSettings:
    """The driver's settings with the reset in force: its checkpoint, and the starting
    position its first driver reads (Spark ignores it once the checkpoint has a batch)."""
    checkpoint = recorded.checkpoint_in(settings.checkpoint_location) if recorded else None
    if recorded is None or recorded.in_force is None or checkpoint is None:
        return settings
    reset = recorded.in_force
    return settings.model_copy(
        update={
            "checkpoint_location": checkpoint,
            "starting_offsets": reset.starting_offsets or settings.starting_offsets,
            "starting_timestamp": reset.starting_timestamp,
            "starting_partition_offsets": reset.offsets,
        }
    )
