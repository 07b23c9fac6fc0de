"""Who writes and who reads each Kafka topic of Onceflow's workloads, and whose each
transactional id is, over every workload that shares a Kafka cluster (DESIGN 3.1).

The invariant: on one Kafka cluster, each topic Onceflow writes has one writer in one
role, each transactional id belongs to one workload, and no record flows back into
the job that wrote it. Each rule guards data, and none is visible from one resource:
- two writers of one topic mix their records, which readers and ``onceflow audit`` see
  as duplicates no fault caused;
- records in a source's offsets topic or a sink's marker topic keep that source from
  starting (they are not offsets) or break that sink's replays;
- a job whose output reaches its own input, directly or through other jobs, reads its
  records again forever;
- producers sharing a transactional id fence each other and abort each other's
  transactions.
So they are judged over a whole set: the manifests ``onceflow render`` and ``onceflow
run`` are given, or every object the API server holds (admission, reconcilers).
Reading a topic another workload writes is the pipeline itself, never a problem.

Topics and ids are judged per Kafka cluster (``logic.kafka_clusters``), on the names
the tasks and drivers will use (``logic.topic_inventory``).

Tenants share clusters but must not learn about each other: a problem's message names
another resource only when it is in the same namespace, and otherwise says that the
topic or id belongs to another namespace. Each ``Collision`` also carries the other
resources, for the operator's log and events.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from onceflow.api.errors import Problem, labelled
from onceflow.api.kafka_topics import topic_name_problem
from onceflow.api.manifests import Resource, ResourceRef
from onceflow.api.pipeline import Pipeline
from onceflow.logic.kafka_clusters import cluster_keys
from onceflow.logic.resource_set import ResourceSet
from onceflow.logic.topic_inventory import IdUse, Role, TopicUse, inventory

DUPLICATE_RESOURCE = "DuplicateResource"
TOPIC_CONFLICT = "TopicConflict"
PIPELINE_CYCLE = "PipelineCycle"
TRANSACTIONAL_ID_CONFLICT = "TransactionalIdConflict"
INVALID_TOPIC_NAME = "InvalidTopicName"
GRAPH_REASONS = frozenset(
    {
        DUPLICATE_RESOURCE,
        TOPIC_CONFLICT,
        PIPELINE_CYCLE,
        TRANSACTIONAL_ID_CONFLICT,
        INVALID_TOPIC_NAME,
    }
)
"""The reasons of a problem in the graph, as conditions carry them."""
ANOTHER_NAMESPACE = "another namespace on this Kafka cluster"

# How to rename a topic Onceflow names itself (the user named the others in `field`).
RENAME_HINT = {
    Role.OFFSETS: "set spec.offsetsTopic",
    Role.MARKERS: "rename the job or give its Pipeline another spec.transactionalIdPrefix",
}


@dataclass(frozen=True)
class Collision:
    """One resource's part in a problem of the graph."""

    resource: ResourceRef
    problem: Problem
    """For the resource's own tenant: names other resources of its namespace only."""
    others: tuple[ResourceRef, ...] = ()
    """Every other resource involved, in any namespace: for the operator's log and an
    event, never for the tenant's eyes."""

    @property
    def log_message(self) -> str:
        """Names everyone involved (the operator's log)."""
        involved = f" (with {', '.join(map(str, self.others))})" if self.others else ""
        return f"{self.resource}: {self.problem}{involved}"


