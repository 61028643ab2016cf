"""The time-budgeted ``solve(...)`` facade: one interface over greedy and CP-SAT.

``engine="greedy"`` runs the greedy port.  ``"cpsat"`` and ``"auto"`` run greedy and the
origin-first construction first (both validated; the better is the fallback answer from
that moment on), then CP-SAT in the rest of the budget, warm-started from the fallback,
and return the best.  Every answer passes the independent validator before it is
returned.

Deadline: the call returns within ``time_limit`` plus a few milliseconds.  CP-SAT runs in
a worker thread that is always joined before the call returns (its search is stopped,
its model building cancelled at checkpoints), so no work started here outlives it.  Only
greedy itself cannot be interrupted; if it alone overruns the budget, the result says so
in its notes.  The vNPU jobs' greedy runs right after the other jobs' greedy and stops at
a deadline of its own (the jobs it did not finish stay pending, with a note).
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from os import PathLike
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from heuristics.greedy import EngineNotAvailable, greedy_plan  # noqa: F401 - re-exported
from models.check import Violation, check
from models.compiled import Problem, compile_scenario
from models.limits import check_deterministic_time, check_seed, check_time_limit, check_workers
from models.objective import Metrics, ResolvedWeights, Weights, evaluate, resolve_weights
from models.placement import PlacementFile, Status
from models.plan import Plan, complete_placement, to_placement
from models.scenario import Family, Scenario
from models.vnpu import VnpuPlan, compile_vnpu, vnpu_job_placements, vnpu_objective
from models.vnpu_rules import OUT_OF_TIME_REASON
from solver.model.cancel import quiet

if TYPE_CHECKING:  # imported when used: the greedy path loads neither
    from solver.model.reuse import ModelCounts
    from solver.reuse import SolveCache

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
    plan
        The node plan of the jobs of ``jobs``; the ``vnpu-jobs`` are in ``placement``
        only (with their chips).
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
    origin_first_objective: int | None = None  # the origin-first construction's objective
    #: the CP-SAT models the solve reused and built (``None``: CP-SAT did not run)
    models: ModelCounts | None = None
    #: CP-SAT's deterministic time used by the solve, summed over its phases (and the vNPU
    #: model's); ``None`` when CP-SAT did not run or the amount is not known
    solver_deterministic_seconds: float | None = None


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
    origin_first_objective: int | None = None,
    metrics: Metrics | None = None,
    checked: PlacementFile | None = None,
    models: ModelCounts | None = None,
    solver_deterministic: float | None = None,
) -> Result:
    if metrics is None:
        metrics = evaluate(problem, plan.as_mapping(), weights)
    objective = metrics.objective
    gap = _gap(objective, bound)
    wall = time.perf_counter() - started
    fields: dict[str, Any] = {
        "engine": engine, "status": status, "wall_seconds": wall, "objective": objective,
        "bound": bound, "gap": gap, "seed": seed, "hits": metrics.per_job_hits,
        "candidates": metrics.per_job_candidates}
    # ``checked``: the placement of ``plan`` the validator read (see :func:`_checked`)
    placement = (to_placement(problem, plan, **fields) if checked is None
                 else complete_placement(checked, **fields))
    placement.metrics = metrics.to_model()
    placement.notes = list(notes)
    return Result(engine=engine, status=status, plan=plan, metrics=metrics,
                  placement=placement, objective=objective, bound=bound, gap=gap,
                  wall_seconds=wall, greedy_objective=greedy_objective,
                  solver_wall_seconds=solver_wall, notes=list(notes),
                  solver_objective=solver_objective, solver_status=solver_status,
                  origin_first_objective=origin_first_objective, models=models,
                  solver_deterministic_seconds=solver_deterministic)


def _gap(objective: int, bound: int | None) -> float | None:
    """The relative gap between ``objective`` and ``bound`` (``None`` without a bound)."""
    return None if bound is None else max(0.0, (bound - objective) / max(1, abs(bound)))


def _checked(problem: Problem, plan: Plan, engine: str) -> PlacementFile:
    """The placement of ``plan`` once the independent validator passed it (raises
    :class:`InvalidAnswer` if broken); :func:`_finish` completes it instead of building
    the answer's placement again."""
    placement = to_placement(problem, plan, engine=engine, status=Status.GREEDY)
    violations = check(problem, placement, include_vnpu=False)
    if violations:
        raise InvalidAnswer(engine, violations)
    return placement


