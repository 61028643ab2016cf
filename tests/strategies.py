"""Hypothesis strategies: random *valid* scenarios of every family, and placements.

Public API (reused by the tests of every package):

``scenarios(families=ALL_FAMILIES, max_nodes=32, max_jobs=4, ...)``
    Valid :class:`~models.scenario.Scenario` objects: a cluster of super pods, racks and
    multilevel topology labels, pending jobs of the chosen families, an affinity cache
    recorded from plausible earlier placements (some entries expired, some for owners
    that are gone or ranks that no longer exist) and fault ranks.
``problems(**kwargs)``
    The same, compiled into :class:`~models.compiled.Problem`.
``place_job(problem, j, rng, free)`` / ``random_plan(problem, rng, ...)``
    Plain functions (``rng`` is a ``random.Random``): a random node per rank of one job,
    or a random placement of the batch, satisfying every hard constraint.  Built
    constructively (job by job on the remaining capacity; ranks go to their cached node
    with probability ``origin_bias`` so that hits and fault returns occur; a job whose
    random attempt fails stays unplaced).  ``random_plan`` returns job index → node
    index per rank; ``plan_to_placement`` turns that into a placement file.
``running_ranks_document(problem, j, running, sessions, pod)``
    The scenario document of ``problem`` with some of job ``j``'s ranks running (the
    set-up of the pod-level properties).
``valid_placements(problem)``
    Strategy of :class:`~models.placement.PlacementFile` built by ``random_plan``.
``arbitrary_placements(problem)``
    Strategy of placement files that are mostly *invalid*: unknown jobs and nodes, wrong
    rank keys, bad blocks, and single mutations of valid placements.

Everything is deterministic under hypothesis (randomness comes from ``st.randoms``) and
small, so that a property runs in well under a second per example.
"""

from __future__ import annotations

import copy
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from models.compiled import UNHEALTHY, Problem, compile_scenario
from models.objective import evaluate
from models.placement import JobPlacement, PlacementFile, Status
from models.plan import Plan, to_placement
from models.scenario import Family, Scenario
from models.validation import validate_scenario

#: Session time of every generated scenario.
NOW = 1_764_400_000
#: Cache TTL of generated scenarios (upstream's default, 72 h).
TTL = 72 * 3600
ALL_FAMILIES: tuple[Family, ...] = (
    Family.ORDINARY,
    Family.SUPERPOD,
    Family.RACK,
    Family.MULTILEVEL,
)
#: Multilevel level labels (level1 = rack, level2 = super pod, level3 = zone).
LEVEL_LABELS = ("topo.rack", "topo.pod", "topo.zone")
TOPOTREE = "huawei.com/topotree"

_ORDINARY_8 = ("chip8-node8", "chip1-node8", "chip4-node8", "chip1-node2", "chip1-softShareDev",
               "chip4-node4")
_ORDINARY_16 = ("chip8-node16", "chip1-node16", "chip4-node16", "chip2-node16", "chip2-node8",
                "module-a3-16")
_A3_ORDINARY = frozenset({"chip2-node16", "chip2-node8", "module-a3-16"})
_RA_BY_TP = {1: (1, 2, 4, 8), 2: (16,), 4: (32,), 8: (64,)}


def _families(families: Iterable[Family | str]) -> tuple[Family, ...]:
    out = tuple(dict.fromkeys(Family(f) for f in families))
    if not out:
        raise ValueError("families must not be empty")
    return out


# --------------------------------------------------------------------------- cluster