def find_collisions(
    resources: Iterable[Resource], *, bootstrap_override: str | None = None
) -> list[Collision]:
    """Every problem of the topic and transactional-id graph of ``resources``, one
    Collision per resource and problem, in the order the resources come.

    ``resources``: Pipelines, KafkaSources and SparkJobs of any namespaces. For
    ``onceflow render`` and ``run``: the parsed manifests. For the admission webhook:
    the incoming object and every stored object of the three kinds in every namespace,
    without the incoming object's stored version (it would be its own duplicate);
    refuse with the ``problem`` of each Collision whose ``resource`` is
    ``ResourceRef.of(incoming)`` (for a Pipeline, also those of the workloads that
    name it: a new bootstrap or prefix moves them). For a reconciler: the same with the
    object it reconciles, setting Degraded with ``problem.reason``; ``log_message`` and
    ``others`` name both sides for the log and an event.

    A workload whose Pipeline is not in the set is left out (the resolvers report it).
    ``bootstrap_override``: one cluster for every Pipeline (``onceflow run
    --bootstrap``).
    """
    listed = list(resources)
    found = ResourceSet.of(listed)
    clusters = cluster_keys(
        bootstrap_override or p.spec.kafka.bootstrap_servers for p in found.pipelines.values()
    )

    def cluster_of(pipeline: Pipeline) -> str:
        return clusters[bootstrap_override or pipeline.spec.kafka.bootstrap_servers]

    topics, ids = inventory(found, cluster_of)
    collisions = [
        *_duplicates(listed),
        *_invalid_names(topics),
        *_shared_topics(topics),
        *_colliding_names(topics),
        *_cycles(topics),
        *_shared_ids(ids),
        *_shared_prefixes(found.pipelines.values(), cluster_of),
    ]
    first = {ResourceRef.of(r): i for i, r in reversed(list(enumerate(listed)))}
    return sorted(collisions, key=lambda c: first[c.resource])


def manifest_problems(
    resources: Sequence[Resource], *, bootstrap_override: str | None = None
) -> list[Problem]:
    """What ``onceflow render`` and ``onceflow run`` refuse in a manifest set, each
    problem labelled with its resource (one error reports them all)."""
    return [
        problem
        for c in find_collisions(resources, bootstrap_override=bootstrap_override)
        for problem in labelled(c.resource.label, [c.problem])
    ]


def _visible(me: ResourceRef, other: ResourceRef) -> bool:
    """Whether ``me``'s tenant may learn of ``other``: only in its own namespace."""
    return other.namespace == me.namespace


def _named(me: ResourceRef, other: ResourceRef) -> str:
    """``other`` as ``me``'s tenant may see it (only ever called for one namespace)."""
    return f"this {me.kind}" if other == me else f"{other.kind} {other.name!r}"


def _duplicates(listed: Sequence[Resource]) -> list[Collision]:
    counts = Counter(ResourceRef.of(r) for r in listed)
    return [
        Collision(
            ref,
            Problem(
                "metadata.name",
                f"{count} {ref.kind}s are named {ref.name!r} in this namespace, which holds "
                f"one {ref.kind} of a name: the API server keeps the last one applied and "
                "`onceflow run` runs only that one, so the others are silently lost; rename "
                "or remove them",
                DUPLICATE_RESOURCE,
            ),
            (ref,),
        )
        for ref, count in counts.items()
        if count > 1
    ]


def _invalid_names(uses: Iterable[TopicUse]) -> list[Collision]:
    """Names Onceflow builds (explicit names are checked by the models)."""
    collisions = []
    for use in uses:
        why = topic_name_problem(use.topic) if use.named_after else None
        if why:
            message = (
                f"the {use.role} is named {use.named_after}, and Kafka refuses this one: {why}; "
                f"{RENAME_HINT[use.role]}"
            )
            problem = Problem(use.field, message, INVALID_TOPIC_NAME)
            collisions.append(Collision(use.resource, problem))
    return collisions


def _writers(uses: Iterable[TopicUse]) -> dict[tuple[str, str], list[TopicUse]]:
    """The writing uses of each (cluster, topic)."""
    by_topic: dict[tuple[str, str], list[TopicUse]] = defaultdict(list)
    for use in uses:
        if use.role.writes:
            by_topic[(use.cluster, use.topic)].append(use)
    return by_topic


def _shared_topics(uses: Iterable[TopicUse]) -> list[Collision]:
    """Topics written in more than one role or by more than one workload."""
    collisions = []
    for group in _writers(uses).values():
        for use in group:
            others = [o for o in group if o is not use]
            mine = [o for o in group if o.resource == use.resource]
            if not others or (len(mine) == len(group) and use is not mine[0]):
                continue  # alone; or one workload writes it in two roles: said once
            message = f"{_taken(use, others)}: {_damage({use.role, *(o.role for o in others)})}"
            fix = "give each its own topic"
            if use.named_after:
                fix += f" (this {use.role} is named {use.named_after}: {RENAME_HINT[use.role]})"
            collisions.append(
                Collision(
                    use.resource,
                    Problem(use.field, f"{message}; {fix}", TOPIC_CONFLICT),
                    _other_resources(use.resource, others),
                )
            )
    return collisions


