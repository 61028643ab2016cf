"""The compiled problem view: a validated scenario as plain indexed, numpy-backed arrays.

Engines read :class:`Problem` and never touch pydantic objects in their loops.  Nodes are
indexed in file order; ``natural_order`` lists them in natural name order
(``node-9`` before ``node-10``), the tie-break every deterministic choice uses.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter

import numpy as np

from models.derived import Derived, DerivedCache
from models.documents import paused_gc
from models.families import FamilyRules, family_rules
from models.numbers import natural_key
from models.scenario import (
    DEFAULT_TOPOTREE,
    TOPOTREE_LABEL,
    Family,
    Health,
    Job,
    LevelConfig,
    Node,
    Policy,
    Scenario,
)
from models.validation import InputError, JobShape, validate_scenario

HEALTHY = 0
SUBHEALTHY = 1
UNHEALTHY = 2
_HEALTH_CODE = {Health.HEALTHY: HEALTHY, Health.SUBHEALTHY: SUBHEALTHY, Health.UNHEALTHY: UNHEALTHY}

def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-d array, ascending: ``np.unique(values)``.

    ``np.unique`` without counts or indices imports ``numpy.ma`` (about 10 ms of the start
    of every ``npu-place`` command that scores a plan); this does not.
    """
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    if ordered.dtype.kind in "fc" and np.isnan(ordered[-1]):  # NaNs sort last: one kept
        keep[1:] &= ~(np.isnan(ordered[1:]) & np.isnan(ordered[:-1]))
    return ordered[keep]


def scenario_now(scenario: Scenario) -> int:
    """The session time: the scenario's ``now``, else the clock (contract default)."""
    return int(scenario.now) if scenario.now is not None else int(time.time())


def live_cache(scenario: Scenario, now: int) -> dict[str, dict[int, str]]:
    """Live previous-node entries: owner UID → rank → node name.

    An owner's entries live or die together, by the owner's newest ``updated`` time, as
    upstream's ``EvictExpired`` keeps one update time per owner: they are live when that
    time is not older than ``now - ttl-seconds``.
    """
    ttl = scenario.affinity_cache.ttl_seconds
    newest: dict[str, int] = {}
    for entry in scenario.affinity_cache.entries:
        newest[entry.owner_uid] = max(newest.get(entry.owner_uid, entry.updated), entry.updated)
    live: dict[str, dict[int, str]] = {}
    for entry in scenario.affinity_cache.entries:
        if newest[entry.owner_uid] >= now - ttl:
            live.setdefault(entry.owner_uid, {})[entry.rank] = entry.node
    return live


def expired_owners(scenario: Scenario, now: int) -> list[str]:
    """Owners with cache entries that are all expired at ``now`` (see :func:`live_cache`).

    ``plan`` ignores them (no rank counts them as a candidate) and ``simulate`` evicts them
    before its first session, so both commands see the same live cache.
    """
    live = live_cache(scenario, now)
    return sorted({entry.owner_uid for entry in scenario.affinity_cache.entries} - live.keys())


@dataclass(frozen=True, eq=False)
class TreeView:
    """One multilevel resource tree (``resource-level-config`` entry) over the nodes.

    ``level_value[i][n]`` is the index (into ``level_values[i]``, natural order) of node
    ``n``'s label value at level ``i + 1``, or -1 when the node is not in the tree or lacks
    that label (a node may carry some level labels and not others).  ``member[n]`` is true
    when node ``n`` names this tree and carries every level label.
    """

    name: str
    labels: tuple[str, ...]  # level1..levelN label keys
    reserved_nodes: int  # level1 reservedNode
    level_values: tuple[tuple[str, ...], ...]
    level_value: tuple[np.ndarray, ...]
    member: np.ndarray
    missing: tuple[tuple[str, str], ...]  # (node, label) of tree nodes lacking a label

    @property
    def depth(self) -> int:
        """Number of configured levels."""
        return len(self.labels)


