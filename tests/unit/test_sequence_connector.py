"""The sequence connector splits streams disjointly and resumes from stored offsets."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from onceflow.api.connector import TaskContext
from onceflow.connectors.sequence import SequenceConnector, SequenceTask, StreamBodies
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


def _round_robin(firsts: list[int], limit: int | None, batch: int) -> list[tuple[str, int]]:
    """What one poll must return: one number of each live stream per round."""
    nexts = dict(enumerate(firsts))
    out: list[tuple[str, int]] = []
    while len(out) < batch:
        live = [i for i, n in nexts.items() if limit is None or n <= limit]
        if not live:
            break
        for i in live[: batch - len(out)]:
            out.append((f"s{i}", nexts[i]))
            nexts[i] += 1
    return out


@settings(deadline=None)  # timing is not what these check; CI machines are loaded
@given(
    stored=st.lists(st.one_of(st.none(), st.integers(0, 12)), min_size=1, max_size=6),
    limit=st.one_of(st.none(), st.integers(1, 12)),
    batch=st.integers(1, 30),
)
def test_a_poll_takes_streams_round_robin_from_their_offsets_up_to_the_limit(
    stored: list[int | None], limit: int | None, batch: int
) -> None:
    offsets = StoredOffsets(
        {
            f'{{"stream":"s{i}"}}'.encode(): {"seq": seq}
            for i, seq in enumerate(stored)
            if seq is not None
        }
    )
    task = SequenceTask()
    config = {"assigned": [f"s{i}" for i in range(len(stored))], "limit": limit, "batchSize": batch}
    task.start(TaskContext(task_id=0, config=config, offsets=offsets))
    firsts = [1 if seq is None else seq + 1 for seq in stored]
    got = [(r.key.decode(), r.source_offset["seq"]) for r in task.poll() if r.key is not None]
    assert got == _round_robin(firsts, limit, batch)


def test_streams_are_bounded_so_planning_and_the_configmap_stay_small() -> None:
    connector = SequenceConnector()
    assert connector.validate({"streams": 10000}) == []
    (problem,) = connector.validate({"streams": 10001})
    assert problem.field == "streams" and "at most 10000" in problem.message


@given(
    stream=st.text(max_size=8),
    seq=st.integers(0, 2**63),
    pad=st.integers(0, 40),
)
def test_record_values_are_the_bytes_json_makes_of_the_record(
    stream: str, seq: int, pad: int
) -> None:
    body: dict[str, object] = {"stream": stream, "seq": seq}
    if pad:
        body["pad"] = "x" * pad
    expected = json.dumps(body, separators=(",", ":")).encode()
    assert StreamBodies(stream, "x" * pad).value(seq) == expected
