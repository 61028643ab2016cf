"""One generated case: the earlier placement, the other tenants, the events, the batch
(:func:`generate_case`; the steps are in :mod:`benchmarks.generators`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.generators.jobs import (
    JobSpec,
    heavy_tail_npus,
    log_uniform_nodes,
    make_job,
    pow2_floor,
    resize,
    usable_nodes,
)
from benchmarks.generators.layout import simple_layout
from benchmarks.generators.params import (
    FAMILY_CODE,
    MAX_JOB_NODES,
    NOW,
    RESERVE_NODES,
    GeneratedCase,
    GenParams,
)
from benchmarks.generators.topology import Topology, build_topology, nodes_data
from models.check import check
from models.compiled import compile_scenario
from models.placement import Status
from models.plan import Plan, to_placement
from models.scenario import DEFAULT_CACHE_TTL_SECONDS, Scenario


def _history(topo: Topology, jobs: list[JobSpec], rng: np.random.Generator, mode: str
             ) -> tuple[dict[str, list[int]], str, list[str]]:
    """Place ``jobs`` on the clean cluster; return rank → node index lists per job name."""
    free = topo.npus.copy()
    health = ["healthy"] * topo.size
    notes: list[str] = []
    placed: dict[str, list[int]] = {}
    engines: set[str] = set()
    if not jobs:
        return placed, "none", notes
    data = {"now": NOW, "config": topo.config, "nodes": nodes_data(topo, free, health),
            "jobs": [j.to_dict() for j in jobs]}
    scenario = Scenario.model_validate(data)
    problem = compile_scenario(scenario, "<history>")
    plan = Plan.empty(problem)
    if mode in ("auto", "greedy"):
        from solver.facade import InvalidAnswer, solve

        try:
            plan = solve(problem, engine="greedy").plan
        except InvalidAnswer as exc:
            if mode == "greedy":
                raise
            notes.append(f"earlier placement by the simple layout: {exc}")
    for j, job in enumerate(jobs):
        nodes = plan.nodes[j]
        if nodes is not None:
            placed[job.name] = [int(n) for n in nodes]
            np.subtract.at(free, np.asarray(nodes, dtype=np.int64), job.npu_per_task)
            engines.add("greedy")
    for j, job in enumerate(jobs):
        if plan.nodes[j] is not None:
            continue
        layout = simple_layout(topo, job, free, rng)
        if layout is None:
            notes.append(f"{job.name}: no earlier placement fits; it returns without cache")
            continue
        placed[job.name] = layout
        np.subtract.at(free, np.asarray(layout, dtype=np.int64), job.npu_per_task)
        engines.add("layout")
    final = Plan.empty(problem)
    for j, job in enumerate(jobs):
        if job.name in placed:
            final.nodes[j] = np.asarray(placed[job.name], dtype=np.int32)
        else:
            final.reasons[j] = "not placed"
    violations = check(problem, to_placement(problem, final, engine="history",
                                             status=Status.GREEDY))
    if violations:  # a generator bug: never hand out a cache that no valid placement made
        raise AssertionError(f"invalid earlier placement: {violations[:3]}")
    engine = "mixed" if len(engines) > 1 else (engines.pop() if engines else "none")
    return placed, engine, notes


def _occupy(topo: Topology, free: np.ndarray, blocked: np.ndarray, share: float,
            rng: np.random.Generator) -> None:
    """Other tenants: runs of consecutive nodes (whole or partly used) up to ``share``."""
    size = topo.size
    if share <= 0 or size == 0:
        return
    if topo.family == "ordinary":
        target = round(share * int(topo.npus.sum()))
        used = 0
        candidates = np.flatnonzero(~blocked)
        if len(candidates) == 0:
            return
        tries = 0
        while used < target and tries < 20 * size:
            tries += 1
            n = int(candidates[int(rng.integers(len(candidates)))])
            take = int(rng.choice([1, 2, 4, 8]))
            if free[n] >= take:
                free[n] -= take
                used += take
        return
    target = round(share * size)
    taken = 0
    tries = 0
    while taken < target and tries < 10 * size:
        tries += 1
        run = min(64, pow2_floor(heavy_tail_npus(rng, 512)))
        start = int(rng.integers(size))
        for n in range(start, min(size, start + run)):
            if taken >= target:
                break
            if blocked[n] or free[n] < topo.npus[n]:
                continue
            if rng.random() < 0.1:  # a partly used node (a small inference pod)
                free[n] = topo.npus[n] - int(rng.choice([1, 2, 4]))
            else:
                free[n] = 0
            taken += 1


def generate_case(params: GenParams) -> GeneratedCase:
    """Generate one scenario and what is known about it.

    Parameters
    ----------
    params
        The generator parameters.

    Returns
    -------
    GeneratedCase
        The scenario (valid input) with the engine of the earlier placement and notes.
    """
    rng = np.random.default_rng(
        np.random.SeedSequence([params.seed, FAMILY_CODE[params.family], params.nodes,
                                params.jobs])
    )
    topo = build_topology(params)
    node_npus = int(topo.npus[0])
    usable = usable_nodes(topo)
    big_cap = min(MAX_JOB_NODES, max(1, usable // 2))
    if topo.family in ("a3", "850"):
        pods = topo.size // topo.pod_nodes
        big_cap = min(big_cap, max(1, (topo.pod_nodes - RESERVE_NODES) * max(1, pods // 2)))
    uid = rng.integers(0, 2**32, dtype=np.uint64)

    # which jobs return: a single job always returns; a batch has `returning` of them
    count = params.jobs
    returning = [True] if count == 1 else [bool(rng.random() < params.returning)
                                           for _ in range(count)]
    if count > 1 and not any(returning):
        returning[0] = True
    specs: list[JobSpec] = []
    for k, back in enumerate(returning):
        owner = f"{params.family}-{params.seed}-{k}-{int(uid):08x}"
        if back:
            low = 2 if count == 1 else 1
            size = log_uniform_nodes(rng, low, big_cap if count == 1 else max(1, big_cap // 2))
            job = make_job(topo, rng, size * node_npus, params.soft_prob, f"train-{k}", owner)
        else:
            cap = max(1, big_cap // 4) * node_npus
            job = make_job(topo, rng, heavy_tail_npus(rng, cap), params.soft_prob,
                            f"job-{k}", owner)
        job.priority = int(rng.choice([0, 0, 0, 5, 10])) if count > 1 else 0
        specs.append(job)

    back_specs = [s for s, back in zip(specs, returning, strict=True) if back]
    history, engine, notes = _history(topo, back_specs, rng, params.history)

    # other tenants fill the nodes the returning jobs do not use
    free = topo.npus.copy()
    blocked = np.zeros(topo.size, dtype=bool)
    for used in history.values():
        blocked[np.asarray(used)] = True
    _occupy(topo, free, blocked, params.occupancy, rng)

    # health mix
    health = np.zeros(topo.size, dtype=np.int8)
    order = rng.permutation(topo.size)
    n_unhealthy = round(params.unhealthy * topo.size)
    n_sub = round(params.subhealthy * topo.size)
    health[order[:n_unhealthy]] = 2
    health[order[n_unhealthy:n_unhealthy + n_sub]] = 1

    # events on the returning jobs
    entries: list[dict[str, Any]] = []
    ttl = DEFAULT_CACHE_TTL_SECONDS
    for job in back_specs:
        if job.name not in history:
            continue
        nodes = history[job.name]
        old_tasks = job.tasks
        if params.evict_fraction > 0:
            run = round(params.evict_fraction * old_tasks)
            if run:
                start = int(rng.integers(0, old_tasks - run + 1))
                for n in nodes[start:start + run]:
                    free[n] = 0  # the preemptor runs there now
        for n in sorted(set(nodes)):
            if rng.random() < params.taken_fraction:
                if topo.family == "ordinary" or rng.random() < 0.3:
                    free[n] = max(0, int(free[n]) - int(rng.integers(1, node_npus + 1)))
                else:
                    free[n] = 0
        if rng.random() < params.scale_change:
            resize(job, rng, big_cap)
        if rng.random() < params.fault_prob:
            ranks = min(job.tasks, old_tasks)
            k = min(ranks, int(rng.integers(1, 1 + max(1, min(4, ranks // 32)))))
            job.fault_ranks = sorted(int(r) for r in rng.choice(ranks, size=k, replace=False))
            for r in job.fault_ranks:
                roll = rng.random()
                if roll < 0.5:
                    health[nodes[r]] = 2
                elif roll < 0.75:
                    health[nodes[r]] = max(int(health[nodes[r]]), 1)
        expired = bool(rng.random() < params.expired)
        updated = NOW - (ttl + 3600 if expired else int(rng.integers(600, 48 * 3600)))
        entries += [{"owner-uid": job.owner, "rank": r, "node": topo.names[n],
                     "updated": updated} for r, n in enumerate(nodes)]

    names = {0: "healthy", 1: "subhealthy", 2: "unhealthy"}
    order_jobs = rng.permutation(len(specs)).tolist()
    data = {
        "now": NOW,
        "config": topo.config,
        "nodes": nodes_data(topo, free, [names[int(h)] for h in health]),
        "affinity-cache": {"ttl-seconds": ttl, "entries": entries},
        "jobs": [specs[i].to_dict() for i in order_jobs],
    }
    scenario = Scenario.model_validate(data)
    compile_scenario(scenario, f"<generated {params.family} n={params.nodes} seed={params.seed}>")
    return GeneratedCase(params=params, scenario=scenario, history_engine=engine,
                         returning_jobs=len(history), notes=notes)


def generate(params: GenParams) -> Scenario:
    """Generate one valid scenario (see :func:`generate_case`)."""
    return generate_case(params).scenario


def case_name(params: GenParams) -> str:
    """A short unique name of a generated case: ``family-n<nodes>-<mix>-s<seed>``."""
    extra = f"-d{params.depth}" if params.family == "multilevel" and params.depth else ""
    return f"{params.family}-n{params.nodes}-{params.mix}{params.jobs}{extra}-s{params.seed}"
