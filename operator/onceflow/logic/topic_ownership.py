"""Who writes and who reads each Kafka topic of Onceflow's workloads, and whose each
transactional id is, over every workload that shares a Kafka cluster (DESIGN 3.1).

The invariant: on one Kafka cluster, each topic Onceflow writes has one writer in one
role, each transactional id belongs to one workload, no record flows back into the
workload that wrote it, and each Spark checkpoint belongs to one job. Each rule
guards data, and none is visible from one resource:
- two writers of one topic mix their records, which readers and ``onceflow audit`` see
  as duplicates no fault caused;
- records in a source's offsets topic or a sink's marker topic keep that source from
  starting (they are not offsets) or break that sink's replays;
- a workload whose output reaches its own input, directly or through other workloads
  (jobs, and sources whose connector reads Kafka, as the mirror does), reads its
  records again forever;
- producers sharing a transactional id fence each other and abort each other's
  transactions;
- two queries on one checkpoint (``model.checkpoint_places``) overwrite each other's
  offset log and state.
So they are judged over a whole set: the manifests ``onceflow render`` and ``onceflow
run`` are given, or every object the API server holds (admission, reconcilers).
Reading a topic another workload writes is the pipeline itself, never a problem.

Topics and ids are judged per Kafka cluster (``logic.kafka_clusters``), on the names
the tasks and drivers will use and the topics connectors declare they read
(``logic.topic_inventory``). The caller says how to find connectors (a
``ConnectorLookup``): this module imports none.

Tenants share clusters but must not learn about each other: a problem's message names
another resource only when it is in the same namespace, and otherwise says only what
it is (a job, an output topic) and that it belongs to another namespace; one function,
``_as_told_to``, decides it for every message. Each ``Collision`` also carries the
other resources, for the operator's log and events.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from onceflow.api.connector import ConnectorLookup
from onceflow.api.errors import Problem, labelled
from onceflow.api.kafka_topics import topic_name_problem
from onceflow.api.manifests import Resource, ResourceRef
from onceflow.api.pipeline import Pipeline
from onceflow.api.spark import SparkJob
from onceflow.logic.kafka_clusters import Clusters
from onceflow.logic.resource_set import ResourceSet
from onceflow.logic.topic_inventory import IdUse, Role, TopicUse, connector_reads, inventory
from onceflow.model.checkpoint_places import CheckpointPlace, place_of

DUPLICATE_RESOURCE = "DuplicateResource"
TOPIC_CONFLICT = "TopicConflict"
PIPELINE_CYCLE = "PipelineCycle"
TRANSACTIONAL_ID_CONFLICT = "TransactionalIdConflict"
INVALID_TOPIC_NAME = "InvalidTopicName"
CHECKPOINT_CONFLICT = "CheckpointConflict"
GRAPH_REASONS = frozenset(
    {
        DUPLICATE_RESOURCE,
        TOPIC_CONFLICT,
        PIPELINE_CYCLE,
        TRANSACTIONAL_ID_CONFLICT,
        INVALID_TOPIC_NAME,
        CHECKPOINT_CONFLICT,
    }
)
"""The reasons of a problem in the graph, as conditions carry them."""
ANOTHER_NAMESPACE = "another namespace on this Kafka cluster"
NOUN = {"SparkJob": "job", "KafkaSource": "source"}
"""What a kind is called in a message."""

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
    resources: Iterable[Resource],
    *,
    connectors: ConnectorLookup,
    bootstrap_override: str | None = None,
    pod_local_paths: bool = False,
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
    ``connectors``: how the caller loads a KafkaSource's connector, asked which Kafka
    topics it reads (a type it cannot load reads nothing here; the resolvers report
    it). ``bootstrap_override``: one cluster for every Pipeline (``onceflow run
    --bootstrap``); a connector reads the cluster its config names all the same.
    ``pod_local_paths``: a checkpoint path without a scheme is on each driver's own
    disk (in a cluster), not on one machine every job shares (``onceflow run``).
    """
    listed = list(resources)
    found = ResourceSet.of(listed)
    reads = connector_reads(found, connectors)
    clusters = Clusters.of(
        found.pipelines.values(),
        (read.bootstrap_servers for declared in reads.values() for read in declared),
        bootstrap_override,
    )
    topics, ids = inventory(found, clusters, reads)
    collisions = [
        *_duplicates(listed),
        *_invalid_names(topics),
        *_shared_topics(topics),
        *_colliding_names(topics),
        *_cycles(topics),
        *_shared_ids(ids),
        *_shared_prefixes(found.pipelines.values(), clusters.of_pipeline),
        *_shared_checkpoints(found.spark_jobs.values(), pod_local_paths),
    ]
    first = {ResourceRef.of(r): i for i, r in reversed(list(enumerate(listed)))}
    return sorted(collisions, key=lambda c: first[c.resource])


