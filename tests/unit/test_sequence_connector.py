"""The sequence connector splits streams disjointly and resumes from stored offsets."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from onceflow.api.connector import TaskContext
from onceflow.connectors.sequence import SequenceConnector, SequenceTask
from onceflow.eos.offsets import StoredOffsets, offset_value


@given(streams=st.integers(1, 50), tasks_max=st.integers(1, 20))
def test_task_configs_cover_every_stream_exactly_once(streams: int, tasks_max: int) -> None:
    configs = SequenceConnector().task_configs({"streams": streams}, tasks_max)
    assigned = [s for c in configs for s in c["assigned"]]
    assert len(configs) == min(streams, tasks_max)
    assert sorted(assigned) == sorted(f"s{i}" for i in range(streams))
    assert all(c["assigned"] for c in configs)


def test_task_resumes_after_the_stored_offset_and_stops_at_the_limit() -> None:
    stored = StoredOffsets({b'{"stream":"s0"}': {"seq": 7}})
    task = SequenceTask()
    config = SequenceConnector().task_configs({"streams": 1, "limit": 9, "batchSize": 5}, 1)[0]
    task.start(TaskContext(task_id=0, config=config, offsets=stored))
    records = task.poll()
    assert [r.source_offset["seq"] for r in records] == [8, 9]
    assert task.poll() == []
    assert offset_value(records[-1].source_offset) == b'{"seq":9}'