@dataclass(frozen=True, eq=False)
class JobView:
    """One pending job with every derived value an engine needs."""

    index: int
    name: str
    owner_uid: str | None
    policy: Policy
    family: Family
    tasks: int
    npu_per_task: int
    whole_node: bool
    node_npus: int
    sp_block: int
    tp_block: int
    levels: tuple[int, ...]
    soft: bool
    ub_memory: bool
    priority: int
    image_size_gb: float
    origin: np.ndarray  # int32 [tasks]: node index of the live cache entry, -1 when none
    fault: np.ndarray  # bool [tasks]: rank listed in fault-ranks
    prefer_previous: bool  # config prefer-previous-node: engines chase origins only if true
    # Pod-level rescheduling: node index of each running rank, -1 for the ranks
    # to place.  A running rank's ``origin`` is -1: hits count for placed ranks only.
    running: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    pod_rescheduling: bool = False
    process_recover: bool = False
    pending_sessions: int = 0
    inferserviceid: str | None = None
    mindie: bool = False  # labels app and jobID both set (A3's MindIE path)
    pod_affinity: tuple[tuple[str, str], ...] = ()  # MindIE preferred matchLabels
    sp_fit_idlest: bool = False  # MindIE: super pods with more free nodes first
    # Image locality: the image the job's pods run (``image_size_gb`` is its
    # size), None when the job names none
    image: str | None = None

    @property
    def partly_running(self) -> bool:
        """Some ranks of the job are running and stay where they are."""
        return bool(len(self.running)) and bool((self.running >= 0).any())

    @property
    def to_place(self) -> np.ndarray:
        """Bool [tasks]: the ranks an engine places (not running)."""
        if not len(self.running):
            return np.ones(self.tasks, dtype=bool)
        return self.running < 0

    def placed_nodes(self, nodes: np.ndarray | list[int]) -> np.ndarray:
        """The entries of a full node-per-rank array that belong to placed ranks."""
        arr = np.asarray(nodes, dtype=np.int64)
        return arr[self.to_place] if self.partly_running else arr

    @property
    def total_npus(self) -> int:
        """NPUs the whole job requests."""
        return self.tasks * self.npu_per_task

    @property
    def rules(self) -> FamilyRules:
        """The topology rules of the job's family (:mod:`models.families`)."""
        return family_rules(self.family)

    @property
    def num_blocks(self) -> int:
        """Logical blocks: super pods (sp families) or level1 groups (multilevel)."""
        return self.rules.num_blocks(self)

    @property
    def preferred(self) -> np.ndarray:
        """Origin node engines should prefer per rank.

        -1 for fault ranks, ranks without a live entry, and every rank when
        ``prefer-previous-node`` is off.
        """
        if not self.prefer_previous:
            return np.full(self.tasks, -1, dtype=np.int32)
        return np.where(self.fault, -1, self.origin).astype(np.int32)


#: Every node by tree labels at levels depth..1, then natural order (by tree and depth).
LABEL_ORDER: Derived[tuple[str, int], np.ndarray] = Derived("label order")
#: Bool [nodes]: the holders of an image (by image name); read-only.
IMAGE_MASK: Derived[str, np.ndarray] = Derived("image mask")
#: Every node by super pod (then rack when the key is true), then natural order.
TOPOLOGY_ORDER: Derived[bool, np.ndarray] = Derived("topology order")


