"""The session loop: one generated day replayed with each engine.

Every engine starts from the same cluster and gets the same day's events; its placements
feed its own next sessions (which gangs run where, what the cache holds, which images each
node keeps).  Per session, for each engine:

1. **Completions.**  A training gang that has run (all ranks placed) for its duration is
   deleted with its cache entries; the time counts only while the whole gang runs.
2. **The day's events** (scale, submit, node faults and repairs, pod faults), applied by
   the simulator (:mod:`solver.simulate`).  An event about a job this engine has already
   finished is skipped.
3. **Reclaim** (``reclaim: true``): while the pending inference replicas need more NPUs
   than the healthy nodes have free, the youngest running training gang of a lower
   priority is evicted whole (preempt/reclaim: its cache entries are kept and it is
   pending again).  Free NPUs are counted cluster-wide, so a reclaim can still leave a
   replica pending when the free chips are scattered.
4. **The session**: the simulator's cache lifecycle and the engine place every pending
   job (:func:`solver.simulate.session.run_session`).
5. **Images**: each placed rank uses its job's image on its node; a node without it
   pulls (:mod:`benchmarks.replay.images`); then the nodes' image GC runs, keeping the
   images of the pods on each node.

Engines:

``upstream``
    The plugin as released: greedy with ``prefer-previous-node: false`` (no origin-node
    preference; the cache is kept but not used).
``rfc``
    Greedy with the RFC's origin-node preference.
``cpsat``
    Engine ``auto`` (greedy, the origin-first construction, then CP-SAT, the best of them)
    with the RFC, one search worker and a deterministic-time budget per session by default,
    so that the replay is reproducible on any machine.
``rfc-no-image``, ``cpsat-no-image``
    ``rfc`` and ``cpsat`` with image locality off (config ``image-locality: false``:
    no image term, no image tie-break), to measure the term.  ``upstream`` always runs
    with it off (upstream's order).

Before each session the nodes' images are written into the session's scenario from the
engine's image stores (``nodes[].images``), and every job names its image
(``jobs[].image``): the image-locality term sees what the kubelet would report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.replay.generate import Day
from benchmarks.replay.images import ClusterImages
from models.scenario import Health
from solver.simulate.cluster import SimulatedCluster
from solver.simulate.events import (
    DeleteJobEvent,
    EvictEvent,
    NodeEvent,
    ScaleEvent,
    SessionSpec,
)
from solver.simulate.session import run_session

#: Engine name -> (prefer-previous-node, facade engine).
ENGINES: dict[str, tuple[bool, str]] = {
    "upstream": (False, "greedy"),
    "rfc": (True, "greedy"),
    "cpsat": (True, "auto"),
    "rfc-no-image": (True, "greedy"),
    "cpsat-no-image": (True, "auto"),
}
#: Engines that run with image locality (config ``image-locality``) on.
IMAGE_ENGINES = frozenset({"rfc", "cpsat"})
#: Default CP-SAT deterministic time per session.
DEFAULT_DETERMINISTIC_TIME = 1.0


@dataclass(frozen=True)
class ReplayOptions:
    """How the engines run.

    Attributes
    ----------
    engines
        Names of :data:`ENGINES`, in report order.
    time_limit
        Wall-clock budget per session (a safety net when ``deterministic_time`` is set).
    deterministic_time
        CP-SAT deterministic time per session; ``None``: the wall clock bounds the search
        (the result then depends on the machine's load).
    solver_seed
        CP-SAT random seed.
    """

    engines: tuple[str, ...] = ("upstream", "rfc", "cpsat")
    time_limit: float = 30.0
    deterministic_time: float | None = DEFAULT_DETERMINISTIC_TIME
    solver_seed: int = 0

    def __post_init__(self) -> None:
        unknown = [e for e in self.engines if e not in ENGINES]
        if unknown or not self.engines:
            raise ValueError(f"unknown engine(s) {', '.join(unknown) or '(none given)'}; "
                             f"choose from {', '.join(ENGINES)}")


@dataclass
class SessionRow:
    """One session of one engine (a row of ``sessions.csv``)."""

    engine: str
    session: int
    label: str
    hour: float
    placed_jobs: int = 0
    placed_pods: int = 0
    pending_jobs: int = 0
    hits: int = 0
    placed_candidates: int = 0
    achievable: int = 0  # candidates whose previous node could take them at session start
    pulls: int = 0
    pulled_gb: float = 0.0
    pull_minutes: float = 0.0
    image_hits: int = 0  # placed pods whose node already held the image
    evicted_pods: int = 0
    reclaimed_jobs: int = 0
    completed_jobs: int = 0
    gc_deleted: int = 0
    vnpu_pods: int = 0  # placed pods of vNPU jobs (services and training)
    vnpu_hits: int = 0
    vnpu_candidates: int = 0
    vnpu_pulls: int = 0
    vnpu_pulled_gb: float = 0.0
    answer: str = "-"  # the facade's engine of the answer
    wall_seconds: float = 0.0

    def to_row(self) -> dict[str, Any]:
        """The CSV row."""
        return {
            "engine": self.engine, "session": self.session, "time": self.label,
            "placed-jobs": self.placed_jobs, "placed-pods": self.placed_pods,
            "pending-jobs": self.pending_jobs, "origin-hits": self.hits,
            "origin-candidates": self.placed_candidates,
            "origin-achievable": self.achievable, "pulls": self.pulls,
            "pulled-gb": round(self.pulled_gb, 3), "pull-minutes": round(self.pull_minutes, 3),
            "image-hits": self.image_hits, "evicted-pods": self.evicted_pods,
            "reclaimed-jobs": self.reclaimed_jobs, "completed-jobs": self.completed_jobs,
            "gc-deleted": self.gc_deleted, "vnpu-pods": self.vnpu_pods,
            "vnpu-origin-hits": self.vnpu_hits, "vnpu-origin-candidates": self.vnpu_candidates,
            "vnpu-pulls": self.vnpu_pulls, "vnpu-pulled-gb": round(self.vnpu_pulled_gb, 3),
            "answer": self.answer,
        }


@dataclass
class EngineRun:
    """One engine's replay of the day."""

    engine: str
    sessions: list[SessionRow] = field(default_factory=list)
    waits: list[int] = field(default_factory=list)  # sessions each placement waited
    fragmentation_end: float = 0.0
    gc_deleted: int = 0
    skipped_events: int = 0
    wall_seconds: float = 0.0

    def total(self, attr: str) -> float:
        """Sum of a :class:`SessionRow` attribute over the sessions."""
        return float(sum(getattr(s, attr) for s in self.sessions))


@dataclass
class Replay:
    """Every engine's replay of one day."""

    day: Day
    options: ReplayOptions
    runs: list[EngineRun]


def _running_pods(sim: SimulatedCluster) -> int:
    return (sum(len(job.placed) for job in sim.jobs.values())
            + sum(len(job.placed) for job in sim.vjobs.values()))


def _pod_nodes(sim: SimulatedCluster) -> list[tuple[str, str]]:
    """(job, node) of every running pod, ordinary and vNPU."""
    pods = [(job.name, node) for job in sim.jobs.values() for node in job.placed.values()]
    pods += [(job.name, s.node) for job in sim.vjobs.values() for s in job.placed.values()]
    return pods


def fragmentation(sim: SimulatedCluster) -> float:
    """Share of the free NPUs of healthy nodes that sit on partly used nodes.

    A whole-node gang rank cannot use them; 0 when no chip is free.  vNPU nodes (which
    serve vNPU jobs only) are not counted.
    """
    free_total = stranded = 0
    for name, spec in sim.nodes.items():
        if sim.health[name] is Health.UNHEALTHY or spec.vnpu is not None:
            continue
        free = sim.free[name]
        free_total += free
        if 0 < free < spec.npus:
            stranded += free
    return stranded / free_total if free_total else 0.0


def _reclaim(sim: SimulatedCluster, day: Day, where: str) -> tuple[int, int]:
    """Evict training gangs while pending inference needs more NPUs than are free.

    Returns ``(gangs evicted, pods released)``.
    """
    need = 0
    top_priority = None
    for job in sim.jobs.values():
        info = day.jobs.get(job.name)
        if info is None or info.kind != "service":
            continue
        pending = len(job.pending_ranks())
        if pending:
            need += pending * job.spec.npu_per_task
            top_priority = info.priority if top_priority is None else max(top_priority,
                                                                          info.priority)
    if not need or top_priority is None:
        return 0, 0
    free = sum(f for name, f in sim.free.items() if sim.health[name] is not Health.UNHEALTHY
               and sim.nodes[name].vnpu is None)
    victims = [job for job in sim.jobs.values()
               if job.placed and (info := day.jobs.get(job.name)) is not None
               and info.kind == "training" and info.priority < top_priority]
    # the youngest gang first (the latest submitted), lowest priority first
    victims.sort(key=lambda job: (day.jobs[job.name].priority, -day.jobs[job.name].submitted,
                                  job.name))
    gangs = pods = 0
    for job in victims:
        if free >= need:
            break
        released = len(job.placed)
        free += released * job.spec.npu_per_task
        sim.apply(EvictEvent.model_validate({"evict": job.name}), where)
        gangs += 1
        pods += released
    return gangs, pods


def replay_engine(day: Day, engine: str, options: ReplayOptions,
                  progress: Callable[[], None] | None = None) -> EngineRun:
    """Replay ``day`` with one engine."""
    prefer, facade_engine = ENGINES[engine]
    source = f"<{day.settings.name} seed {day.seed}>"
    sim = SimulatedCluster(day.scenario_with(prefer, engine in IMAGE_ENGINES), source, source)
    settings = day.settings
    images = ClusterImages.empty(sim.nodes, settings.image_disk_gb, settings.gc,
                                 settings.pull_gb_per_minute)
    for node, held in day.initial_images.items():
        if node in images.stores:
            for image, size in held:
                images.stores[node].use(image, size, sim.now)
    for job in sim.jobs.values():  # pods running at the start have their image (no pull)
        info = day.jobs.get(job.name)
        if info is not None:
            for node in job.placed.values():
                images.stores[node].use(info.image, info.image_size_gb, sim.now)
    run = EngineRun(engine)
    ran: dict[str, int] = {}  # training job -> seconds run
    waiting: dict[str, int] = {}  # pending job -> sessions waited in this episode
    started = time.perf_counter()
    for spec in day.sessions:
        tick = time.perf_counter()
        elapsed = day.elapsed[spec.index - 1]
        step = elapsed - day.elapsed[spec.index - 2] if spec.index > 1 else 0
        row = SessionRow(engine, spec.index, spec.name or "", elapsed / 3600)
        where = f"{source}: {spec.label}"
        # 1. completions
        if spec.index > 1:
            running = [(j.name, len(j.placed), j.desired) for j in sim.jobs.values()]
            running += [(v.name, len(v.placed), v.desired) for v in sim.vjobs.values()]
            for name, placed, desired in running:
                info = day.jobs.get(name)
                if info is None or info.kind not in ("training", "vnpu-training"):
                    continue
                if placed and placed == desired:
                    ran[name] = ran.get(name, 0) + step
                if ran.get(name, 0) >= info.duration_seconds:
                    sim.apply(DeleteJobEvent.model_validate({"delete-job": name}), where)
                    waiting.pop(name, None)
                    row.completed_jobs += 1
        # 2. the day's events
        for event in spec.events:
            job_name = getattr(event, "job", None)
            if isinstance(event, EvictEvent | ScaleEvent | DeleteJobEvent) \
                    and job_name not in sim.jobs and job_name not in sim.vjobs:
                run.skipped_events += 1
                continue
            before = _running_pods(sim)
            sim.apply(event, where)
            if isinstance(event, EvictEvent) or (isinstance(event, NodeEvent)
                                                 and event.health is Health.UNHEALTHY):
                row.evicted_pods += before - _running_pods(sim)
        # 3. reclaim
        if settings.reclaim:
            gangs, pods = _reclaim(sim, day, where)
            row.reclaimed_jobs += gangs
            row.evicted_pods += pods
        # 4. the session, with each node's images as the kubelet reports them
        sim.node_images = images.held()
        report = run_session(sim, SessionSpec(spec.index, spec.name, ()), facade_engine,
                             options.time_limit, 1, options.solver_seed,
                             options.deterministic_time)
        row.answer = report.engine
        gb_before, pulls_before = images.ledger.gb, images.ledger.pulls
        for result in report.jobs:
            if not result.placed:
                row.pending_jobs += 1
                waiting[result.name] = waiting.get(result.name, 0) + 1
                continue
            row.placed_jobs += 1
            row.placed_pods += len(result.nodes)
            row.hits += result.hits
            row.placed_candidates += result.candidates
            row.achievable += result.achievable
            run.waits.append(waiting.pop(result.name, 0))
            info = day.jobs.get(result.name)
            if info is None:  # not a job of the day (no image known): no pull counted
                continue
            vnpu = info.kind in ("vnpu-service", "vnpu-training")
            if vnpu:
                row.vnpu_pods += len(result.nodes)
                row.vnpu_hits += result.hits
                row.vnpu_candidates += result.candidates
            for node in result.nodes:
                if not images.place(node, info.image, info.image_size_gb, sim.now):
                    row.image_hits += 1
                elif vnpu:
                    row.vnpu_pulls += 1
                    row.vnpu_pulled_gb += info.image_size_gb
        row.pulls = images.ledger.pulls - pulls_before
        row.pulled_gb = images.ledger.gb - gb_before
        row.pull_minutes = row.pulled_gb / settings.pull_gb_per_minute
        # 5. image GC with the images of the pods on each node
        in_use: dict[str, set[str]] = {}
        for name, node in _pod_nodes(sim):
            info = day.jobs.get(name)
            if info is not None:
                in_use.setdefault(node, set()).add(info.image)
        row.gc_deleted = images.collect(sim.now, in_use)
        row.wall_seconds = time.perf_counter() - tick
        run.sessions.append(row)
        if progress is not None:
            progress()
    run.waits.extend(waiting.values())  # still pending at the end of the day (censored)
    run.fragmentation_end = fragmentation(sim)
    run.gc_deleted = images.deleted
    run.wall_seconds = time.perf_counter() - started
    return run


def replay_day(day: Day, options: ReplayOptions | None = None,
               progress: Callable[[], None] | None = None,
               engines: Sequence[str] | None = None) -> Replay:
    """Replay ``day`` with every engine of ``options`` (one after the other)."""
    options = options or ReplayOptions()
    names = tuple(engines) if engines is not None else options.engines
    return Replay(day, options, [replay_engine(day, e, options, progress) for e in names])
