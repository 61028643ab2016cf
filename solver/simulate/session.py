"""One session of ``simulate``: start the cache, place the pending ranks, apply the answer."""

from __future__ import annotations

from typing import Any

from heuristics.lifecycle import RunningPods
from models.compiled import Problem, compile_scenario
from models.objective import achievable_hits
from models.placement import PlacementFile
from models.scenario import CacheEntry, Job, RingController, VnpuJob
from models.vnpu import ASCEND_310P, achievable_vnpu_hits, compile_vnpu
from solver.facade import solve
from solver.simulate.cluster import SimJob, SimulatedCluster, job_with
from solver.simulate.events import SessionSpec
from solver.simulate.report import JobSessionResult, SessionReport, span_text
from solver.simulate.vnpu import SimVnpuJob, running_slice


def _cache_view(cluster: SimulatedCluster, owner: str, pending: list[int],
                entries: list[CacheEntry]) -> str:
    """The cache view of a partly running job's pending ranks: the owner's entries of
    those ranks, renumbered from 0, under an owner UID of their own (added to
    ``entries``); returns that UID."""
    view = f"{owner}#{span_text(pending)}"
    updated = cluster.lifecycle.cache.updated(owner) if cluster.lifecycle.cache else None
    for local, rank in enumerate(pending):
        node = cluster.lifecycle.node(owner, rank)
        if node:
            entries.append(CacheEntry(owner_uid=view, rank=local, node=node,
                                      updated=updated or cluster.now))
    return view


def run_session(cluster: SimulatedCluster, spec: SessionSpec, engine: str, time_limit: float,
                workers: int, seed: int, deterministic_time: float | None = None
                ) -> SessionReport:
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
    present += [v.owner for v in cluster.vjobs.values() if v.owner and v.desired > 0]
    running = [RunningPods(sim.owner, dict(sim.placed)) for sim in cluster.jobs.values()
               if sim.placed]
    running += [RunningPods(v.owner, v.nodes()) for v in cluster.vjobs.values() if v.placed]
    start = cluster.lifecycle.start_session(cluster.now, present, running)
    cache_model = cluster.lifecycle.to_model()
    entries = list(cache_model.entries)
    session_jobs: list[Job] = []
    # (job, its pending ranks, whether the session job holds every rank: running-ranks)
    real_ranks: list[tuple[SimJob, list[int], bool]] = []
    for sim in cluster.jobs.values():  # insertion order: the scenario's, then submissions
        pending = sim.pending_ranks()
        if not pending:
            continue
        owner = sim.owner
        partly = cluster.session_job(sim)
        if partly is not None:
            # a partly running gang or pod-level job: repaired around its running ranks
            job = partly
        elif not sim.placed:
            job = job_with(sim.spec, tasks=sim.desired,
                            **{"fault-ranks": sorted(r for r in sim.fault
                                                     if r < sim.desired)})
        else:
            # Some ranks run: the pending ones form a job of their own whose cache view
            # is the owner's entries of those ranks, renumbered from 0.
            view = _cache_view(cluster, owner, pending, entries) if owner else None
            job = job_with(sim.spec, tasks=len(pending), **{"owner-uid": view,
                                                             "fault-ranks": []})
        if owner:
            for rank in pending:
                cluster.lifecycle.lookup(owner, rank)
        session_jobs.append(job)
        real_ranks.append((sim, pending, partly is not None))
    vnpu_jobs, vnpu_ranks = vnpu_session_jobs(cluster, entries)
    scenario = cluster.scenario_now(session_jobs, entries, vnpu_jobs=vnpu_jobs)
    cluster.sessions_run += 1
    where = f"{cluster.events_source}: {spec.label}"
    problem = compile_scenario(scenario, where)
    results: list[JobSessionResult] = []
    order = {name: i for i, name in enumerate([*cluster.jobs, *cluster.vjobs])}
    engine_used = "none"
    status = "-"
    if session_jobs or vnpu_jobs:
        result = solve(problem, engine=engine, time_limit=time_limit, workers=workers,
                       seed=seed, deterministic_time=deterministic_time)
        results.extend(apply_vnpu_answer(cluster, problem, result.placement, vnpu_ranks))
        engine_used, status = result.engine, result.status.value
        for j, (sim, ranks, whole) in enumerate(real_ranks):
            view_job = problem.jobs[j]
            nodes = result.plan.nodes[j]
            res = JobSessionResult(
                name=sim.name, ranks=ranks, placed=nodes is not None,
                candidates=int(((view_job.origin >= 0) & ~view_job.fault).sum()),
                achievable=achievable_hits(problem, view_job))
            if nodes is None:
                res.reason = result.plan.reasons[j] or "not placed"
                if whole and sim.pod_level:
                    deleted = cluster.escalate(sim)
                    res.reason += (f" (pending session {sim.pending_sessions} of the pod-level "
                                   "repair" + (f"; the rescheduler now deletes ranks "
                                               f"{span_text(deleted)} too)" if deleted else ")"))
                results.append(res)
                continue
            sim.pending_sessions = 0
            gang = cluster.lifecycle.begin(sim.owner, cluster.now)
            placed_nodes = nodes.tolist()
            for local, rank in enumerate(ranks):
                at = rank if whole else local  # the rank's position in the session job
                n = placed_nodes[at]
                name = problem.node_names[n]
                origin = int(view_job.origin[at])
                if origin < 0:
                    res.new += 1
                elif origin != n:
                    res.moved += 1
                elif view_job.fault[at]:
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
    results.sort(key=lambda r: order.get(r.name, len(order)))
    cache = cluster.lifecycle.cache
    return SessionReport(
        index=spec.index, name=spec.name, now=cluster.now, elapsed=cluster.now - cluster.start,
        events=applied, cache_start="cold" if start.cold else "warm",
        cache_rebuilt=start.rebuilt, cache_evicted=sorted({*start.evicted, *expired}),
        cache_entries=sum(len(cache.get_map(o) or {}) for o in cache.owners())
        if cache is not None else 0,
        cache_states=cluster.lifecycle.counts(), engine=engine_used, status=status,
        jobs=results)