def manifest_problems(
    resources: Sequence[Resource],
    *,
    connectors: ConnectorLookup,
    bootstrap_override: str | None = None,
    pod_local_paths: bool = False,
) -> list[Problem]:
    """What ``onceflow render`` (``pod_local_paths``: it previews a cluster) and
    ``onceflow run`` refuse in a manifest set, each problem labelled with its resource
    (one error reports them all)."""
    found = find_collisions(
        resources,
        connectors=connectors,
        bootstrap_override=bootstrap_override,
        pod_local_paths=pod_local_paths,
    )
    return [problem for c in found for problem in labelled(c.resource.label, [c.problem])]


def _visible(me: ResourceRef, other: ResourceRef) -> bool:
    """Whether ``me``'s tenant may learn of ``other``: only in its own namespace."""
    return other.namespace == me.namespace


def _named(me: ResourceRef, other: ResourceRef) -> str:
    """``other`` as ``me``'s tenant may see it (only ever called for one namespace)."""
    return f"this {me.kind}" if other == me else f"{other.kind} {other.name!r}"


Mention = tuple[ResourceRef, str, str]
"""Another resource, the words that name it, and what it is ("a job")."""


@dataclass(frozen=True)
class Told:
    """Other resources as one tenant may hear of them."""

    named: tuple[str, ...]
    """The words naming those of its own namespace: sorted, each once."""
    hidden: tuple[str, ...]
    """What those of other namespaces are ("a job"), never which: sorted, each once."""

    def __str__(self) -> str:
        """The named ones, then what the others are "of another namespace on this
        Kafka cluster"."""
        elsewhere = [f"{' and '.join(self.hidden)} of {ANOTHER_NAMESPACE}"] if self.hidden else []
        return " and ".join([*self.named, *elsewhere])


def _as_told_to(me: ResourceRef, mentions: Iterable[Mention]) -> Told:
    """The one place that decides what ``me``'s tenant learns of other resources: the
    words naming those of its own namespace, and only what the others are."""
    named: set[str] = set()
    hidden: set[str] = set()
    for other, words, what in mentions:
        if _visible(me, other):
            named.add(words)
        else:
            hidden.add(what)
    return Told(tuple(sorted(named)), tuple(sorted(hidden)))


def _workload(me: ResourceRef, other: ResourceRef) -> Mention:
    """A workload named as ``_named`` does, or said to be a job or a source."""
    return (other, _named(me, other), f"a {NOUN[other.kind]}")


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
    """Who else writes the topic: by role and field in ``use``'s namespace, by role
    alone elsewhere."""
    me = use.resource
    told = _as_told_to(
        me,
        (
            (
                o.resource,
                f"the {o.role} of {_named(me, o.resource)} ({o.field})",
                o.role.with_article,
            )
            for o in others
        ),
    )
    said = []
    if told.named:
        said.append(f"topic {use.topic!r} is also {' and '.join(told.named)}")
    if told.hidden:
        there = " and ".join(told.hidden)
        said.append(f"topic {use.topic!r} belongs to {ANOTHER_NAMESPACE} ({there} there)")
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
    creation fails on every start. Only written topics count: Onceflow creates those,
    while a topic a workload only reads may never exist."""
    by_metric_name: dict[tuple[str, str], list[TopicUse]] = defaultdict(list)
    for use in uses:
        if use.role.writes:
            by_metric_name[(use.cluster, use.topic.replace(".", "_"))].append(use)
    collisions = []
    for group in by_metric_name.values():
        for use in group:
            others = [o for o in group if o.topic != use.topic]
            if not others:
                continue
            me = use.resource
            known = _as_told_to(
                me,
                (
                    (o.resource, f"{o.topic!r} ({o.role} of {_named(me, o.resource)})", "a topic")
                    for o in others
                ),
            )
            message = (
                f"topic {use.topic!r} differs from {known} only in '.' and '_', "
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
"""A workload's write of a topic, and another's (or its own) read of that topic."""
Graph = Mapping[ResourceRef, Sequence[Edge]]
"""Each writer's edges to the readers of what it writes."""


