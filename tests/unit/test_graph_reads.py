"""The reconcilers' view of the stored topic graph: read and judged once for the
passes that ask together, never older than the pass that asks, and the side of a
standing collision held back is the newer one."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from onceflow.api import parse_resource
from onceflow.api.manifests import ResourceRef
from onceflow.connectors.registry import load_connector
from onceflow.control.graph import GraphReads, standing_problems
from onceflow.logic.topic_claims import legacy_claim_of
from tests.unit.test_shared_reads import _until_waiting
from tests.unit.test_topic_ownership import pipeline, source


class Stored:
    """The API server's objects by kind, with a count of the LISTs asked of it; a LIST
    can be held open to let callers pile up behind it."""

    def __init__(self, *documents: dict[str, Any]) -> None:
        self.documents = list(documents)
        self.lists = 0
        self.gate = threading.Event()
        self.gate.set()
        self._lock = threading.Lock()

    def __call__(self, plural: str, namespace: str) -> Sequence[Mapping[str, Any]]:
        with self._lock:
            self.lists += 1
        assert self.gate.wait(10), "the test never let the LIST end"
        kind = {"pipelines": "Pipeline", "kafkasources": "KafkaSource"}.get(plural)
        return [d for d in self.documents if d["kind"] == kind]


def _created(document: dict[str, Any], at: str) -> dict[str, Any]:
    document["metadata"]["creationTimestamp"] = at
    return document


def test_the_newer_of_two_sources_writing_one_topic_is_held_and_the_older_is_not() -> None:
    older = _created(source("a", "t"), "2026-11-29T10:00:00Z")
    newer = _created(source("b", "t"), "2026-11-29T10:00:01Z")
    graph = GraphReads(Stored(pipeline(), older, newer), load_connector)()
    assert standing_problems(ResourceRef.of(parse_resource(older)), graph) == []
    (held,) = standing_problems(ResourceRef.of(parse_resource(newer)), graph)
    assert held.field == "spec.topic"


def test_passes_asking_together_share_reads_and_a_later_pass_reads_again() -> None:
    stored = Stored(pipeline(), source("a", "t"))
    graphs = GraphReads(stored, load_connector)
    stored.gate.clear()  # the first read is held open while 15 more passes ask
    with ThreadPoolExecutor(16) as pool:
        asked = [pool.submit(graphs) for _ in range(16)]
        while stored.lists == 0:  # the first read is under way
            threading.Event().wait(0.01)
        _until_waiting(graphs._reads, None, 15)  # type: ignore[arg-type]
        stored.gate.set()
        results = [a.result(10) for a in asked]
    kinds = 3  # pipelines, kafkasources, sparkjobs: one LIST each per read
    assert stored.lists <= 2 * kinds, "one read under way and one shared by the rest"
    assert len({id(r) for r in results}) <= 2
    stored.documents.append(source("b", "u"))
    later = graphs()
    assert ResourceRef("KafkaSource", "default", "b") in later.stored, "a fresh read"


def test_an_owner_recorded_by_the_release_before_keeps_its_topic_after_the_upgrade() -> None:
    """Claims were a digest of the whole spec before 2026-11-29. B, older, was edited
    past the webhook to write A's topic and is held (its recorded claim is for its old
    topic); read as not owning, A would have lost the topic to B while its tasks ran."""
    the_pipeline = pipeline()
    owner = _created(source("a", "t"), "2026-11-28T10:00:00Z")
    intruder = _created(source("b", "t"), "2026-11-01T10:00:00Z")
    before_the_edit = parse_resource(source("b", "u"))
    parsed = parse_resource(the_pipeline)
    owner["status"] = {"topicClaim": legacy_claim_of(parse_resource(owner), parsed, {})}  # type: ignore[arg-type]
    intruder["status"] = {"topicClaim": legacy_claim_of(before_the_edit, parsed, {})}  # type: ignore[arg-type]
    graph = GraphReads(Stored(the_pipeline, owner, intruder), load_connector)()
    assert standing_problems(ResourceRef.of(parse_resource(owner)), graph) == []
    (held,) = standing_problems(ResourceRef.of(parse_resource(intruder)), graph)
    assert held.field == "spec.topic"
