"""One session of ``simulate``: start the cache, place the pending ranks, apply the answer."""

from __future__ import annotations

from heuristics.lifecycle import RunningPods
from models.compiled import compile_scenario
from models.objective import achievable_hits
from models.scenario import CacheEntry, Job
from solver.facade import solve
from solver.simulate.cluster import SimJob, SimulatedCluster, job_with
from solver.simulate.events import SessionSpec
from solver.simulate.report import JobSessionResult, SessionReport, span_text


def run_session(cluster: SimulatedCluster, spec: SessionSpec, engine: str, time_limit: float,
                workers: int, seed: int) -> SessionReport:
    """Run one session on ``cluster``: its events, the cache start, the placement.

    The pending ranks of every job are placed with :func:`solver.facade.solve`; the
    answer is applied to the cluster and to the cache (each placed job one committed
    gang allocation).
    """
    applied = []
    expired, cluster.expired_at_start = cluster.expired_at_start, []
    if expired:
        shown = ", ".join(expired[:10]) + (f", ... ({len(expired) - 10} more)"
                                           if len(expired) > 10 else "")
        applied.append(f"cache: {len(expired)} owner(s) older than the TTL at the "
                       f"scenario's now evicted before the first session ({shown}); as "
                       "in plan, their entries are not candidates")
    for e, event in enumerate(spec.events, start=1):
        where = f"{cluster.events_source}: {spec.label}: event {e} ({event.kind})"
        applied.append(cluster.apply(event, where))
    present = [sim.owner for sim in cluster.jobs.values() if sim.owner and sim.desired > 0]
    running = [RunningPods(sim.owner, dict(sim.placed)) for sim in cluster.jobs.values()
               if sim.placed]
    start = cluster.lifecycle.start_session(cluster.now, present, running)
    cache_model = cluster.lifecycle.to_model()
    entries = list(cache_model.entries)
    session_jobs: list[Job] = []
    real_ranks: list[tuple[SimJob, list[int]]] = []
    for sim in cluster.jobs.values():  # insertion order: the scenario's, then submissions
        pending = sim.pending_ranks()
        if not pending:
            continue
        owner = sim.owner
        if not sim.placed:
            job = job_with(sim.spec, tasks=sim.desired,
                            **{"fault-ranks": sorted(r for r in sim.fault
                                                     if r < sim.desired)})
        else:
            # Some ranks run: the pending ones form a job of their own whose cache view
            # is the owner's entries of those ranks, renumbered from 0.
            view = None
            if owner:
                view = f"{owner}#{span_text(pending)}"
                updated = cluster.lifecycle.cache.updated(owner) if cluster.lifecycle.cache \
                    else None
                for local, rank in enumerate(pending):
                    node = cluster.lifecycle.node(owner, rank)
                    if node:
                        entries.append(CacheEntry(owner_uid=view, rank=local, node=node,
                                                  updated=updated or cluster.now))
            job = job_with(sim.spec, tasks=len(pending), **{"owner-uid": view,
                                                             "fault-ranks": []})
        if owner:
            for rank in pending:
                cluster.lifecycle.lookup(owner, rank)
        session_jobs.append(job)
        real_ranks.append((sim, pending))
    scenario = cluster.scenario_now(session_jobs, entries)
    where = f"{cluster.events_source}: {spec.label}"
    problem = compile_scenario(scenario, where)
    results: list[JobSessionResult] = []
    engine_used = "none"
    status = "-"
    if session_jobs:
        result = solve(problem, engine=engine, time_limit=time_limit, workers=workers,
                       seed=seed)
        engine_used, status = result.engine, result.status.value
        for j, (sim, ranks) in enumerate(real_ranks):
            view_job = problem.jobs[j]
            nodes = result.plan.nodes[j]
            res = JobSessionResult(
                name=sim.name, ranks=ranks, placed=nodes is not None,
                candidates=int(((view_job.origin >= 0) & ~view_job.fault).sum()),
                achievable=achievable_hits(problem, view_job))
            if nodes is None:
                res.reason = result.plan.reasons[j] or "not placed"
                results.append(res)
                continue
            gang = cluster.lifecycle.begin(sim.owner, cluster.now)
            for local, n in enumerate(nodes.tolist()):
                rank = ranks[local]
                name = problem.node_names[n]
                origin = int(view_job.origin[local])
                if origin < 0:
                    res.new += 1
                elif origin != n:
                    res.moved += 1
                elif view_job.fault[local]:
                    res.fault_returns += 1
                else:
                    res.hits += 1
                res.nodes.append(name)
                sim.placed[rank] = name
                cluster.free[name] -= sim.spec.npu_per_task
                gang.allocate(rank, name)
            gang.commit()
            sim.fault = set()
            res.pulls_avoided_gb = res.hits * sim.spec.image_size_gb
            results.append(res)
    cache = cluster.lifecycle.cache
    return SessionReport(
        index=spec.index, name=spec.name, now=cluster.now, elapsed=cluster.now - cluster.start,
        events=applied, cache_start="cold" if start.cold else "warm",
        cache_rebuilt=start.rebuilt, cache_evicted=sorted({*start.evicted, *expired}),
        cache_entries=sum(len(cache.get_map(o) or {}) for o in cache.owners())
        if cache is not None else 0,
        cache_states=cluster.lifecycle.counts(), engine=engine_used, status=status,
        jobs=results)
