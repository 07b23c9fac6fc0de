"""The marker format and names of the exactly-once Kafka sink, checked against the
shared contract (tests/fixtures/sink_marker_contract.json) that the JVM writer's
MarkerContractTest reads too: a change on either side fails until both agree. Its
"options" section is what a driver passes the JVM writer: the Java side parses each
vector, this side makes each one it takes from its "driver" (``jvm_options``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from onceflow.eos.sink_markers import marker_keys, marker_partition
from onceflow.logic.sink_markers import Layout, SinkMarker, already_written
from onceflow.model.spark_names import sink_transactional_id_stem
from onceflow.spark.jvm_writer import jvm_options
from onceflow.spark.kafka_sink import sink_target

CONTRACT = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures" / "sink_marker_contract.json").read_text(
        encoding="utf-8"
    )
)


def _vectors(section: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize(
        "vector", CONTRACT[section], ids=[vector["why"] for vector in CONTRACT[section]]
    )


def _marker(fields: dict[str, Any] | str) -> SinkMarker | None:
    if fields == "none":
        return None
    assert isinstance(fields, dict)
    layout = fields["layout"]
    return SinkMarker(
        batch=fields["batch"],
        query=fields["query"],
        layout=None if layout is None else Layout(layout["topic"], layout["partitions"]),
    )


@_vectors("encode")
def test_a_marker_encodes_to_exactly_the_contract_bytes(vector: dict[str, Any]) -> None:
    marker = _marker(vector["marker"])
    assert marker is not None
    assert marker.encode() == vector["value"].encode()


@_vectors("decode")
def test_a_marker_value_decodes_as_the_contract_says(vector: dict[str, Any]) -> None:
    raw = vector["value"].encode()
    if vector["marker"] == "error":
        with pytest.raises((ValueError, KeyError, TypeError, AttributeError)):
            SinkMarker.from_record_value(raw)
    else:
        assert SinkMarker.from_record_value(raw) == _marker(vector["marker"])


@pytest.mark.parametrize(
    "vector", CONTRACT["keys"], ids=[v["transactionalId"] for v in CONTRACT["keys"]]
)
def test_a_partitions_ids_keys_and_marker_place_are_the_contracts(vector: dict[str, Any]) -> None:
    target = dataclasses.replace(
        sink_target("broker:9092", {}, "out", 1, vector["prefix"], vector["job"]),
        marker_partitions=vector["markerPartitions"],
    )
    partition = vector["partition"]
    assert (
        sink_transactional_id_stem(vector["prefix"], vector["job"]) == vector["transactionalIdStem"]
    )
    assert marker_keys(target, partition) == (
        vector["transactionalId"].encode(),
        vector["legacyKey"].encode(),
    )
    assert marker_partition(target, partition) == vector["markerPartition"]
    assert target.marker_topic == vector["markerTopic"]


@_vectors("rules")
def test_only_the_same_query_and_layout_skips(vector: dict[str, Any]) -> None:
    layout = Layout(vector["layout"]["topic"], vector["layout"]["partitions"])
    marker = _marker(vector["marker"])
    assert already_written(marker, vector["query"], vector["batch"], layout) is vector["skip"]


TAKEN = [vector for vector in CONTRACT["options"] if vector["target"] != "error"]


@pytest.mark.parametrize("vector", TAKEN, ids=[vector["why"] for vector in TAKEN])
def test_a_driver_passes_the_jvm_writer_exactly_the_contracts_options(
    vector: dict[str, Any],
) -> None:
    """The sink as the driver holds it (its prefix and job, the pipeline's librdkafka
    settings, the resolved marker topic, the bound query) makes exactly the options the
    Java side parses into the vector's target."""
    driver, expected = vector["driver"], vector["target"]
    target = dataclasses.replace(
        sink_target(
            expected["clientSettings"]["bootstrap.servers"],
            driver["librdkafka"],
            expected["topic"],
            expected["partitions"],
            driver["prefix"],
            driver["job"],
            fail_once_flag=expected["failOnceFlag"],
            transaction_timeout_ms=expected["transactionTimeoutMs"],
        ),
        marker_partitions=expected["markerPartitions"],
        query=expected["query"],
    )
    assert target.marker_topic == expected["markerTopic"]
    assert jvm_options(target, expected["batch"]) == vector["options"]
