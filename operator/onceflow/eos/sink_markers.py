"""The exactly-once Kafka sink's marker store: a compacted topic of commit markers.

Every output partition's transaction carries a marker (``logic.sink_markers``: query,
batch and layout) keyed by the partition's transactional id; a task attempt reads its
partition's last marker back ``read_committed`` to learn whether the batch it is about
to write is already there. Markers of several output partitions share a marker
partition (output partition p's marker lives in p modulo the marker topic's partition
count), so the last one is searched for from the end. Here: the topic, the keys, and
reading and writing markers; when a batch may be skipped is decided in
``logic.sink_markers``, and the sink itself (``spark.kafka_sink``) only calls in.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from onceflow.eos.clients import admin_client, cluster_metadata, visible_partitions
from onceflow.eos.consume import end_offsets, read_to_end, span_reader
from onceflow.eos.topics import ensure_topic
from onceflow.eos.worker_cache import KeptBetweenBatches
from onceflow.eos.writer import TransactionalWriter
from onceflow.logic.sink_markers import SinkMarker
from onceflow.model.spark_names import sink_transactional_id, sink_transactional_id_stem

MARKER_TOPIC_CONFIG = {"cleanup.policy": "compact"}


class MarkerPlace(Protocol):
    """Where one sink's markers live and whose they are (``spark.kafka_sink.SinkTarget``
    is one): read-only, so a frozen dataclass fits."""

    @property
    def bootstrap(self) -> str: ...

    @property
    def extra(self) -> Mapping[str, str]: ...

    @property
    def marker_topic(self) -> str: ...

    @property
    def marker_partitions(self) -> int:
        """Partitions of the marker topic; output partition p's marker lives in p
        modulo it."""

    @property
    def prefix(self) -> str: ...

    @property
    def job(self) -> str: ...


def ensure_marker_topic(bootstrap: str, topic: str, partitions: int, admin: AdminClient) -> int:
    """Creates the marker topic (compacted, ``partitions`` of them) unless it exists;
    returns its partition count, kept from its first layout: markers are addressed by
    key, so a re-partition needs no new marker topic."""
    ensure_topic(bootstrap, topic, partitions=partitions, config=MARKER_TOPIC_CONFIG, admin=admin)
    return visible_partitions(admin, topic)


def marker_keys(place: MarkerPlace, partition: int) -> tuple[bytes, bytes]:
    """The partition's own key (its transactional id), and the bare partition number
    markers had before: another job whose marker topic name meets ours never matches."""
    own = sink_transactional_id(place.prefix, place.job, partition).encode()
    return own, str(partition).encode()


def marker_partition(place: MarkerPlace, partition: int) -> int:
    """The marker topic partition output partition ``partition``'s markers go to."""
    return partition % place.marker_partitions


def send_marker(
    writer: TransactionalWriter,
    place: MarkerPlace,
    partition: int,
    marker: SinkMarker,
    acknowledged: bool,
) -> None:
    """Sends ``partition``'s marker in the writer's open transaction. ``acknowledged``:
    wait for the broker to take it, which is how a producer kept from an earlier batch
    learns whether it still holds its id (``TransactionalWriter.send_acknowledged``)."""
    key = marker_keys(place, partition)[0]
    where = marker_partition(place, partition)
    if acknowledged:
        writer.send_acknowledged(place.marker_topic, key, marker.encode(), where)
    else:
        writer.send(place.marker_topic, key, marker.encode(), partition=where)


# The newest marker of a partition is near the end of its marker partition, behind at
# most the markers of the partitions sharing it and the control records: it is looked
# for in growing windows from the end, not read from offset 0 every batch (the head
# compaction has not reached yet grows with every batch).
MARKER_WINDOW = 64


@dataclass
class MarkerClients:
    """The clients a worker reads markers with, kept between batches: a partition moves
    to another Python worker in about every other batch, and each move reads its marker
    back; new clients cost their connections each time (about 80 ms against a local
    broker, more than the read)."""

    admin: AdminClient
    consumer: Consumer

    @classmethod
    def open(cls, place: MarkerPlace) -> MarkerClients:
        admin = admin_client(place.bootstrap, place.extra)
        reader = span_reader(place.bootstrap, place.extra, "read_committed", place.marker_topic)
        return cls(admin, reader)


# Keyed by bootstrap servers and marker topic.
MARKER_CLIENTS: KeptBetweenBatches[MarkerClients] = KeptBetweenBatches()


def committed_marker(place: MarkerPlace, partition: int) -> SinkMarker | None:
    """The last marker committed to ``partition`` (None if none yet)."""
    clients = MARKER_CLIENTS.take(place.bootstrap, place.marker_topic)
    if clients is None:
        clients = MarkerClients.open(place)
    try:
        found = _last_marker(place, partition, clients)
    except BaseException:
        clients.consumer.close()
        raise
    MARKER_CLIENTS.keep(clients, place.bootstrap, place.marker_topic)
    return found


def _last_marker(place: MarkerPlace, partition: int, clients: MarkerClients) -> SinkMarker | None:
    keys = marker_keys(place, partition)
    where = marker_partition(place, partition)
    end = end_offsets(
        place.bootstrap,
        place.marker_topic,
        place.extra,
        partitions=[where],
        admin=clients.admin,
    )
    upto, window = end[where], MARKER_WINDOW
    while upto > 0:
        start = max(0, upto - window)
        found, last = False, None
        read = read_to_end(
            place.bootstrap,
            place.marker_topic,
            extra=place.extra,
            span={where: (start, upto)},
            consumer=clients.consumer,
        )
        with contextlib.closing(read):  # lets go of the partition even if decoding fails
            for message in read:
                if message.key() in keys:
                    found, last = True, SinkMarker.from_record_value(message.value())
        if found:
            return last
        upto, window = start, window * 4
    return None


def committed_markers(place: MarkerPlace, admin: AdminClient) -> list[SinkMarker]:
    """The last marker of every output partition this job ever wrote under the place's
    prefix, any layout (none when that prefix's marker topic does not exist)."""
    if place.marker_topic not in cluster_metadata(admin).topics:
        return []
    own = sink_transactional_id_stem(place.prefix, place.job).encode()
    last: dict[bytes, SinkMarker] = {}
    for message in read_to_end(place.bootstrap, place.marker_topic, extra=place.extra, admin=admin):
        key, value = message.key() or b"", message.value()
        if key.startswith(own) and value:
            last[key] = SinkMarker.decode(value)
    return list(last.values())