@st.composite
def _cluster(draw: st.DrawFn, families: tuple[Family, ...], max_nodes: int) -> dict[str, Any]:
    """Nodes and config of a cluster that every job family of ``families`` can use."""
    rack_family = Family.RACK in families
    npus = 8 if rack_family else draw(st.sampled_from([8, 16]))
    loose = draw(st.integers(0, min(2, max_nodes - 1)))
    budget = max_nodes - loose
    pods = draw(st.integers(1, max(1, min(6, budget // 2))))
    racks = draw(st.integers(1, max(1, min(4, budget // pods))))
    per_rack_max = max(1, min(8, budget // (pods * racks)))
    if rack_family and per_rack_max == 8 and draw(st.booleans()):
        per_rack = 8  # Atlas 950: racks of 8 nodes
    else:
        per_rack = draw(st.integers(1, per_rack_max))
    # Rack ids are global; a stride of 16 puts super pods in different UB-memory domains.
    stride = draw(st.sampled_from([racks, 16]))
    depth = draw(st.integers(2, 3))
    second_tree = Family.MULTILEVEL in families and draw(st.booleans())
    health = st.sampled_from(["healthy"] * 6 + ["subhealthy", "unhealthy"])
    free = st.one_of(st.just(npus), st.just(npus), st.integers(0, npus))
    nodes: list[dict[str, Any]] = []
    for p in range(pods):
        for k in range(racks):
            rack_id = p * stride + k
            for i in range(per_rack):
                node: dict[str, Any] = {
                    "name": f"sp{p}-r{k}-n{i}",
                    "npus": npus,
                    "free": draw(free),
                    "health": draw(health),
                    "super-pod-id": p,
                    "rack-id": rack_id,
                }
                if Family.MULTILEVEL in families:
                    labels = {
                        "topo.rack": f"rack-{rack_id}",
                        "topo.pod": f"pod-{p}",
                        "topo.zone": f"zone-{p // 2}",
                    }
                    tree = draw(st.sampled_from(["default", "default", "omit", "other"]))
                    if tree == "other" and second_tree:
                        labels[TOPOTREE] = "other"
                    elif tree == "default":
                        labels[TOPOTREE] = "default"
                    if draw(st.integers(0, 9)) == 0:  # a node lacking a level label
                        labels.pop(draw(st.sampled_from(LEVEL_LABELS[:depth])))
                    node["labels"] = labels
                nodes.append(node)
    for i in range(loose):
        node = {"name": f"node-{i}", "npus": npus, "free": draw(free), "health": draw(health)}
        if draw(st.booleans()):
            node["super-pod-id"] = -1  # device-info reports -1 for "in no super pod"
            node["rack-id"] = -1
        nodes.append(node)
    pod_nodes = racks * per_rack
    config: dict[str, Any] = {"prefer-previous-node": draw(st.sampled_from([True, True, False]))}
    if rack_family or draw(st.booleans()):
        config["super-pod-size"] = draw(st.integers(pod_nodes, pod_nodes + 8))
    reserve = draw(st.sampled_from([None, 0, 1, 2, 3]))
    if reserve is not None:
        config["reserve-nodes"] = reserve
    if Family.MULTILEVEL in families:
        levels: dict[str, Any] = {}
        for i in range(depth):
            level: dict[str, Any] = {"label": LEVEL_LABELS[i]}
            if i == 0:
                level["reservedNode"] = draw(st.integers(0, 2))
            levels[f"level{i + 1}"] = level
        trees = {"default": levels}
        if second_tree:
            trees["other"] = {"level1": {"label": "topo.rack"}}
        config["resource-level-config"] = trees
    return {
        "now": NOW,
        "config": config,
        "nodes": nodes,
        "npus": npus,
        "pod_nodes": pod_nodes,
        "depth": depth,
    }


# --------------------------------------------------------------------------- jobs


def _super_pod_size(config: dict[str, Any]) -> int:
    size = config.get("super-pod-size")
    return 48 if size is None or size <= 0 else int(size)


@st.composite
def _ordinary_job(draw: st.DrawFn, cluster: dict[str, Any]) -> dict[str, Any]:
    npus = cluster["npus"]
    policy = draw(st.sampled_from(_ORDINARY_8 if npus == 8 else _ORDINARY_16))
    tasks = draw(st.integers(1, 6))
    if policy in _A3_ORDINARY:
        choices = [r for r in range(2, 17, 2)] + ([1] if tasks == 1 else [])
        request = draw(st.sampled_from(choices))
    elif policy == "chip4-node4":
        request = draw(st.sampled_from([1, 2, 4]))
    elif policy == "chip8-node16":
        request = draw(st.sampled_from([r for r in range(1, 17) if r not in (9, 11, 13, 15)]))
    else:
        request = draw(st.integers(1, 8 if npus == 8 else 16))
    return {"policy": policy, "tasks": tasks, "npu-per-task": request}


@st.composite
def _superpod_job(draw: st.DrawFn, cluster: dict[str, Any]) -> dict[str, Any]:
    npus = cluster["npus"]
    policy = draw(st.sampled_from(["chip8-node8-sp", "chip2-node8-sp"] if npus == 8
                                  else ["chip2-node16-sp"]))
    limit = max(1, min(cluster["pod_nodes"], _super_pod_size(cluster["config"])))
    job: dict[str, Any] = {"policy": policy}
    if draw(st.integers(0, 4)) == 0:  # a single-task job, possibly less than a node
        if policy == "chip8-node8-sp":
            request = draw(st.integers(1, 8))
        else:
            request = draw(st.sampled_from([1, *range(2, npus + 1, 2)]))
        job.update({"tasks": 1, "npu-per-task": request})
        if draw(st.booleans()):
            job["sp-block"] = request
    else:
        sp_block = draw(st.integers(1, limit))
        blocks = draw(st.integers(1, 3))
        if sp_block * blocks == 1:
            blocks = 2
        job.update({"tasks": sp_block * blocks, "npu-per-task": npus})
        if blocks > 1 or draw(st.booleans()):
            job["sp-block"] = sp_block * npus
    if draw(st.booleans()):
        job["super-pod-affinity"] = draw(st.sampled_from(["soft", "hard"]))
    return job


@st.composite
def _rack_job(draw: st.DrawFn, cluster: dict[str, Any]) -> dict[str, Any]:
    size = int(cluster["config"]["super-pod-size"])  # configured: the 950 needs it
    job: dict[str, Any] = {"policy": "chip8-node8-ra64-sp"}
    if draw(st.integers(0, 4)) == 0:
        request = draw(st.integers(1, 8))
        job.update({"tasks": 1, "npu-per-task": request})
        if draw(st.booleans()):
            job["sp-block"] = request
        if draw(st.booleans()):
            job["ra-block"] = draw(st.sampled_from([1, 2, 4, 8]))
    else:
        tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if t <= size]))
        ra = draw(st.sampled_from(_RA_BY_TP[tp]))
        sp_block = tp * draw(st.integers(1, max(1, min(3, size // tp))))
        blocks = draw(st.integers(1, 2))
        if sp_block * blocks == 1:
            blocks = 2
        job.update({"tasks": sp_block * blocks, "npu-per-task": 8})
        if blocks > 1 or draw(st.booleans()):
            job["sp-block"] = sp_block * 8
        if ra != 8 or draw(st.booleans()):
            job["ra-block"] = ra
        if draw(st.integers(0, 3)) == 0:
            job["ub-memory"] = True
    if draw(st.booleans()):
        job["super-pod-affinity"] = draw(st.sampled_from(["soft", "hard"]))
    return job


@st.composite
def _multilevel_job(draw: st.DrawFn, cluster: dict[str, Any]) -> dict[str, Any]:
    k = draw(st.integers(1, cluster["depth"]))
    values = [draw(st.integers(1, 4))]
    for _ in range(1, k):
        values.append(values[-1] * draw(st.integers(1, 3)))
    tasks = values[-1] * draw(st.integers(1, 3))
    if tasks > 24:
        tasks = values[-1]
    config = ",".join(f"level{i + 1}={v}" for i, v in enumerate(values))
    return {"policy": "multilevel", "tasks": tasks, "npu-per-task": cluster["npus"],
            "affinity-config": config}


_JOB_BUILDERS = {
    Family.ORDINARY: _ordinary_job,
    Family.SUPERPOD: _superpod_job,
    Family.RACK: _rack_job,
    Family.MULTILEVEL: _multilevel_job,
}


# --------------------------------------------------------------------------- scenarios


@st.composite
def scenarios(
    draw: st.DrawFn,
    families: Iterable[Family | str] = ALL_FAMILIES,
    max_nodes: int = 32,
    max_jobs: int = 4,
    min_jobs: int = 1,
    cache: bool = True,
    faults: bool = True,
) -> Scenario:
    """Random valid scenarios whose pending jobs belong to ``families``.

    Parameters
    ----------
    families
        Job families to draw from (every scenario uses a non-empty subset).
    max_nodes
        Upper bound on the number of nodes (at least 2).
    max_jobs, min_jobs
        Bounds on the number of pending jobs.
    cache
        Whether to record an affinity cache from earlier placements.
    faults
        Whether jobs may list fault ranks.
    """
    chosen = _families(families)
    if max_nodes < 2:
        raise ValueError("max_nodes must be at least 2")
    cluster = draw(_cluster(chosen, max_nodes))
    job_families = draw(st.lists(st.sampled_from(chosen), min_size=min_jobs,
                                 max_size=max(min_jobs, max_jobs)))
    jobs = []
    for i, family in enumerate(job_families):
        job = draw(_JOB_BUILDERS[family](cluster))
        job["name"] = f"job-{i}-{family.value}"
        if draw(st.integers(0, 5)) > 0:
            job["owner-uid"] = f"uid-{i}"
        priority = draw(st.sampled_from([0, 0, 0, 1, 5, -1]))
        if priority:
            job["priority"] = priority
        if faults and draw(st.integers(0, 2)) == 0:
            ranks = draw(st.lists(st.integers(0, job["tasks"] - 1), max_size=2, unique=True))
            if ranks:
                job["fault-ranks"] = sorted(ranks)
        jobs.append(job)
    data: dict[str, Any] = {"now": cluster["now"], "config": cluster["config"],
                            "nodes": cluster["nodes"], "jobs": jobs}
    scenario = Scenario.model_validate(data)
    if cache:
        entries = draw(_cache_entries(scenario))
        if entries:
            data["affinity-cache"] = {"ttl-seconds": TTL, "entries": entries}
            scenario = Scenario.model_validate(data)
    _, messages = validate_scenario(scenario, "<strategy>")
    assert not messages, f"the strategy built an invalid scenario: {messages}"
    return scenario


def problems(**kwargs: Any) -> st.SearchStrategy[Problem]:
    """Compiled problems of :func:`scenarios` (same keyword arguments)."""
    return scenarios(**kwargs).map(compile_scenario)


@st.composite
def _cache_entries(draw: st.DrawFn, scenario: Scenario) -> list[dict[str, Any]]:
    """Cache rows from earlier placements of the jobs, as if the cluster had been free."""
    problem = compile_scenario(scenario)
    rng = draw(st.randoms(use_true_random=False))
    # Earlier, every node was free and healthy: plausible homes of the previous pods.
    earlier_free = problem.npus.copy()
    earlier_health = np.zeros_like(problem.health)
    names = problem.node_names
    entries: list[dict[str, Any]] = []
    age = st.sampled_from([0, 600, 3600, TTL - 1, TTL, TTL + 1, 2 * TTL])
    for job in problem.jobs:
        if not job.owner_uid or draw(st.integers(0, 3)) == 0:
            continue
        nodes = place_job(problem, job.index, rng, earlier_free, earlier_health)
        if nodes is None:  # the job never ran here: cache ranks on arbitrary nodes
            nodes = [rng.randrange(problem.num_nodes) for _ in range(job.tasks)]
        updated = NOW - draw(age)
        cached = [r for r in range(job.tasks) if draw(st.integers(0, 4)) > 0]
        extra = draw(st.integers(0, 1))  # the job was bigger before (scaled down)
        for r in cached + list(range(job.tasks, job.tasks + extra)):
            node = names[nodes[r]] if r < job.tasks else names[rng.randrange(len(names))]
            entry: dict[str, Any] = {"owner-uid": job.owner_uid, "rank": r, "node": node,
                                     "updated": updated}
            if draw(st.integers(0, 5)) == 0:
                entry["previous"] = names[rng.randrange(len(names))]
            entries.append(entry)
    for k in range(draw(st.integers(0, 2))):  # owners whose jobs are gone
        entries.append({"owner-uid": f"gone-{k}", "rank": 0,
                        "node": names[rng.randrange(len(names))],
                        "updated": NOW - draw(age)})
    return entries


# --------------------------------------------------------------------------- placements


def _pick(rng: random.Random, pool: Sequence[int], count: int) -> list[int] | None:
    if len(pool) < count:
        return None
    return rng.sample(list(pool), count)


def _whole_free(problem: Problem, free: np.ndarray, health: np.ndarray,
                npu_per_task: int) -> np.ndarray:
    return (free == problem.npus) & (health != UNHEALTHY) & (problem.npus == npu_per_task)


def _fill_block(rng: random.Random, pool: Sequence[int], prefer: Sequence[int],
                bias: float) -> list[int]:
    """``len(prefer)`` distinct nodes of ``pool``; a rank gets its preferred node (if in the
    pool) with probability ``bias``."""
    avail = set(pool)
    out = [-1] * len(prefer)
    for i, n in enumerate(prefer):
        if n >= 0 and n in avail and rng.random() < bias:
            out[i] = n
            avail.discard(n)
    rest = iter(rng.sample(sorted(avail), out.count(-1)))
    return [n if n >= 0 else next(rest) for n in out]


def _place_grouped(
    rng: random.Random,
    size: int,
    groups: dict[int, list[int]],
    strict: bool,
    prefer: Sequence[int],
    bias: float,
) -> list[int] | None:
    """``len(prefer) // size`` blocks of ``size`` nodes, each inside one group when
    ``strict``; ``prefer`` is a preferred node per rank (-1 for none)."""
    pools = {g: list(nodes) for g, nodes in groups.items()}
    group_of = {n: g for g, nodes in pools.items() for n in nodes}
    out: list[int] = []
    for b in range(len(prefer) // size):
        want = prefer[b * size:(b + 1) * size]
        if strict:
            fitting = sorted(g for g, nodes in pools.items() if len(nodes) >= size)
            if not fitting:
                return None
            liked = sorted({group_of[n] for n in want if n in group_of} & set(fitting))
            g = rng.choice(liked if liked and rng.random() < bias else fitting)
            block = _fill_block(rng, pools[g], want, bias)
        else:
            everything = [n for g in sorted(pools) for n in pools[g]]
            if len(everything) < size:
                return None
            block = _fill_block(rng, everything, want, bias)
        chosen = set(block)
        pools = {g: [n for n in nodes if n not in chosen] for g, nodes in pools.items()}
        out.extend(block)
    return out


def _place_rack_block(
    rng: random.Random,
    problem: Problem,
    pool: list[int],
    window: int,
    strict: bool,
    prefer: Sequence[int],
    bias: float,
) -> list[int] | None:
    by_rack: dict[int, list[int]] = defaultdict(list)
    for n in pool:
        by_rack[int(problem.rack[n])].append(n)
    return _place_grouped(rng, window, dict(by_rack), strict, prefer, bias)


def place_job(
    problem: Problem,
    j: int,
    rng: random.Random,
    free: np.ndarray,
    health: np.ndarray | None = None,
    origin_bias: float = 0.7,
) -> list[int] | None:
    """A random node per rank of job ``j`` satisfying its hard constraints, or ``None``.

    ``free`` is the chips still free per node (not modified); ``health`` defaults to the
    problem's.  With probability ``origin_bias`` a rank (fault ranks included) goes to its
    cached node when that keeps the placement valid, so that hits and fault returns occur.
    The attempt is random: ``None`` does not prove that the job cannot fit.
    """
    job = problem.jobs[j]
    health = problem.health if health is None else health
    ok = health != UNHEALTHY
    prefer = [int(n) for n in job.origin]
    if not job.whole_node:
        usable = ok.copy()
        if job.family in (Family.SUPERPOD, Family.RACK):
            usable &= problem.super_pod >= 0
        if job.family is Family.RACK:
            usable &= problem.rack >= 0
        left = free.astype(np.int64).copy()
        ranks: list[int] = []
        for r in range(job.tasks):
            fits = usable & (left >= job.npu_per_task)
            n = prefer[r]
            if not (n >= 0 and fits[n] and rng.random() < origin_bias):
                pool = np.flatnonzero(fits).tolist()
                if not pool:
                    return None
                n = rng.choice(pool)
            left[n] -= job.npu_per_task
            ranks.append(n)
        return ranks
    eligible = _whole_free(problem, free, health, job.npu_per_task)
    if job.family is Family.MULTILEVEL:
        return _place_multilevel(problem, j, rng, eligible)
    eligible &= problem.super_pod >= 0
    if job.family is Family.RACK:
        eligible &= problem.rack >= 0
    pool = np.flatnonzero(eligible).tolist()
    if job.family is Family.RACK and job.ub_memory:
        domains = sorted({int(problem.rack[n]) // 16 for n in pool})
        if not domains:
            return None
        domain = rng.choice(domains)
        pool = [n for n in pool if int(problem.rack[n]) // 16 == domain]
    by_pod: dict[int, list[int]] = defaultdict(list)
    for n in pool:
        by_pod[int(problem.super_pod[n])].append(n)
    if job.family is Family.SUPERPOD:
        return _place_grouped(rng, job.sp_block, dict(by_pod), not job.soft, prefer,
                              origin_bias)
    out: list[int] = []
    taken: set[int] = set()
    size = job.sp_block
    for b in range(job.num_blocks):
        want = prefer[b * size:(b + 1) * size]
        pods = sorted(by_pod)
        rng.shuffle(pods)
        liked = sorted({int(problem.super_pod[n]) for n in want if n >= 0} & set(pods))
        if liked and rng.random() < origin_bias:
            pods = liked + [p for p in pods if p not in liked]
        if job.soft:
            pods = [-1]  # any super pod: the whole pool at once
        block = None
        for p in pods:
            candidates = [n for n in (pool if p == -1 else by_pod[p]) if n not in taken]
            block = _place_rack_block(rng, problem, candidates, job.tp_block, not job.soft,
                                      want, origin_bias)
            if block is not None:
                break
        if block is None:
            return None
        taken.update(block)
        out.extend(block)
    return out


def _place_multilevel(
    problem: Problem, j: int, rng: random.Random, eligible: np.ndarray
) -> list[int] | None:
    job = problem.jobs[j]
    trees = [t for t, name in enumerate(problem.tree_names)
             if problem.trees[name].depth >= len(job.levels)]
    if not trees:
        return None
    t = rng.choice(trees)
    view = problem.trees[problem.tree_names[t]]
    pool = set(np.flatnonzero(eligible & view.member & (problem.node_tree == t)).tolist())
    # Group ranks level by level: a level-i group shares the level-i label value.
    scenario_nodes = problem.scenario.nodes

    def value(n: int, level: int) -> str:
        return scenario_nodes[n].labels[view.labels[level - 1]]

    def fill(level: int, count: int, candidates: set[int]) -> list[int] | None:
        if level == 0:
            picked = _pick(rng, sorted(candidates), count)
            return picked
        by_value: dict[str, list[int]] = defaultdict(list)
        for n in candidates:
            by_value[value(n, level)].append(n)
        options = sorted(v for v, ns in by_value.items() if len(ns) >= count)
        if not options:
            return None
        chosen = set(by_value[rng.choice(options)])
        inner = job.levels[level - 2] if level >= 2 else 1
        out: list[int] = []
        for _ in range(count // inner):
            part = fill(level - 1, inner, chosen)
            if part is None:
                return None
            chosen -= set(part)
            out.extend(part)
        return out

    top = len(job.levels)
    out: list[int] = []
    for _ in range(job.tasks // job.levels[-1]):
        part = fill(top, job.levels[-1], pool)
        if part is None:
            return None
        pool -= set(part)
        out.extend(part)
    return out


def random_plan(
    problem: Problem,
    rng: random.Random,
    place_probability: float = 0.85,
    order: Sequence[int] | None = None,
) -> dict[int, list[int]]:
    """A random valid placement: job index → node index per rank (placed jobs only).

    Jobs are tried in ``order`` (default: a random order); each is attempted with
    probability ``place_probability`` on the capacity the jobs before it left.
    """
    free = problem.free.astype(np.int64).copy()
    indices = list(order) if order is not None else list(range(len(problem.jobs)))
    if order is None:
        rng.shuffle(indices)
    out: dict[int, list[int]] = {}
    for j in indices:
        if rng.random() >= place_probability:
            continue
        nodes = place_job(problem, j, rng, free)
        if nodes is None:
            continue
        np.subtract.at(free, np.asarray(nodes, dtype=np.int64), problem.jobs[j].npu_per_task)
        out[j] = nodes
    return out


def plan_to_placement(problem: Problem, mapping: dict[int, list[int]]) -> PlacementFile:
    """The placement file of a job → nodes mapping (unplaced jobs get a reason)."""
    nodes: list[np.ndarray | None] = [None] * len(problem.jobs)
    for j, ranks in mapping.items():
        nodes[j] = np.asarray(ranks, dtype=np.int32)
    reasons: list[str | None] = [None if n is not None else "not placed by the random placer"
                                 for n in nodes]
    metrics = evaluate(problem, mapping)
    answer = to_placement(problem, Plan(nodes, reasons), engine="random",
                          status=Status.FEASIBLE, objective=metrics.objective,
                          hits=metrics.per_job_hits, candidates=metrics.per_job_candidates)
    answer.metrics = metrics.to_model()
    return answer


@st.composite
def valid_placements(draw: st.DrawFn, problem: Problem) -> PlacementFile:
    """Placement files satisfying every hard constraint of ``problem``."""
    rng = draw(st.randoms(use_true_random=False))
    return plan_to_placement(problem, random_plan(problem, rng))


_JUNK_KEYS = st.sampled_from(["-1", "x", "01", "999", ""])


@st.composite
def _junk_placement(draw: st.DrawFn, problem: Problem) -> PlacementFile:
    node_names = [*problem.node_names, "ghost-node"]
    job_names = [job.name for job in problem.jobs] + ["ghost-job"]
    jobs = []
    for name in draw(st.lists(st.sampled_from(job_names), max_size=len(job_names) + 1)):
        j = problem.job_index.get(name)
        tasks = problem.jobs[j].tasks if j is not None else draw(st.integers(1, 4))
        keys = [str(r) for r in range(tasks)]
        if draw(st.integers(0, 3)) == 0:
            keys = draw(st.lists(st.one_of(_JUNK_KEYS, st.sampled_from(keys)), max_size=5))
        ranks = {k: draw(st.sampled_from(node_names)) for k in keys}
        blocks: dict[str, list[str]] = {}
        if draw(st.integers(0, 3)) == 0:
            blocks = draw(st.dictionaries(st.one_of(_JUNK_KEYS, st.sampled_from(["0", "1"])),
                                          st.lists(st.sampled_from(node_names), max_size=4),
                                          max_size=3))
        placed = draw(st.booleans())
        jobs.append(JobPlacement(name=name, placed=placed,
                                 reason=draw(st.sampled_from([None, "no room"])),
                                 ranks=ranks if placed or draw(st.booleans()) else {},
                                 blocks=blocks))
    return PlacementFile(engine="junk", jobs=jobs)


@st.composite
def _mutated_placement(draw: st.DrawFn, problem: Problem) -> PlacementFile:
    """A valid placement with one thing changed (often a single violation)."""
    base = draw(valid_placements(problem))
    jobs = [jp.model_copy(deep=True) for jp in base.jobs]
    if not jobs:
        return base
    k = draw(st.integers(0, len(jobs) - 1))
    jp = jobs[k]
    change = draw(st.sampled_from(["move", "swap", "drop-rank", "unplace", "duplicate",
                                   "drop-job", "blocks"]))
    if change == "move" and jp.ranks:
        rank = draw(st.sampled_from(sorted(jp.ranks)))
        jp.ranks[rank] = draw(st.sampled_from(problem.node_names))
    elif change == "swap" and len(jp.ranks) > 1:
        a, b = draw(st.lists(st.sampled_from(sorted(jp.ranks)), min_size=2, max_size=2,
                             unique=True))
        jp.ranks[a], jp.ranks[b] = jp.ranks[b], jp.ranks[a]
    elif change == "drop-rank" and jp.ranks:
        jp.ranks.pop(draw(st.sampled_from(sorted(jp.ranks))))
    elif change == "unplace":
        jp.placed = not jp.placed
    elif change == "duplicate":
        jobs.append(jp.model_copy(deep=True))
    elif change == "drop-job":
        jobs.pop(k)
    elif change == "blocks" and jp.blocks:
        jp.blocks[draw(st.sampled_from(sorted(jp.blocks)))] = []
    return base.model_copy(update={"jobs": jobs})


def arbitrary_placements(problem: Problem) -> st.SearchStrategy[PlacementFile]:
    """Placement files for ``problem`` that are mostly invalid (for crash testing)."""
    return st.one_of(_junk_placement(problem), _mutated_placement(problem),
                     valid_placements(problem))


def running_ranks_document(problem: Problem, j: int, running: dict[int, int], *,
                           sessions: int, pod: bool) -> dict[str, Any]:
    """The scenario document of ``problem`` with job ``j``'s ranks ``running`` (rank ->
    node index, in order) running: their chips leave the nodes' ``free``, they leave
    ``fault-ranks``, and ``pending-sessions`` and ``pod-rescheduling`` are set.  Compile
    it to get the problem (it may be invalid when the ranks break a rule)."""
    data = copy.deepcopy(problem.scenario.to_dict())
    rows = {row["name"]: row for row in data["nodes"]}
    for n in running.values():
        rows[problem.node_names[n]]["free"] -= problem.jobs[j].npu_per_task
    entry = data["jobs"][j]
    entry["running-ranks"] = {str(r): problem.node_names[n] for r, n in running.items()}
    entry["fault-ranks"] = [r for r in entry.get("fault-ranks", []) if r not in running]
    entry["pod-rescheduling"] = pod
    entry["pending-sessions"] = sessions
    return data