@dataclass(frozen=True, eq=False)
class Problem:
    """A validated scenario compiled into indexed arrays."""

    scenario: Scenario
    now: int
    node_names: tuple[str, ...]
    node_index: dict[str, int]
    npus: np.ndarray  # int32
    free: np.ndarray  # int32
    health: np.ndarray  # int8: HEALTHY / SUBHEALTHY / UNHEALTHY
    super_pod: np.ndarray  # int32, -1 = in none
    rack: np.ndarray  # int32, -1 = in none
    natural_order: np.ndarray  # node indices in natural name order
    natural_pos: np.ndarray  # position of each node in natural_order
    jobs: tuple[JobView, ...]
    job_index: dict[str, int]
    queue: tuple[int, ...]  # job indices in queue order: priority desc, then file order
    super_pod_size: int  # effective (48 default)
    super_pod_size_configured: int  # raw configured value, 0 when absent
    reserve_nodes: int
    prefer_previous_node: bool
    trees: dict[str, TreeView]
    node_tree: np.ndarray  # int32 index into tree_names, -1 when the node names no tree
    tree_names: tuple[str, ...]
    live: dict[str, dict[int, str]] = field(repr=False)  # live cache, owner → rank → node
    # Image locality: image name → node indices holding it (int32, ascending),
    # from ``nodes[].images``; and config ``image-locality`` (the term and tie-break on)
    image_holders: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    image_locality: bool = True

    @property
    def num_nodes(self) -> int:
        """Number of nodes."""
        return len(self.node_names)

    @cached_property
    def natural_pos_list(self) -> list[int]:
        """:attr:`natural_pos` as a list (for per-node lookups in Python loops).

        Computed once per problem: a problem's arrays are never changed in place (the
        service builds a new problem for every change).
        """
        return self.natural_pos.tolist()

    @cached_property
    def health_list(self) -> list[int]:
        """:attr:`health` as a list (see :attr:`natural_pos_list`)."""
        return self.health.tolist()

    @cached_property
    def super_pod_list(self) -> list[int]:
        """:attr:`super_pod` as a list (see :attr:`natural_pos_list`)."""
        return self.super_pod.tolist()

    @cached_property
    def rack_list(self) -> list[int]:
        """:attr:`rack` as a list (see :attr:`natural_pos_list`)."""
        return self.rack.tolist()

    @cached_property
    def derived(self) -> DerivedCache:
        """Values derived from this problem alone, computed once by whoever needs them
        (node orders, default objective weights, the vNPU view, model-reuse digests:
        :mod:`models.derived`).  Valid because a problem's arrays are never changed in
        place: every change builds a new problem."""
        return DerivedCache()

    def label_order(self, tree: str, depth: int) -> np.ndarray:
        """Every node, ordered by its label values in tree ``tree`` at levels
        ``depth``..1, then natural name order (cached per tree and depth).

        Any subset of the nodes taken in this order is ordered the same way, so a job's
        candidates are sorted by filtering this array instead of sorting them again.
        """
        def compute() -> np.ndarray:
            view = self.trees[tree]
            return np.lexsort([self.natural_pos] + [view.level_value[i] for i in range(depth)])

        return self.derived.get_or_compute(LABEL_ORDER, (tree, depth), compute)

    def image_mask(self, image: str | None) -> np.ndarray | None:
        """Bool [nodes]: the nodes holding ``image`` (None when no node holds it, the
        image is None or ``image-locality`` is off): the nodes the image term rewards."""
        if image is None or not self.image_locality:
            return None
        holders = self.image_holders.get(image)
        if holders is None or not len(holders):
            return None
        def compute() -> np.ndarray:
            mask = np.zeros(self.num_nodes, dtype=bool)
            mask[holders] = True
            mask.flags.writeable = False
            return mask

        return self.derived.get_or_compute(IMAGE_MASK, image, compute)

    def topology_order(self, by_rack: bool = True) -> np.ndarray:
        """Every node by super pod, then rack (when ``by_rack``), then natural name order
        (computed once per problem).

        Filtering this array by a mask gives the masked nodes in that order, the order the
        super-pod and rack strategies build their pools in, without sorting per job.
        """
        def compute() -> np.ndarray:
            keys = (self.natural_pos, self.rack, self.super_pod) if by_rack \
                else (self.natural_pos, self.super_pod)
            return np.lexsort(keys)

        return self.derived.get_or_compute(TOPOLOGY_ORDER, by_rack, compute)

    @property
    def whole_free(self) -> np.ndarray:
        """Nodes that are completely free and not unhealthy."""
        return (self.free == self.npus) & (self.health != UNHEALTHY)


def _ids_or_none(values: list[int | None]) -> np.ndarray:
    """Int32 array of super-pod or rack IDs: -1 for ``None`` and for negative IDs."""
    ids = np.array(values, dtype=np.float64)  # None becomes NaN; IDs are below 2^31
    ids[np.isnan(ids) | (ids < 0)] = -1
    return ids.astype(np.int32)


def _compile_tree(name: str, levels: dict[str, LevelConfig], scenario: Scenario,
                  tree_of: list[str]) -> TreeView:
    """One tree's view; ``tree_of[n]`` is the tree node ``n`` names (its
    ``huawei.com/topotree`` label, ``default`` without it)."""
    ordered = [levels[f"level{i}"] for i in range(1, len(levels) + 1)]
    labels = tuple(level.label for level in ordered)
    nodes = scenario.nodes
    count = len(nodes)
    inside = [n for n in range(count) if tree_of[n] == name]
    member = np.zeros(count, dtype=bool)
    member[inside] = True
    missing_at: list[tuple[int, int]] = []  # (node, level) of tree nodes lacking a label
    level_values = []
    level_value = []
    for i, label in enumerate(labels):
        raw = [nodes[n].labels.get(label) for n in inside]
        lacking = [n for n, value in zip(inside, raw, strict=True) if value is None]
        if lacking:
            member[lacking] = False
            missing_at.extend((n, i) for n in lacking)
        # Every node of the tree that carries this level's label gets its value, members
        # or not: a job trims the levels above its own (upstream removeRedundantLayers), so
        # a node lacking only a trimmed level's label still serves it.
        values = sorted({v for v in raw if v is not None}, key=natural_key)
        where: dict[str | None, int] = {v: k for k, v in enumerate(values)}
        arr = np.full(count, -1, dtype=np.int32)
        where[None] = -1  # a node of the tree without this level's label
        arr[inside] = np.fromiter(map(where.__getitem__, raw), dtype=np.int32, count=len(raw))
        level_values.append(tuple(values))
        level_value.append(arr)
    missing_at.sort()  # node by node, levels in order
    return TreeView(
        name=name,
        labels=labels,
        reserved_nodes=ordered[0].reserved_node,
        level_values=tuple(level_values),
        level_value=tuple(level_value),
        member=member,
        missing=tuple((nodes[n].name, labels[i]) for n, i in missing_at),
    )