#: Seconds kept at the end of a budget for returning (result assembly, stack unwinding).
RETURN_MARGIN_SECONDS = 0.005
#: What a number argument of :func:`solve` may be (bools are refused apart).
_INTEGERS = (int, np.integer)
_REALS = (int, float, np.integer, np.floating)


def check_solve_arguments(scenario: object, engine: object, time_limit: object,
                          workers: object, seed: object, weights: object,
                          deterministic_time: object, on_fallback: object = None,
                          cache: object = None) -> tuple[float, int, int, float | None]:
    """Raise ``TypeError`` (wrong kind) or ``ValueError`` (out of range) naming the
    argument of :func:`solve` that is wrong, before any work is done; return
    ``time_limit``, ``workers``, ``seed`` and ``deterministic_time`` as Python numbers.

    Every engine checks every argument: a float seed is refused for ``engine="greedy"``
    too, where it would otherwise be recorded in the answer without being used.
    """
    if not isinstance(scenario, (Scenario, Problem)):
        hint = (" (read a file with models.io.load_scenario(path) first)"
                if isinstance(scenario, (str, PathLike)) else "")
        raise TypeError("scenario must be a models.scenario.Scenario or a compiled "
                        f"models.compiled.Problem, got {type(scenario).__name__}{hint}")
    if not isinstance(engine, str):
        raise TypeError(f"engine must be a string, one of {', '.join(ENGINES)}; "
                        f"got {type(engine).__name__}")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    if isinstance(time_limit, (bool, np.bool_)) or not isinstance(time_limit, _REALS):
        raise TypeError(f"time_limit must be a number of seconds, got {time_limit!r}")
    if isinstance(workers, (bool, np.bool_)) or not isinstance(workers, _INTEGERS):
        raise TypeError(f"workers must be an integer, got {workers!r}")
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, _INTEGERS):
        raise TypeError(f"seed must be an integer, got {seed!r}")
    if weights is not None and not isinstance(weights, Weights):
        hint = (" (build one with models.objective.Weights.model_validate(mapping))"
                if isinstance(weights, dict) else "")
        raise TypeError("weights must be a models.objective.Weights or None, got "
                        f"{type(weights).__name__}{hint}")
    if deterministic_time is not None and (isinstance(deterministic_time, (bool, np.bool_))
                                           or not isinstance(deterministic_time, _REALS)):
        raise TypeError("deterministic_time must be a number or None, got "
                        f"{deterministic_time!r}")
    if on_fallback is not None and not callable(on_fallback):
        raise TypeError("on_fallback must be callable or None, got "
                        f"{type(on_fallback).__name__}")
    if cache is not None:
        from solver.reuse import SolveCache

        if not isinstance(cache, SolveCache):
            raise TypeError("cache must be a solver.reuse.SolveCache or None, got "
                            f"{type(cache).__name__}")
    checked = (float(time_limit), int(workers), int(seed),
               None if deterministic_time is None else float(deterministic_time))
    check_solve_options(*checked)
    return checked


def check_solve_options(time_limit: float, workers: int, seed: int,
                        deterministic_time: float | None) -> None:
    """Raise ``ValueError`` naming the option when a solve option is out of range.

    The ranges are :mod:`models.limits`' (the command line and the service use the same).
    """
    check_time_limit(time_limit, "time-limit")
    check_workers(workers, "workers")
    check_seed(seed, "seed")
    if deterministic_time is not None:
        check_deterministic_time(deterministic_time, "deterministic-time")


