"""How a sink task's Arrow batches become runs of one output partition: whole batches
when the shuffle gave the task one partition, split where the partition changes
otherwise, with headers only when a row carries any."""

from __future__ import annotations

import pyarrow as pa

from onceflow.spark.kafka_sink import PARTITION_COLUMN, RowRun, arrow_runs

# The sink casts headers to array<struct<key:string,value:binary>> before the shuffle.
HEADER_STRUCTS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _batch(partitions: list[int], headers: list[list[dict[str, object]]] | None = None) -> object:
    rows = len(partitions)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([f"k{i}".encode() for i in range(rows)], pa.binary()),
            pa.array([f"v{i}".encode() for i in range(rows)], pa.binary()),
            pa.array(headers or [[] for _ in range(rows)], HEADER_STRUCTS),
            pa.array(partitions, pa.int32()),
        ],
        names=["key", "value", "headers", PARTITION_COLUMN],
    )


def test_a_batch_of_one_partition_is_one_run_without_headers() -> None:
    assert list(arrow_runs([_batch([2, 2, 2]), _batch([])])) == [
        RowRun(2, [b"k0", b"k1", b"k2"], [b"v0", b"v1", b"v2"], None)
    ]


def test_a_batch_of_several_partitions_is_split_where_the_partition_changes() -> None:
    headers = [[], [{"key": "h", "value": b"x"}], [], []]
    runs = list(arrow_runs([_batch([0, 1, 1, 0], headers)]))
    assert runs == [
        RowRun(0, [b"k0"], [b"v0"], [None]),
        RowRun(1, [b"k1", b"k2"], [b"v1", b"v2"], [[("h", b"x")], None]),
        RowRun(0, [b"k3"], [b"v3"], [None]),
    ]


def test_records_become_columns_with_headers_only_when_a_row_has_some() -> None:
    plain = RowRun.of_records(1, [(b"a", b"1", None), (None, b"2", None)])
    assert plain == RowRun(1, [b"a", None], [b"1", b"2"], None)
    some = RowRun.of_records(0, [(b"a", b"1", [("h", b"x")]), (b"b", b"2", None)])
    assert some.headers == [[("h", b"x")], None]