def job_origin(tasks: int, entries: dict[int, str] | None, index: dict[str, int],
               running: np.ndarray) -> np.ndarray:
    """A job's origin array (:attr:`JobView.origin`) from its owner's live cache entries.

    Parameters
    ----------
    tasks
        The job's ranks.
    entries
        The owner's live entries, rank → node name (``None``: none live).
    index
        Node name → node index.
    running
        The job's running ranks' nodes (-1: to place); a running rank has no origin.
    """
    origin = np.full(tasks, -1, dtype=np.int32)
    if entries:
        for rank, node in entries.items():
            if rank < tasks:
                origin[rank] = index[node]
    origin[running >= 0] = -1  # running ranks are not placed: no hit, no candidate
    return origin


def compile_job(j: int, job: Job, shape: JobShape, index: dict[str, int],
                live: dict[str, dict[int, str]], prefer_previous: bool) -> JobView:
    """The view of the pending job ``job`` at position ``j`` of a validated scenario
    (:func:`compile_jobs`, one job): ``shape`` is its derived shape, ``live`` the live
    cache, ``prefer_previous`` the config's ``prefer-previous-node``."""
    fault = np.zeros(job.tasks, dtype=bool)
    if job.fault_ranks:
        fault[np.asarray(job.fault_ranks, dtype=np.int64)] = True
    running = np.full(job.tasks, -1, dtype=np.int32)
    for rank, node in job.running_ranks.items():
        running[rank] = index[node]
    origin = job_origin(job.tasks, live.get(job.owner_uid) if job.owner_uid else None,
                        index, running)
    return JobView(
        index=j,
        name=job.name,
        owner_uid=job.owner_uid,
        policy=shape.policy,
        family=shape.family,
        tasks=job.tasks,
        npu_per_task=job.npu_per_task,
        whole_node=shape.whole_node,
        node_npus=shape.node_npus,
        sp_block=shape.sp_block,
        tp_block=shape.tp_block,
        levels=shape.levels,
        soft=shape.soft,
        ub_memory=job.ub_memory,
        priority=job.priority,
        origin=origin,
        fault=fault,
        prefer_previous=prefer_previous,
        running=running,
        pod_rescheduling=job.pod_rescheduling,
        process_recover=job.process_recover,
        pending_sessions=job.pending_sessions,
        inferserviceid=job.inferserviceid,
        mindie=job.app is not None and job.job_id is not None,
        pod_affinity=tuple(sorted(job.pod_affinity.items())),
        sp_fit_idlest=job.sp_fit == "idlest",
        image=job.image.name if job.image is not None else None,
        image_size_gb=(job.image.size_gb if job.image is not None
                       and job.image.size_gb is not None else job.image_size_gb),
    )


def compile_jobs(
    scenario: Scenario, shapes: dict[str, JobShape], index: dict[str, int], now: int,
    live: dict[str, dict[int, str]] | None = None,
) -> tuple[tuple[JobView, ...], dict[str, dict[int, str]]]:
    """Compile the pending jobs of a validated scenario against its node index.

    Split out of :func:`compile_scenario` so that a caller holding a compiled problem
    (the planning service) can recompile the jobs and the live cache alone when only
    jobs, cache entries or ``now`` changed.  A caller that knows the live cache at
    ``now`` (:func:`live_cache`: the cache and the live owners did not change) passes it
    as ``live``.

    Returns
    -------
    tuple
        ``(jobs, live)``: the job views in file order and the live cache.
    """
    # Metrics measure hits against the live cache even when the preference is off.
    live_all = live_cache(scenario, now) if live is None else live
    prefer = scenario.config.prefer_previous_node
    jobs = [compile_job(j, job, shapes[job.name], index, live_all, prefer)
            for j, job in enumerate(scenario.jobs)]
    return tuple(jobs), live_all


def image_holders(nodes: list[Node]) -> dict[str, np.ndarray]:
    """Image name → indices of the nodes holding it (``nodes[].images``), ascending."""
    found: dict[str, list[int]] = {}
    for n, node in enumerate(nodes):
        if node.images:
            for name in node.images:
                found.setdefault(name, []).append(n)
    return {name: np.asarray(at, dtype=np.int32) for name, at in found.items()}


