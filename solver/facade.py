"""The time-budgeted ``solve(...)`` facade: one interface over greedy and CP-SAT.

``engine="greedy"`` runs the greedy port; ``"cpsat"`` and ``"auto"`` run greedy first (it
is the warm start and the fallback), then CP-SAT in the rest of the budget, and return the
better of the two.  Every answer passes the independent validator before it is returned.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from heuristics.greedy import EngineNotAvailable, greedy_plan
from models.check import Violation, check
from models.compiled import Problem, compile_scenario
from models.objective import Metrics, ResolvedWeights, Weights, evaluate, resolve_weights
from models.placement import PlacementFile, Status
from models.plan import Plan, to_placement
from models.scenario import Scenario

log = logging.getLogger("npu_place")

Engine = Literal["auto", "greedy", "cpsat"]
ENGINES: tuple[str, ...] = ("auto", "greedy", "cpsat")


class InvalidAnswer(Exception):
    """An engine produced a placement that breaks a hard constraint (always a bug)."""

    def __init__(self, engine: str, violations: list[Violation]) -> None:
        shown = "; ".join(str(v) for v in violations[:5])
        super().__init__(f"{engine} produced an invalid placement: {shown}")
        self.engine = engine
        self.violations = violations


@dataclass
class Result:
    """The answer of :func:`solve`.

    Attributes
    ----------
    engine
        The engine whose answer this is (``greedy`` or ``cpsat``).
    status
        ``optimal``, ``feasible`` or ``greedy`` (contract meaning).
    objective
        The objective of the returned placement, equal to ``metrics.objective``.
    bound
        A proven upper bound on the objective (CP-SAT), else ``None``.
    gap
        Relative gap ``(bound - objective) / max(1, |bound|)``, else ``None``.
    """

    engine: str
    status: Status
    plan: Plan
    metrics: Metrics
    placement: PlacementFile
    objective: int
    bound: int | None
    gap: float | None
    wall_seconds: float
    greedy_objective: int | None = None
    solver_wall_seconds: float | None = None
    notes: list[str] = field(default_factory=list)
    solver_objective: int | None = None  # the objective CP-SAT reported for its plan
    solver_status: str | None = None  # CP-SAT's own status name


def _finish(
    problem: Problem,
    plan: Plan,
    weights: ResolvedWeights,
    *,
    engine: str,
    status: Status,
    started: float,
    bound: int | None,
    seed: int | None,
    notes: list[str],
    greedy_objective: int | None = None,
    solver_wall: float | None = None,
    solver_objective: int | None = None,
    solver_status: str | None = None,
) -> Result:
    metrics = evaluate(problem, plan.as_mapping(), weights)
    objective = metrics.objective
    gap = None
    if bound is not None:
        gap = max(0.0, (bound - objective) / max(1, abs(bound)))
    wall = time.perf_counter() - started
    placement = to_placement(
        problem, plan, engine=engine, status=status, wall_seconds=wall, objective=objective,
        bound=bound, gap=gap, seed=seed, hits=metrics.per_job_hits,
        candidates=metrics.per_job_candidates,
    )
    placement.metrics = metrics.to_model()
    placement.notes = list(notes)
    return Result(engine=engine, status=status, plan=plan, metrics=metrics,
                  placement=placement, objective=objective, bound=bound, gap=gap,
                  wall_seconds=wall, greedy_objective=greedy_objective,
                  solver_wall_seconds=solver_wall, notes=list(notes),
                  solver_objective=solver_objective, solver_status=solver_status)


def validated(problem: Problem, plan: Plan, engine: str) -> Plan:
    """Run the independent validator on ``plan``; raise :class:`InvalidAnswer` if broken."""
    placement = to_placement(problem, plan, engine=engine, status=Status.GREEDY)
    violations = check(problem, placement)
    if violations:
        raise InvalidAnswer(engine, violations)
    return plan


def solve(
    scenario: Scenario | Problem,
    engine: str = "auto",
    time_limit: float = 10.0,
    workers: int = 1,
    seed: int = 0,
    weights: Weights | None = None,
    deterministic_time: float | None = None,
) -> Result:
    """Place every pending job of a scenario.

    Parameters
    ----------
    scenario
        A validated scenario or its compiled :class:`~models.compiled.Problem`.
    engine
        ``"greedy"``, ``"cpsat"`` or ``"auto"`` (greedy, then CP-SAT in the remaining
        budget; the better answer wins).  ``"cpsat"`` behaves like ``"auto"`` but always
        reports the solver's answer when it is at least as good as greedy's.
    time_limit
        Wall-clock budget in seconds for the whole call (greedy included).
    workers
        CP-SAT search workers.
    seed
        Random seed of the CP-SAT search.
    weights
        Objective weights (default: automatic lexicographic weights).
    deterministic_time
        Optional CP-SAT deterministic time limit; with ``workers=1`` and a fixed seed it
        makes runs reproducible regardless of machine load.

    Returns
    -------
    Result
        The validated answer with its metrics, status, bound and gap.
    """
    started = time.perf_counter()
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    problem = scenario if isinstance(scenario, Problem) else compile_scenario(scenario)
    resolved = resolve_weights(problem, weights)
    notes = list(resolved.notes)
    greedy = validated(problem, greedy_plan(problem), "greedy")
    greedy_metrics = evaluate(problem, greedy.as_mapping(), resolved)
    if engine == "greedy":
        return _finish(problem, greedy, resolved, engine="greedy", status=Status.GREEDY,
                       started=started, bound=None, seed=seed, notes=notes,
                       greedy_objective=greedy_metrics.objective)
    try:
        from solver.cpsat import solve_cpsat
    except ImportError as exc:  # pragma: no cover - the module ships with the package
        raise EngineNotAvailable(f"the CP-SAT engine is not available: {exc}") from None
    remaining = time_limit - (time.perf_counter() - started)
    outcome = solve_cpsat(problem, greedy, resolved, time_limit=max(0.0, remaining),
                          workers=workers, seed=seed, deterministic_time=deterministic_time)
    notes.extend(outcome.notes)
    if outcome.plan is not None:
        try:
            validated(problem, outcome.plan, "cpsat")
        except InvalidAnswer as exc:
            log.error("%s; returning the greedy answer", exc)
            notes.append(f"BUG: {exc}; returned the greedy answer")
            outcome.plan = None
    if outcome.plan is None:
        return _finish(problem, greedy, resolved, engine="greedy", status=Status.GREEDY,
                       started=started, bound=outcome.bound, seed=seed, notes=notes,
                       greedy_objective=greedy_metrics.objective,
                       solver_wall=outcome.wall_seconds)
    solver_metrics = evaluate(problem, outcome.plan.as_mapping(), resolved)
    extra: dict[str, Any] = {"solver_objective": outcome.objective,
                             "solver_status": outcome.solver_status}
    if outcome.status is Status.OPTIMAL and solver_metrics.objective != outcome.objective:
        log.error("CP-SAT objective %s differs from evaluate() %s", outcome.objective,
                  solver_metrics.objective)
        notes.append(f"BUG: CP-SAT reported objective {outcome.objective} but the placement "
                     f"evaluates to {solver_metrics.objective}; status lowered to feasible")
        outcome.status = Status.FEASIBLE  # the bound stays valid, optimality is not shown
    elif outcome.objective is not None and solver_metrics.objective > outcome.objective:
        notes.append(f"the post-pass found a better placement than the solver's counts "
                     f"({solver_metrics.objective} > {outcome.objective})")
    if outcome.bound is not None and solver_metrics.objective > outcome.bound:
        # the model's bound does not cover this placement: report no bound rather than a
        # false one
        notes.append(f"the solver's bound {outcome.bound} is below the placement's "
                     f"objective {solver_metrics.objective}; no bound reported")
        outcome.bound = None
    if solver_metrics.objective < greedy_metrics.objective:
        notes.append("the solver's answer was worse than greedy's; returned greedy")
        return _finish(problem, greedy, resolved, engine="greedy", status=Status.GREEDY,
                       started=started, bound=outcome.bound, seed=seed, notes=notes,
                       greedy_objective=greedy_metrics.objective,
                       solver_wall=outcome.wall_seconds, **extra)
    if (engine == "auto" and solver_metrics.objective == greedy_metrics.objective
            and outcome.status is not Status.OPTIMAL):
        return _finish(problem, greedy, resolved, engine="greedy", status=Status.GREEDY,
                       started=started, bound=outcome.bound, seed=seed, notes=notes,
                       greedy_objective=greedy_metrics.objective,
                       solver_wall=outcome.wall_seconds, **extra)
    return _finish(problem, outcome.plan, resolved, engine="cpsat", status=outcome.status,
                   started=started, bound=outcome.bound, seed=seed, notes=notes,
                   greedy_objective=greedy_metrics.objective, solver_wall=outcome.wall_seconds,
                   **extra)