def _cycles(uses: Sequence[TopicUse]) -> list[Collision]:
    """Workloads whose writes come back to their own reads, directly or through
    others. Every writer is a node: a job, and a source too, whose connector can read
    what the pipeline writes (the mirror). The strongly connected components are found
    once, in O(workloads + edges); each workload of one that loops is reported with a
    cycle through it, so a large acyclic graph costs one pass."""
    graph = _flow_graph(uses)
    collisions = []
    for component in _strong_components(graph):
        for me, cycle in _cycle_through_each(component, graph).items():
            write = cycle[0][0]
            problem = Problem(write.field, _cycle_message(me, cycle), PIPELINE_CYCLE)
            others = {read.resource for _, read in cycle} - {me}
            collisions.append(Collision(me, problem, tuple(sorted(others))))
    return collisions


def _flow_graph(uses: Iterable[TopicUse]) -> dict[ResourceRef, list[Edge]]:
    """An edge from each writer of a topic (in any role: offsets and markers are
    written per batch too) to each reader of it on the same cluster."""
    readers: dict[tuple[str, str], list[TopicUse]] = defaultdict(list)
    writes = []
    for use in uses:
        if use.role.writes:
            writes.append(use)
        else:
            readers[(use.cluster, use.topic)].append(use)
    graph: dict[ResourceRef, list[Edge]] = defaultdict(list)
    for write in writes:
        graph[write.resource] += (
            (write, read) for read in readers.get((write.cluster, write.topic), ())
        )
    return graph


