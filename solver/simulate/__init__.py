"""``npu-place simulate``: a multi-session what-if run of placements and the affinity cache.

A scenario gives the starting cluster (nodes, cache, pending jobs in ``jobs``, running jobs
in ``running``).  An EVENTS file is a YAML (or JSON) list of sessions; each session is a
mapping ``{name: ..., events: [...]}`` (or just the list of events).  Each event is a
mapping whose first key names its type:

``{evict: JOB}``
    Every running pod of JOB is released (preempt/reclaim): its chips are freed, its cache
    entries are kept, and the job is pending again.
``{evict: JOB, ranks: [r, ...]}``
    Only those pods are released and become pending; the other ranks keep running.  For
    super-pod, 950 and multilevel jobs the whole job is released (a block cannot be
    repaired rank by rank here).
``{evict: JOB, ranks: [r, ...], fault: true}``
    Those pods failed: the rescheduler deletes the whole job (job-level rescheduling,
    upstream's default) and the listed ranks become ``fault-ranks`` of the re-placement.
    A job with ``pod-rescheduling`` or ``process-recover`` (upstream's pod-level
    rescheduling) loses only those pods: the others keep running and the next session
    repairs the job around them (``running-ranks``, ``heuristics.podlevel``).  Each session
    the repair stays pending counts as ``pending-sessions``, and at upstream's stages the
    rescheduler deletes more pods (A3/850: the logical super pod from 6; 950: the rack
    window from 3, the block from 6; multilevel: one level more per 6; all from 12 with
    ``pod-rescheduling``; never with ``process-recover``), so a repair that cannot be
    placed escalates across sessions.
``{delete-job: JOB}`` (optional ``keep-cache: true``)
    The job and its pods are removed; its owner's cache entries are removed too (the RFC's
    "Job 删除时清理对应缓存") unless ``keep-cache`` (a PodGroup recreated by the same owner).
``{scale: JOB, tasks: N}``
    Scale to N ranks.  Down: ranks ``N..`` are released (cache kept).  Up: ordinary jobs get
    new pending ranks while the running ones stay; a running super-pod / 950 / multilevel
    gang is released and re-placed whole with N ranks.  ``tasks: 0`` parks the job.
``{submit: {name: ..., policy: ..., ...}}``
    A new pending job (the scenario's ``jobs`` fields).
``{submit-vnpu: {name: ..., tasks: N, ai-cores: C, ...}}``
    A new pending dynamic-vNPU job (the scenario's ``vnpu-jobs`` fields; its request is
    checked against the scenario's vNPU chip kinds as in a scenario).
``{node: NODE, health: healthy|subhealthy|unhealthy, free: N}``
    Set a node's health and/or its free chips (other tenants, a repair).  ``free`` counts
    the chips left after the simulated running jobs.  A node turning unhealthy reschedules
    every running job with a rank on it (job level; those ranks become fault ranks; a
    pod-level job loses only those pods, as for ``evict ... fault: true``).
``{advance: SECONDS}``
    Move the clock (an integer, or ``"90s"``, ``"15m"``, ``"8h"``, ``"3d"``); drives the
    cache TTL.
``{restart: true}``
    The scheduler restarts: the in-memory cache is lost; the next session is a cold start.

After its events a session runs like Volcano's: the cache is initialised (cold start: rebuilt
from running pods; warm: owners present refreshed, then TTL eviction), the pending jobs are
placed with the chosen engine through :func:`solver.facade.solve`, and the answer is applied
to the cluster and to the cache (each placed job is one committed gang allocation).
Owners whose cache entries are already older than the TTL at the scenario's ``now`` are
evicted before the first session (reported as "TTL evicted" with an event line), exactly
the owners ``plan`` treats as expired, so both commands start from the same live cache.

Per session the report gives, over the pending jobs of that session:

``candidates``
    Ranks with a live previous node that are not fault ranks (placed or not).
``achievable``
    Of those, the ones whose previous node could take them now (``achievable_hits``).
``placed-candidates`` / ``hits``
    Candidates of the jobs that were placed, and those placed back on their node.
``hit-rate``
    ``hits / placed-candidates``: of the pods that were re-placed and had a previous node,
    how many went back (the RFC's "pod 回原节点命中率", target ≥ 80 %).
``pulls-avoided-gb``
    ``Σ hits × image-size-gb`` of the job (default 25 GB): image pulls the returning pods
    did not need.
``moved`` / ``new``
    Placed ranks that had a previous node but landed elsewhere (fault ranks included) /
    placed ranks without a previous node.
``pending``
    Jobs left pending, with the engine's reason.

The package: :mod:`~solver.simulate.events` (event types and parsing),
:mod:`~solver.simulate.cluster` (the simulated cluster and what each event does),
:mod:`~solver.simulate.session` (one session: cache start, placement, applying the
answer), :mod:`~solver.simulate.report` (the report and its table) and
:mod:`~solver.simulate.plot` (the PNG).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.scenario import Scenario
from solver.simulate.cluster import SimulatedCluster
from solver.simulate.events import SessionSpec, parse_events
from solver.simulate.plot import plot_report
from solver.simulate.report import JobSessionResult, SessionReport, SimulationReport
from solver.simulate.session import run_session

__all__ = [
    "JobSessionResult",
    "SessionReport",
    "SessionSpec",
    "SimulatedCluster",
    "SimulationReport",
    "parse_events",
    "plot_report",
    "run_session",
    "simulate",
]


def simulate(
    scenario: Scenario,
    events: Any,
    engine: str = "greedy",
    time_limit: float = 10.0,
    workers: int = 1,
    seed: int = 0,
    *,
    deterministic_time: float | None = None,
    scenario_source: str = "<scenario>",
    events_source: str = "<events>",
    progress: Callable[[SessionReport], None] | None = None,
) -> SimulationReport:
    """Run a multi-session simulation.

    Parameters
    ----------
    scenario
        The starting cluster (validated scenario).
    events
        The events document (plain data: a list of sessions) or parsed sessions.
    engine
        ``greedy``, ``cpsat`` or ``auto`` (passed to :func:`solver.facade.solve`).
    time_limit, workers, seed
        Per-session solver settings.
    deterministic_time
        Per-session bound on CP-SAT's deterministic time (``None``: the wall-clock
        ``time_limit`` only), as in :func:`solver.facade.solve`.
    scenario_source, events_source
        File names used in messages and in the report.
    progress
        Called with each session's report as it completes.

    Returns
    -------
    SimulationReport
        Per-session numbers and the final state.

    Raises
    ------
    InputError
        When the events are malformed or do not fit the cluster (file, session, event and
        field named in each message).
    """
    if isinstance(events, list) and all(isinstance(s, SessionSpec) for s in events) and events:
        sessions: list[SessionSpec] = list(events)
    else:
        sessions = parse_events(events, events_source, scenario)
    sim = SimulatedCluster(scenario, scenario_source, events_source)
    reports = []
    for spec in sessions:
        report = run_session(sim, spec, engine, time_limit, workers, seed, deterministic_time)
        reports.append(report)
        if progress is not None:
            progress(report)
    return SimulationReport(scenario_source, events_source, engine, reports, sim.final_state())