def _taken(use: TopicUse, others: Sequence[TopicUse]) -> str:
    me = use.resource
    known = [
        f"the {o.role} of {_named(me, o.resource)} ({o.field})"
        for o in others
        if _visible(me, o.resource)
    ]
    foreign = sorted({o.role for o in others if not _visible(me, o.resource)})
    said = []
    if known:
        said.append(f"topic {use.topic!r} is also {' and '.join(known)}")
    if foreign:
        roles = " and ".join(role.with_article for role in foreign)
        said.append(f"topic {use.topic!r} belongs to {ANOTHER_NAMESPACE} ({roles} there)")
    return "; ".join(said)


def _damage(roles: set[Role]) -> str:
    if Role.OFFSETS in roles:
        return (
            "an offsets topic holds one source's offsets and nothing else; other records "
            "there keep the source from starting, or make it resume at offsets not its own"
        )
    if Role.MARKERS in roles:
        return (
            "a marker topic holds one sink's batch markers and nothing else; other records "
            "there make its replays fail, or skip batches that were never written"
        )
    return (
        "two writers of one topic mix their records, and its readers (and `onceflow "
        "audit`) see duplicates that no fault caused"
    )


def _other_resources(me: ResourceRef, uses: Iterable[TopicUse | IdUse]) -> tuple[ResourceRef, ...]:
    return tuple(sorted({u.resource for u in uses} - {me}))


def _colliding_names(uses: Sequence[TopicUse]) -> list[Collision]:
    """Kafka refuses to create a topic whose name differs from an existing one's only
    in '.' and '_' (their metric names would be one): the second workload's topic
    creation fails on every start."""
    by_metric_name: dict[tuple[str, str], list[TopicUse]] = defaultdict(list)
    for use in uses:
        by_metric_name[(use.cluster, use.topic.replace(".", "_"))].append(use)
    collisions = []
    for group in by_metric_name.values():
        for use in (u for u in group if u.role.writes):
            others = [o for o in group if o.topic != use.topic]
            if not others:
                continue
            me = use.resource
            known = sorted(
                {
                    f"{o.topic!r} ({o.role} of {_named(me, o.resource)})"
                    for o in others
                    if _visible(me, o.resource)
                }
            )
            if not all(_visible(me, o.resource) for o in others):
                known.append(f"a topic of {ANOTHER_NAMESPACE}")
            message = (
                f"topic {use.topic!r} differs from {' and '.join(known)} only in '.' and '_', "
                "and Kafka refuses to hold both (their metric names would be the same); "
                "choose a name that differs otherwise"
            )
            collisions.append(
                Collision(
                    me,
                    Problem(use.field, message, TOPIC_CONFLICT),
                    _other_resources(me, others),
                )
            )
    return collisions


Edge = tuple[TopicUse, TopicUse]
"""A job's sink use and the input use of a job that reads that topic."""


def _cycles(uses: Sequence[TopicUse]) -> list[Collision]:
    """Jobs whose output comes back to their own input, directly or through others.
    Sources read nothing Onceflow writes, so every cycle runs through jobs alone."""
    sinks = defaultdict(list)
    for use in uses:
        if use.role is Role.SINK:
            sinks[(use.cluster, use.topic)].append(use)
    edges: dict[ResourceRef, list[Edge]] = defaultdict(list)
    for use in uses:
        if use.role is Role.INPUT:
            for sink in sinks.get((use.cluster, use.topic), []):
                edges[sink.resource].append((sink, use))
    collisions = []
    for job in sorted(edges):
        cycle = _shortest_cycle(job, edges)
        if cycle:
            others = {read.resource for _, read in cycle} - {job}
            collisions.append(
                Collision(
                    job,
                    Problem("spec.sink.kafka.topic", _cycle_message(job, cycle), PIPELINE_CYCLE),
                    tuple(sorted(others)),
                )
            )
    return collisions