def _full_model_old_start(problem: Problem) -> bool:
    """Whether CP-SAT's search of ``problem`` starts from the origin-first construction
    without its multilevel part (``solver.phases.FULL_MODEL_OLD_START``)."""
    from solver.phases import FULL_MODEL_OLD_START, search_mode

    return (FULL_MODEL_OLD_START and search_mode(problem) == "full"
            and any(job.family is Family.MULTILEVEL for job in problem.jobs))


def _has_origin_first(problem: Problem) -> bool:
    from heuristics.origin_first import ORIGIN_FIRST_FAMILIES

    return any(job.family in ORIGIN_FIRST_FAMILIES for job in problem.jobs)


def preload(engine: str = "auto") -> None:
    """Import the code :func:`solve` runs for ``engine`` (OR-Tools' first import is about
    1 s cold; the greedy engine needs nothing more than this module).

    :func:`solve` calls it before its budget starts, so that no import counts in the
    budget; the caller still waits for it once.  A process that serves many calls (the
    planning service, a benchmark) may call it when it starts.
    """
    if engine != "greedy":
        importlib.import_module("solver.engine")
        importlib.import_module("solver.model.vnpu")
        importlib.import_module("heuristics.vnpu")


def solve(
    scenario: Scenario | Problem,
    engine: str = "auto",
    time_limit: float = 10.0,
    workers: int = 1,
    seed: int = 0,
    weights: Weights | None = None,
    deterministic_time: float | None = None,
    on_fallback: Callable[[Result], None] | None = None,
    cache: SolveCache | None = None,
) -> Result:
    """Place every pending job of a scenario within a hard wall-clock budget.

    Parameters
    ----------
    scenario
        A validated scenario or its compiled :class:`~models.compiled.Problem`.
    engine
        ``"greedy"``, ``"cpsat"`` or ``"auto"``.  ``"auto"`` returns the best of greedy,
        the origin-first construction and CP-SAT, preferring the earlier on ties unless
        CP-SAT proved optimality.  ``"cpsat"`` behaves like ``"auto"`` but reports the
        solver's answer whenever it is at least as good as the fallback.
    time_limit
        Wall-clock budget in seconds for the whole call, greedy included; the call
        returns within it plus a few milliseconds (greedy itself cannot be interrupted:
        if it alone overruns, a note says so).
    workers
        CP-SAT search workers (1–64).
    seed
        Random seed of the CP-SAT search (0 – 2^31−1).
    weights
        Objective weights (default: automatic lexicographic weights).
    deterministic_time
        Bound the CP-SAT search by its deterministic time instead of the clock: with
        ``workers=1`` the same input and seed give the same answer on any machine and
        under any load.  ``time_limit`` stays as a safety net; a note says if it cut the
        search (that answer is then load-dependent).
    on_fallback
        Called with each fallback answer (validated, with its metrics) as soon as it
        exists: greedy's, then the origin-first construction's when it beats greedy —
        so that a caller with a deadline of its own (the planning service) has an answer
        before CP-SAT starts, without running greedy a second time.  It runs in the
        calling thread, inside the budget; an exception it raises is logged and ignored.
    cache
        What the previous solve of the same (stored, slowly changing) cluster left
        (:class:`~solver.reuse.SolveCache`): its answer, translated to this problem,
        completed with the fallback's placement and still valid, becomes the fallback and
        CP-SAT's warm start when it is at least as good (engine ``auto``/``cpsat``); the
        returned answer is remembered for the next call.  Answers then depend on the
        history of calls, also under ``deterministic_time``.  Its built CP-SAT models are
        reused when a build would give the same model (:mod:`solver.model.reuse`; a note
        counts them): that changes no answer under ``deterministic_time``, only the time.

    Returns
    -------
    Result
        The validated answer with its metrics, status, bound and gap.
    """
    # every argument is checked before any work: a wrong kind is named here rather than
    # failing inside OR-Tools after greedy ran
    time_limit, workers, seed, deterministic_time = check_solve_arguments(
        scenario, engine, time_limit, workers, seed, weights, deterministic_time,
        on_fallback, cache)
    # OR-Tools' first import (about 1 s cold) is paid before the budget starts, and the
    # greedy path never loads it
    preload(engine)
    started = time.perf_counter()
    # no collector pauses, and no model freed, just before the deadline (cancel.quiet)
    with quiet(time_limit):
        problem = scenario if isinstance(scenario, Problem) else compile_scenario(scenario)
        if not compile_vnpu(problem).jobs:
            result = _solve(problem, engine, time_limit, workers, seed, weights,
                            deterministic_time, started, on_fallback, cache)
        else:
            # vNPU nodes serve vNPU jobs only: the two parts are solved apart, in shares
            # of the budget, and their placements joined (the objective is their sum).
            share = VNPU_BUDGET_SHARE if problem.jobs else 0.0
            main_limit = max(time_limit * (1.0 - share), 0.001)
            main_time = (None if deterministic_time is None
                         else max(deterministic_time * (1.0 - share), 0.001))
            main_engine = engine if problem.jobs else "greedy"
            end = started + time_limit
            from heuristics.vnpu import greedy_vnpu

            vnpu_greedy: VnpuPlan | None = None

            def hook(main: Result) -> None:
                # called with the other jobs' greedy answer, then with each better fallback:
                # the vNPU greedy runs once, right after the other jobs' greedy and before
                # any search, so that every job has an answer as early as possible; a caller
                # with its own deadline first gets that answer with the vNPU jobs pending
                nonlocal vnpu_greedy
                if vnpu_greedy is None:
                    if on_fallback is not None:
                        _publish(on_fallback, with_vnpu(problem, replace(main), "greedy", end,
                                                        workers, seed, weights, None,
                                                        greedy=vnpu_pending(problem)))
                    vnpu_greedy = greedy_vnpu(problem, deadline=vnpu_greedy_deadline(problem,
                                                                                       end))
                if on_fallback is not None:
                    _publish(on_fallback, with_vnpu(problem, replace(main), "greedy", end,
                                                    workers, seed, weights, None,
                                                    greedy=vnpu_greedy))
            # the reuse cache keeps the other jobs' answer (reuse checks it without the
            # vNPU jobs); the vNPU part starts from greedy every session
            main_cache = cache if main_engine != "greedy" else None
            result = _solve(problem, main_engine, main_limit, workers, seed, weights,
                            main_time, started, hook, main_cache)
            if main_cache is not None:
                main_cache.remember(result.placement)
            vnpu_time = (None if deterministic_time is None
                         else deterministic_time * (share if problem.jobs else 1.0))
            return _stamp(with_vnpu(problem, result, engine, end, workers, seed, weights,
                                    vnpu_time, greedy=vnpu_greedy), started)
    if cache is not None and engine != "greedy":
        cache.remember(result.placement)
    return result