def _strong_components(graph: Graph) -> list[list[ResourceRef]]:
    """Tarjan's strongly connected components, iterative: a chain of thousands of jobs
    would pass Python's recursion limit. Each node and edge is visited once."""
    order: dict[ResourceRef, int] = {}
    low: dict[ResourceRef, int] = {}
    stack: list[ResourceRef] = []
    on_stack: set[ResourceRef] = set()
    components: list[list[ResourceRef]] = []

    def enter(node: ResourceRef) -> tuple[ResourceRef, Iterator[Edge]]:
        order[node] = low[node] = len(order)
        stack.append(node)
        on_stack.add(node)
        return node, iter(graph.get(node, ()))

    for root in list(graph):
        if root in order:
            continue
        path = [enter(root)]
        while path:
            node, edges = path[-1]
            for _, read in edges:
                successor = read.resource
                if successor not in order:
                    path.append(enter(successor))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], order[successor])
            else:
                path.pop()
                if path:
                    parent = path[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == order[node]:
                    components.append(_pop_component(node, stack, on_stack))
    return components


def _pop_component(
    root: ResourceRef, stack: list[ResourceRef], on_stack: set[ResourceRef]
) -> list[ResourceRef]:
    """The component ``root`` heads: the stack down to it."""
    component = []
    while True:
        node = stack.pop()
        on_stack.discard(node)
        component.append(node)
        if node == root:
            return component


def _cycle_through_each(
    component: Collection[ResourceRef], graph: Graph
) -> dict[ResourceRef, list[Edge]]:
    """One cycle through each workload of a component that loops (none for a single
    workload without an edge to itself): its own edge to itself, else a shortest
    cycle from it within the component, which also serves, rotated, each workload it
    passes that has none yet (a ring of n jobs costs one search, not n)."""
    members = set(component)
    cycles: dict[ResourceRef, list[Edge]] = {}
    for node in sorted(members):
        own = [edge for edge in graph.get(node, ()) if edge[1].resource == node]
        if own:
            cycles[node] = own[:1]
        elif node not in cycles and len(members) > 1:
            cycle = _shortest_cycle(node, graph, members)
            for i, (write, _) in enumerate(cycle):
                cycles.setdefault(write.resource, cycle[i:] + cycle[:i])
    return dict(sorted(cycles.items()))


def _shortest_cycle(
    start: ResourceRef, graph: Graph, within: Collection[ResourceRef]
) -> list[Edge]:
    """The fewest hops from ``start``'s writes back to its reads, breadth first over
    the workloads ``within`` its component (every cycle through it stays there)."""
    came_by: dict[ResourceRef, Edge] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for edge in graph.get(node, ()):
            reader = edge[1].resource
            if reader == start:
                return _path_to(start, edge, came_by)
            if reader in within and reader not in came_by:
                came_by[reader] = edge
                queue.append(reader)
    return []


def _path_to(start: ResourceRef, last: Edge, came_by: Mapping[ResourceRef, Edge]) -> list[Edge]:
    """The edges from ``start`` ending with ``last``, followed back through ``came_by``."""
    path = [last]
    while path[-1][0].resource != start:
        path.append(came_by[path[-1][0].resource])
    return path[::-1]


REREAD = {
    "SparkJob": "each batch reads the job's own output again",
    "KafkaSource": "each record the source writes is read and written again",
}
"""Why a workload that reads its own output never stops, by kind."""


def _cycle_message(me: ResourceRef, cycle: Sequence[Edge]) -> str:
    write, read = cycle[0]
    noun = NOUN[me.kind]
    if len(cycle) == 1:
        return (
            f"topic {write.topic!r} is also this {noun}'s input ({read.field}): "
            f"{REREAD[me.kind]}, and the topic grows without end; write to a topic the "
            f"{noun} does not read"
        )
    hops = [f"topic {write.topic!r} is read by {_reader(me, read)}"]
    for write, read in cycle[1:]:
        topic = repr(write.topic) if _visible(me, write.resource) else "a topic"
        hops.append(f"which writes {topic}, read by {_reader(me, read)}")
    return (
        f"{', '.join(hops)}: records go round this cycle without end; write to a topic no "
        "workload of the cycle reads"
    )


def _reader(me: ResourceRef, read: TopicUse) -> str:
    """Who reads a topic of ``me``'s cycle, as ``me``'s tenant may hear of it."""
    if read.resource == me:
        return f"this {NOUN[me.kind]} ({read.field})"
    return str(_as_told_to(me, [_workload(me, read.resource)]))


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
            said = _as_told_to(me, (_workload(me, o.resource) for o in others))
            message = (
                f"its producers' transactional ids ({use.stem}<n>) are also those of {said}: "
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


def _shared_checkpoints(jobs: Iterable[SparkJob], pod_local_paths: bool) -> list[Collision]:
    """Jobs whose checkpoints are one place, or one inside the other. Whether the
    jobs share a Pipeline or a Kafka cluster does not matter: the checkpoint is a
    directory, and whichever driver writes it last decides what both resume from.
    Each job is filed under every directory above its checkpoint, so finding the
    overlaps costs O(jobs x path depth), not a comparison of every pair."""
    placed = {ResourceRef.of(job): (job, place_of(job)) for job in jobs}
    if pod_local_paths:
        placed = {ref: found for ref, found in placed.items() if not found[1].local}
    at: dict[CheckpointPlace, list[ResourceRef]] = defaultdict(list)
    beneath: dict[CheckpointPlace, list[ResourceRef]] = defaultdict(list)
    for ref, (_, place) in placed.items():
        at[place].append(ref)
        for depth in range(len(place.parts)):
            beneath[CheckpointPlace(place.store, place.parts[:depth])].append(ref)
    collisions = []
    for me, (job, place) in placed.items():
        above = (CheckpointPlace(place.store, place.parts[:d]) for d in range(len(place.parts)))
        others = sorted(
            {*at[place], *beneath.get(place, ()), *(r for a in above for r in at.get(a, ()))} - {me}
        )
        if not others:
            continue
        told = _as_told_to(
            me,
            (
                (ref, f"{_named(me, ref)}{_nesting(place, placed[ref][1])}", "a job")
                for ref in others
            ),
        )
        field = "spec.checkpoint.pvc" if job.spec.checkpoint.pvc else "spec.checkpoint.path"
        where = job.spec.checkpoint.pvc or job.spec.checkpoint.path
        said = [*told.named, *(f"{what} of another namespace" for what in told.hidden)]
        message = (
            f"checkpoint {where!r} is also that of {' and '.join(said)}: two queries on one "
            "checkpoint overwrite each other's offset log and state, and a batch can be "
            "written under both jobs' names; give each job a checkpoint of its own (to "
            "rename a job and keep its checkpoint, delete the old SparkJob first: the new "
            "one resumes where it stopped)"
        )
        collisions.append(
            Collision(me, Problem(field, message, CHECKPOINT_CONFLICT), tuple(others))
        )
    return collisions


def _nesting(mine: CheckpointPlace, theirs: CheckpointPlace) -> str:
    if len(mine.parts) > len(theirs.parts):
        return " (this one lies inside it)"
    if len(mine.parts) < len(theirs.parts):
        return " (it lies inside this one)"
    return ""