def _shortest_cycle(start: ResourceRef, edges: dict[ResourceRef, list[Edge]]) -> list[Edge]:
    """The fewest hops from ``start``'s sink back to its input (breadth first), or []."""
    came_by: dict[ResourceRef, Edge] = {}
    queue = deque([start])
    while queue:
        job = queue.popleft()
        for edge in edges.get(job, []):
            reader = edge[1].resource
            if reader == start:
                path = [edge]
                while path[0][0].resource != start:
                    path.insert(0, came_by[path[0][0].resource])
                return path
            if reader not in came_by:
                came_by[reader] = edge
                queue.append(reader)
    return []


def _cycle_message(me: ResourceRef, cycle: Sequence[Edge]) -> str:
    sink, read = cycle[0]
    if len(cycle) == 1:
        return (
            f"topic {sink.topic!r} is also this job's input ({read.field}): each batch reads "
            "the job's own output again, and the topic grows without end; write to a topic "
            "the job does not read"
        )
    hops = [f"topic {sink.topic!r} is read by {_job_named(me, read.resource)}"]
    for sink, read in cycle[1:]:
        topic = repr(sink.topic) if _visible(me, sink.resource) else "a topic"
        reader = _job_named(me, read.resource)
        if read.resource == me:
            reader = f"this job ({read.field})"
        hops.append(f"which writes {topic}, read by {reader}")
    return (
        f"{', '.join(hops)}: records go round this cycle without end; write to a topic no "
        "job of the cycle reads"
    )


def _job_named(me: ResourceRef, job: ResourceRef) -> str:
    return _named(me, job) if _visible(me, job) else f"a job of {ANOTHER_NAMESPACE}"


def _shared_ids(uses: Iterable[IdUse]) -> list[Collision]:
    by_stem: dict[tuple[str, str], list[IdUse]] = defaultdict(list)
    for use in uses:
        by_stem[(use.cluster, use.stem)].append(use)
    collisions = []
    for group in by_stem.values():
        for use in group:
            others = [o for o in group if o.resource != use.resource]
            if not others:
                continue
            me = use.resource
            known = sorted({_named(me, o.resource) for o in others if _visible(me, o.resource)})
            said = [f"also those of {' and '.join(known)}"] if known else []
            if not all(_visible(me, o.resource) for o in others):
                said.append(f"belong to {ANOTHER_NAMESPACE}")
            message = (
                f"its producers' transactional ids ({use.stem}<n>) {' and '.join(said)}: "
                "producers sharing an id fence each other and abort each other's "
                f"transactions; give Pipeline {use.pipeline!r} a spec.transactionalIdPrefix "
                "of its own"
            )
            collisions.append(
                Collision(
                    me,
                    Problem("spec.pipeline", message, TRANSACTIONAL_ID_CONFLICT),
                    _other_resources(me, others),
                )
            )
    return collisions


def _shared_prefixes(
    pipelines: Iterable[Pipeline], cluster_of: Callable[[Pipeline], str]
) -> list[Collision]:
    """A prefix shared with another namespace's Pipeline on one cluster: any two
    workloads of one kind and name would share ids and offsets topics, and neither
    tenant can see the other's names to avoid it. (In one namespace, names are unique
    per kind, so a shared prefix cannot make two ids equal.)"""
    by_prefix: dict[tuple[str, str], list[Pipeline]] = defaultdict(list)
    for pipeline in pipelines:
        by_prefix[(cluster_of(pipeline), pipeline.transactional_id_prefix)].append(pipeline)
    collisions = []
    for (_, prefix), group in by_prefix.items():
        for pipeline in group:
            me = ResourceRef.of(pipeline)
            others = {ResourceRef.of(p) for p in group if p.metadata.namespace != me.namespace}
            if others:
                message = (
                    f"{prefix!r} is also the transactional-id prefix of a Pipeline of "
                    f"{ANOTHER_NAMESPACE}: workloads of one kind and name would share "
                    "transactional ids and offsets topics; choose a prefix of your own (the "
                    "default, <namespace>.<pipeline>, is unique)"
                )
                collisions.append(
                    Collision(
                        me,
                        Problem("spec.transactionalIdPrefix", message, TRANSACTIONAL_ID_CONFLICT),
                        tuple(sorted(others)),
                    )
                )
    return collisions