def _publish(on_fallback: Callable[[Result], None] | None, result: Result) -> None:
    if on_fallback is None:
        return
    try:
        on_fallback(result)
    except Exception:  # the caller's bookkeeping never breaks the solve
        log.exception("the on_fallback callback failed; ignored")


def _solve(scenario: Scenario | Problem, engine: str, time_limit: float, workers: int,
           seed: int, weights: Weights | None, deterministic_time: float | None,
           started: float, on_fallback: Callable[[Result], None] | None = None,
           cache: SolveCache | None = None) -> Result:
    deadline = started + time_limit - RETURN_MARGIN_SECONDS
    problem = scenario if isinstance(scenario, Problem) else compile_scenario(scenario)
    resolved = resolve_weights(problem, weights)
    notes = list(resolved.notes)
    greedy_started = time.perf_counter()
    greedy = greedy_plan(problem)
    greedy_seconds = time.perf_counter() - greedy_started
    greedy_checked = _checked(problem, greedy, "greedy")
    greedy_metrics = evaluate(problem, greedy.as_mapping(), resolved)
    # what checking and scoring an answer costs; CP-SAT's answer must leave that much
    check_cost = time.perf_counter() - greedy_started - greedy_seconds
    greedy_done = time.perf_counter()
    if greedy_done > deadline + RETURN_MARGIN_SECONDS:
        notes.append(f"greedy alone took {greedy_done - started:.3f} s, over the "
                     f"{time_limit:g} s budget")
    if engine == "greedy" or on_fallback is not None:
        greedy_result = _finish(problem, greedy, resolved, engine="greedy",
                                status=Status.GREEDY, started=started, bound=None, seed=seed,
                                notes=notes, greedy_objective=greedy_metrics.objective,
                                metrics=greedy_metrics, checked=greedy_checked)
        _publish(on_fallback, greedy_result)
        if engine == "greedy":
            return greedy_result
    # the fallback: the better of greedy and the origin-first construction
    best, best_metrics, best_engine = greedy, greedy_metrics, "greedy"
    best_checked: PlacementFile | None = greedy_checked
    origin_first_objective: int | None = None
    deterministic = deterministic_time is not None
    # under a wall-clock budget the construction stops at a deadline that leaves time to
    # check and score its answer (twice what greedy's took: the answer may be larger)
    construction_end = None if deterministic else deadline - 2 * check_cost
    candidate: Plan | None = None
    from heuristics.origin_first import origin_first_plan
    from models.errors import OutOfTime

    if _has_origin_first(problem) and (construction_end is None
                                       or time.perf_counter() < construction_end):
        try:
            candidate = origin_first_plan(problem, greedy, construction_end, resolved)
        except OutOfTime:
            notes.append("no time to finish the origin-first construction after greedy")
    elif _has_origin_first(problem):
        notes.append("no time for the origin-first construction after greedy")
    if candidate is not None:
        try:
            candidate_checked = _checked(problem, candidate, "origin-first")
        except InvalidAnswer as exc:
            log.error("%s; ignored", exc)
            notes.append(f"BUG: {exc}; ignored")
        else:
            candidate_metrics = evaluate(problem, candidate.as_mapping(), resolved)
            origin_first_objective = candidate_metrics.objective
            if candidate_metrics.objective > greedy_metrics.objective:
                best, best_metrics, best_engine = candidate, candidate_metrics, "origin-first"
                best_checked = candidate_checked
                notes.append("the origin-first construction beat greedy")
    if cache is not None:
        cache.sessions += 1
        previous = cache.recall(problem, best)
        if previous is not None:
            previous_metrics = evaluate(problem, previous.as_mapping(), resolved)
            # ties go to the previous answer: fewer pods move between sessions, and the
            # search continues from where it stopped
            if previous_metrics.objective >= best_metrics.objective:
                best, best_metrics, best_engine = previous, previous_metrics, cache.engine
                best_checked = None  # recall() checked it; its placement is built anew
                cache.reused += 1
                notes.append("warm start: the previous session's answer, still valid here")
    fallback_status = Status.GREEDY if best_engine == "greedy" else Status.FEASIBLE
    common: dict[str, Any] = {"seed": seed, "greedy_objective": greedy_metrics.objective,
                              "origin_first_objective": origin_first_objective}
    finish_started = time.perf_counter()
    fallback = _finish(problem, best, resolved, engine=best_engine, status=fallback_status,
                       started=started, bound=None, notes=notes, metrics=best_metrics,
                       checked=best_checked, **common)
    finish_cost = time.perf_counter() - finish_started + check_cost
    if best is not greedy:
        _publish(on_fallback, fallback)
    remaining = deadline - time.perf_counter() - finish_cost
    if remaining <= 0.0:
        fallback.notes.append("no time left for CP-SAT after greedy")
        fallback.placement.notes = list(fallback.notes)
        return _stamp(fallback, started)
    # loaded by solve() before the budget started
    from solver.engine import solve_cpsat
    from solver.request import SolveRequest

    models = None if cache is None else cache.models
    if models is not None:
        why = models.new_session(problem)
        if why is not None:
            notes.append(why)
    start: Plan | None = best
    if best_engine == "origin-first" and _full_model_old_start(problem):
        start = None  # the whole-batch model starts from the older construction
    outcome = solve_cpsat(SolveRequest(
        problem, greedy, resolved, time_limit=remaining, workers=workers, seed=seed,
        deterministic_time=deterministic_time, start=start,
        recover_reserve=min(0.2 * remaining, 2 * finish_cost + 0.01), models=models))
    notes.extend(outcome.notes)
    counts = outcome.models
    if models is not None and counts is not None and counts.total:
        notes.append(f"CP-SAT models: {counts.carried} reused from earlier sessions, "
                     f"{counts.within} within this one, {counts.built} built")
    solver_extra: dict[str, Any] = {"solver_wall": outcome.wall_seconds,
                                    "solver_status": outcome.solver_status,
                                    "models": counts,
                                    "solver_deterministic": outcome.deterministic_seconds}

    def fall_back(bound: int | None) -> Result:
        # the fallback answer was assembled before the search: a copy with what the search
        # added (no placement file built again at the end of the budget)
        gap = _gap(best_metrics.objective, bound)
        answer = replace(fallback, bound=bound, gap=gap, notes=list(notes),
                         solver_objective=outcome.objective,
                         solver_wall_seconds=outcome.wall_seconds,
                         solver_status=outcome.solver_status, models=counts,
                         solver_deterministic_seconds=outcome.deterministic_seconds)
        answer.placement = fallback.placement.model_copy(
            update={"bound": bound, "gap": gap, "notes": list(notes)})
        return _stamp(answer, started)

    if outcome.plan is None:
        return fall_back(outcome.bound)
    if not deterministic and time.perf_counter() + finish_cost > deadline + RETURN_MARGIN_SECONDS:
        notes.append("CP-SAT's answer came too late to be checked within the budget")
        return fall_back(outcome.bound)
    # the search may hand back the fallback itself (no neighbourhood improved it): that
    # answer was checked and scored already, and the end of the budget is no time to redo it
    kept = outcome.plan is best
    solver_checked: PlacementFile | None = None
    if not kept:
        try:
            solver_checked = _checked(problem, outcome.plan, "cpsat")
        except InvalidAnswer as exc:
            log.error("%s; returning the fallback answer", exc)
            notes.append(f"BUG: {exc}; returned the {best_engine} answer")
            return fall_back(None)
    solver_metrics = (best_metrics if kept
                      else evaluate(problem, outcome.plan.as_mapping(), resolved))
    if outcome.status is Status.OPTIMAL and solver_metrics.objective != outcome.objective:
        log.error("CP-SAT objective %s differs from evaluate() %s", outcome.objective,
                  solver_metrics.objective)
        notes.append(f"BUG: CP-SAT reported objective {outcome.objective} but the placement "
                     f"evaluates to {solver_metrics.objective}; status lowered to feasible")
        outcome.status = Status.FEASIBLE  # the bound stays valid, optimality is not shown
    elif outcome.objective is not None and solver_metrics.objective > outcome.objective:
        notes.append(f"the post-pass found a better placement than the solver's counts "
                     f"({solver_metrics.objective} > {outcome.objective})")
    bound = outcome.bound
    if bound is not None and max(solver_metrics.objective, best_metrics.objective) > bound:
        # the model's bound does not cover this placement: report no bound rather than a
        # false one
        notes.append(f"the solver's bound {bound} is below a known placement's objective; "
                     "no bound reported")
        bound = None
    if solver_metrics.objective < best_metrics.objective:
        notes.append(f"the solver's answer was worse than the {best_engine} answer; "
                     f"returned the {best_engine} answer")
        return fall_back(bound)
    if (engine == "auto" and solver_metrics.objective == best_metrics.objective
            and outcome.status is not Status.OPTIMAL):
        return fall_back(bound)
    return _finish(problem, outcome.plan, resolved, engine="cpsat", status=outcome.status,
                   started=started, bound=bound, notes=notes, metrics=solver_metrics,
                   solver_objective=outcome.objective,
                   checked=best_checked if kept else solver_checked, **common, **solver_extra)