def patch_image_holders(holders: dict[str, np.ndarray], changed: dict[int, tuple[
        frozenset[str], frozenset[str]]]) -> dict[str, np.ndarray]:
    """``holders`` after some nodes' images changed (``changed``: node index → (old
    names, new names)); the input is not modified."""
    out = dict(holders)
    touched: dict[str, tuple[set[int], set[int]]] = {}
    for n, (old, new) in changed.items():
        for name in old - new:
            touched.setdefault(name, (set(), set()))[1].add(n)
        for name in new - old:
            touched.setdefault(name, (set(), set()))[0].add(n)
    for name, (add, drop) in touched.items():
        kept = {int(n) for n in out.get(name, np.zeros(0, dtype=np.int32))} - drop | add
        if kept:
            out[name] = np.asarray(sorted(kept), dtype=np.int32)
        else:
            out.pop(name, None)
    return out


def job_queue(jobs: tuple[JobView, ...]) -> tuple[int, ...]:
    """Job indices in queue order: priority descending, then file order."""
    return tuple(sorted(range(len(jobs)), key=lambda j: (-jobs[j].priority, j)))


def compile_scenario(scenario: Scenario, source: str = "<scenario>") -> Problem:
    """Validate ``scenario`` and compile it into a :class:`Problem`.

    Raises
    ------
    InputError
        When the scenario breaks an input rule (every message at once).
    """
    with paused_gc():  # a million small objects at 65,536 nodes: see paused_gc
        return _compile_valid(scenario, source)


def _compile_valid(scenario: Scenario, source: str) -> Problem:
    """:func:`compile_scenario`, the garbage collector paused."""
    shapes, messages = validate_scenario(scenario, source)
    if messages:
        raise InputError(messages)
    now = scenario_now(scenario)
    nodes = scenario.nodes
    names = tuple(map(attrgetter("name"), nodes))
    index = {name: i for i, name in enumerate(names)}
    count = len(nodes)
    npus = np.fromiter(map(attrgetter("npus"), nodes), dtype=np.int32, count=count)
    # a vNPU node serves vNPU jobs only (models.vnpu): no free chip for the other families
    free = np.fromiter(map(attrgetter("free"), nodes), dtype=np.int32, count=count)
    vnpu_nodes = [n for n, vnpu in enumerate(map(attrgetter("vnpu"), nodes)) if vnpu is not None]
    free[vnpu_nodes] = 0
    health = np.fromiter(map(_HEALTH_CODE.__getitem__, map(attrgetter("health"), nodes)),
                         dtype=np.int8, count=count)
    super_pod = _ids_or_none(list(map(attrgetter("super_pod_id"), nodes)))
    rack = _ids_or_none(list(map(attrgetter("rack_id"), nodes)))
    natural = sorted(range(count), key=list(map(natural_key, names)).__getitem__)
    natural_order = np.asarray(natural, dtype=np.int32)
    natural_pos = np.empty(count, dtype=np.int32)
    natural_pos[natural_order] = np.arange(count, dtype=np.int32)

    jobs, live_all = compile_jobs(scenario, shapes, index, now)
    queue = job_queue(jobs)
    tree_of = [n.labels.get(TOPOTREE_LABEL, DEFAULT_TOPOTREE) for n in nodes]
    trees = {
        name: _compile_tree(name, levels, scenario, tree_of)
        for name, levels in scenario.config.resource_level_config.items()
    }
    tree_names = tuple(trees)
    tree_pos = {name: i for i, name in enumerate(tree_names)}
    node_tree = np.fromiter((tree_pos.get(tree, -1) for tree in tree_of), dtype=np.int32,
                            count=len(nodes))
    return Problem(
        scenario=scenario,
        now=now,
        node_names=names,
        node_index=index,
        npus=npus,
        free=free,
        health=health,
        super_pod=super_pod,
        rack=rack,
        natural_order=natural_order,
        natural_pos=natural_pos,
        jobs=jobs,
        job_index={job.name: j for j, job in enumerate(jobs)},
        queue=queue,
        super_pod_size=scenario.config.effective_super_pod_size,
        super_pod_size_configured=scenario.config.super_pod_size or 0,
        reserve_nodes=scenario.config.effective_reserve_nodes,
        prefer_previous_node=scenario.config.prefer_previous_node,
        trees=trees,
        node_tree=node_tree,
        tree_names=tree_names,
        live=live_all,
        image_holders=image_holders(nodes),
        image_locality=scenario.config.image_locality,
    )