def vnpu_session_jobs(cluster: SimulatedCluster, entries: list[CacheEntry]
                      ) -> tuple[list[VnpuJob], list[tuple[SimVnpuJob, list[int]]]]:
    """The pending ranks of every vNPU job as this session's ``vnpu-jobs`` (a partly
    running job's pending ranks get a renumbered cache view, as ordinary jobs do)."""
    jobs: list[VnpuJob] = []
    ranks: list[tuple[SimVnpuJob, list[int]]] = []
    for sim in cluster.vjobs.values():
        pending = sim.pending_ranks()
        if not pending:
            continue
        owner = sim.owner
        view = owner
        if owner and sim.placed:
            view = _cache_view(cluster, owner, pending, entries)
        if owner:
            for rank in pending:
                cluster.lifecycle.lookup(owner, rank)
        update: dict[str, Any] = {"tasks": len(pending), "owner_uid": view}
        if sim.placed and sim.spec.ring_controller is None:
            # the running ranks fixed the job's family: its other ranks follow them
            node = cluster.nodes.get(next(iter(sim.placed.values())).node)
            if node is not None and node.vnpu is not None:
                update["ring_controller"] = (
                    RingController.ASCEND_310P if node.vnpu.chip_kind == ASCEND_310P
                    else RingController.ASCEND_910)
        jobs.append(sim.spec.model_copy(update=update))
        ranks.append((sim, pending))
    return jobs, ranks


def apply_vnpu_answer(cluster: SimulatedCluster, problem: Problem, placement: PlacementFile,
                      ranks: list[tuple[SimVnpuJob, list[int]]]) -> list[JobSessionResult]:
    """Apply the vNPU jobs of a session's answer to the cluster and the cache."""
    view = compile_vnpu(problem)
    results = []
    for sim, pending in ranks:
        jp = placement.job(sim.name)
        vjob = view.jobs[view.job_index[sim.name]]
        res = JobSessionResult(name=sim.name, ranks=pending, placed=bool(jp and jp.placed),
                               candidates=sum(1 for o in vjob.origin if o >= 0),
                               achievable=achievable_vnpu_hits(view, vjob))
        if jp is None or not jp.placed:
            res.reason = (jp.reason if jp else None) or "not placed"
            results.append(res)
            continue
        gang = cluster.lifecycle.begin(sim.owner, cluster.now)
        down = set(jp.downgraded)
        for local, rank in enumerate(pending):
            name = jp.ranks[str(local)]
            n = problem.node_index[name]
            origin = vjob.origin[local]
            if origin < 0:
                res.new += 1
            elif origin != n:
                res.moved += 1
            else:
                res.hits += 1
            res.nodes.append(name)
            sim.placed[rank] = running_slice(cluster.nodes[name], sim.spec,
                                             jp.chips.get(str(local), []), str(local) in down)
            gang.allocate(rank, name)
        gang.commit()
        res.pulls_avoided_gb = res.hits * sim.spec.image_size_gb
        results.append(res)
    return results