#: Share of the budget kept for the vNPU part when a scenario has both kinds of job.
VNPU_BUDGET_SHARE = 0.3
#: Seconds per vNPU rank kept at the end of the budget for joining, checking and scoring
#: the vNPU answer (measured: about 11 us per rank on an idle core, twice that and more
#: under load), and the largest share of the time left kept so.
VNPU_FINISH_SECONDS_PER_RANK = 30e-6
VNPU_FINISH_SHARE = 0.6
#: The reason of a vNPU job in an early answer sent before the vNPU greedy finished.
VNPU_PENDING_REASON = ("not placed yet: the vNPU greedy had not finished when this early "
                       "answer was sent")


def vnpu_greedy_deadline(problem: Problem, end: float) -> float:
    """When the vNPU greedy must stop for the answer to be joined, checked and scored by
    ``end`` (time kept per vNPU rank, at most :data:`VNPU_FINISH_SHARE` of what is
    left)."""
    ranks = sum(job.tasks for job in compile_vnpu(problem).jobs)
    left = end - time.perf_counter()
    return end - RETURN_MARGIN_SECONDS - min(VNPU_FINISH_SHARE * max(left, 0.0),
                                             ranks * VNPU_FINISH_SECONDS_PER_RANK)


def vnpu_pending(problem: Problem) -> VnpuPlan:
    """Every vNPU job pending with :data:`VNPU_PENDING_REASON` (a valid answer)."""
    plan = VnpuPlan.empty(compile_vnpu(problem))
    plan.reasons = [VNPU_PENDING_REASON] * len(plan.reasons)
    return plan


def with_vnpu(problem: Problem, result: Result, engine: str, deadline: float, workers: int,
              seed: int, weights: Weights | None, deterministic_time: float | None,
              greedy: VnpuPlan | None = None) -> Result:
    """Add the vNPU jobs to ``result`` (changed in place and returned): greedy (``greedy``
    when given), then (unless ``engine`` is greedy) CP-SAT until ``deadline``
    warm-started from it; the better answer is joined, checked with every other job and
    scored as a whole."""
    resolved = resolve_weights(problem, weights)

    def score(plan: VnpuPlan) -> int:
        return vnpu_objective(problem, plan, resolved.vnpu_placed, resolved.origin_hit,
                              resolved.subhealthy, resolved.vnpu_image)

    if greedy is None:
        from heuristics.vnpu import greedy_vnpu

        greedy = greedy_vnpu(problem, deadline=vnpu_greedy_deadline(problem, deadline))
    greedy_score = score(greedy)
    best, vnpu_status, vnpu_bound = greedy, Status.GREEDY, None
    notes = list(result.notes)
    if greedy.out_of_time:
        late = sum(1 for reason in greedy.reasons if reason == OUT_OF_TIME_REASON)
        notes.append(f"the vNPU greedy ran out of the time budget: {late} vNPU job(s) it "
                     "had not finished are pending")
    remaining = deadline - time.perf_counter() - RETURN_MARGIN_SECONDS
    if engine != "greedy" and remaining > 0.01 and not greedy.out_of_time:
        from solver.model.vnpu import solve_vnpu_cpsat  # loaded by solve() before the budget

        outcome = solve_vnpu_cpsat(problem, resolved, greedy, time_limit=remaining,
                                   workers=workers, seed=seed,
                                   deterministic_time=deterministic_time)
        notes.extend(outcome.notes)
        vnpu_bound = outcome.bound
        if result.solver_deterministic_seconds is not None or not problem.jobs:
            result.solver_deterministic_seconds = ((result.solver_deterministic_seconds or 0.0)
                                                   + outcome.deterministic_seconds)
        if outcome.plan is not None and outcome.objective is not None:
            solver_score = score(outcome.plan)
            if solver_score != outcome.objective:
                notes.append(f"BUG: the vNPU model reported {outcome.objective} but its plan "
                             f"scores {solver_score}; kept the greedy vNPU answer")
            elif solver_score > greedy_score or outcome.status is Status.OPTIMAL:
                best = outcome.plan
                vnpu_status = outcome.status or Status.FEASIBLE
    elif engine != "greedy" and not greedy.out_of_time:
        notes.append("no time left for the vNPU model after the other jobs")
    placement = _joined(problem, result.placement, best)
    violations = check(problem, placement)
    if violations and best is not greedy:
        log.error("vNPU answer invalid: %s; using greedy's", violations[:3])
        notes.append(f"BUG: the vNPU model's answer is invalid ({violations[0]}); "
                     "returned greedy's vNPU answer")
        best, vnpu_status = greedy, Status.GREEDY
        placement = _joined(problem, result.placement, best)
        violations = check(problem, placement)
    if violations:
        raise InvalidAnswer("greedy (vNPU)", violations)
    metrics = evaluate(problem, placement, resolved)
    placement.jobs = _joined(problem, result.placement, best, metrics).jobs
    statuses = {vnpu_status} | ({result.status} if problem.jobs else set())
    status = (Status.OPTIMAL if statuses == {Status.OPTIMAL}
              else Status.GREEDY if statuses == {Status.GREEDY} else Status.FEASIBLE)
    main_bound = result.bound if problem.jobs else 0
    bound = (None if main_bound is None or vnpu_bound is None or status is Status.GREEDY
             else main_bound + vnpu_bound)
    if bound is not None and bound < metrics.objective:
        bound = None
    gap = _gap(metrics.objective, bound)
    notes.append(f"vNPU jobs: {'CP-SAT' if best is not greedy else 'greedy'} answer "
                 f"({sum(1 for n in best.nodes if n is not None)}/{len(best.nodes)} placed)")
    placement.engine = result.engine if problem.jobs else (
        "cpsat" if best is not greedy else "greedy")
    placement.status = status
    placement.objective = metrics.objective
    placement.bound = bound
    placement.gap = gap
    placement.metrics = metrics.to_model()
    placement.notes = notes
    result.placement = placement
    result.metrics = metrics
    result.objective = metrics.objective
    result.status = status
    result.engine = placement.engine
    result.bound = bound
    result.gap = gap
    result.notes = list(notes)  # not the placement's list: a note added later lands once each
    if result.greedy_objective is not None:
        result.greedy_objective += greedy_score
    return result


def _joined(problem: Problem, main: PlacementFile, plan: VnpuPlan,
            metrics: Metrics | None = None) -> PlacementFile:
    """``main`` with the vNPU jobs of ``plan`` appended (a copy)."""
    hits = metrics.per_job_hits if metrics is not None else None
    candidates = metrics.per_job_candidates if metrics is not None else None
    jobs = [job for job in main.jobs if job.name in problem.job_index]
    joined = main.model_copy()
    joined.jobs = jobs + vnpu_job_placements(problem, plan, hits, candidates)
    return joined


def _stamp(result: Result, started: float) -> Result:
    """Refresh the wall time of a result prepared earlier."""
    result.wall_seconds = time.perf_counter() - started
    result.placement.wall_seconds = result.wall_seconds
    return result
