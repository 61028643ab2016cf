"""The time-budgeted ``solve(...)`` facade: one interface over greedy and CP-SAT.

``engine="greedy"`` runs the greedy port.  ``"cpsat"`` and ``"auto"`` run a fallback
chain (:class:`FallbackChain`) whose steps each return a validated, scored
:class:`Candidate`: greedy, then the origin-first construction, then the answer a
stored cluster's previous session left (``cache``); the best of them is the fallback
answer from that moment on.  The last step is CP-SAT in the rest of the budget,
warm-started from the fallback (:meth:`FallbackChain.search`).  The answer, whichever
step produced it, becomes one frozen :class:`Result`, built in one place
(:func:`_assemble`); :attr:`Result.engine` names that step.  Every answer passes the
independent validator before it is returned.

Jobs on vNPU nodes are a sub-solve of their own (:func:`_solve_vnpu`: their greedy, then
their CP-SAT model), in a share of the budget; its answer is joined with the other jobs'
at the end into a new :class:`Result`.

Deadline: the call returns within ``time_limit`` plus a few milliseconds.  CP-SAT runs in
a worker thread that is always joined before the call returns (its search is stopped,
its model building cancelled at checkpoints), so no work started here outlives it.  Only
greedy itself cannot be interrupted; if it alone overruns the budget, the result says so
in its notes.  The vNPU jobs' greedy runs right after the other jobs' greedy and stops at
a deadline of its own (the jobs it did not finish stay pending, with a note).

Why this file is long: it is the one place where the engines' answers meet, and the
chain's steps, the vNPU sub-solve and the result's assembly share the request and the
budget arithmetic; split, each part would need the others' private state.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from os import PathLike
from typing import TYPE_CHECKING, Literal

import numpy as np

from heuristics.families import has_origin_first_jobs
from heuristics.greedy import greedy_plan
from models.check import Violation, check
from models.compiled import Problem, compile_scenario
from models.errors import OutOfTime
from models.limits import check_deterministic_time, check_seed, check_time_limit, check_workers
from models.objective import Metrics, ResolvedWeights, Weights, evaluate, resolve_weights
from models.placement import PlacementFile, Status
from models.plan import Plan, complete_placement, to_placement
from models.scenario import Scenario
from models.vnpu import VnpuPlan, compile_vnpu, vnpu_job_placements, vnpu_objective
from models.vnpu_rules import OUT_OF_TIME_REASON
from solver.model.cancel import quiet

if TYPE_CHECKING:  # imported when used: the greedy path loads neither
    from solver.model.reuse import ModelCounts
    from solver.request import CpsatOutcome
    from solver.reuse import SolveCache

log = logging.getLogger("npu_place")

Engine = Literal["auto", "greedy", "cpsat"]
ENGINES: tuple[str, ...] = ("auto", "greedy", "cpsat")
#: What :attr:`Result.engine` may say: the step of the chain that produced the answer.
#: ``greedy`` (the greedy port), ``origin-first`` (the origin-first construction),
#: ``cpsat`` (the CP-SAT search); the previous session's answer (``cache``) keeps the
#: engine that produced it then, and a note says it was kept.
RESULT_ENGINES: tuple[str, ...] = ("greedy", "origin-first", "cpsat")


class InvalidAnswer(Exception):
    """An engine produced a placement that breaks a hard constraint (always a bug)."""

    def __init__(self, engine: str, violations: list[Violation]) -> None:
        shown = "; ".join(str(v) for v in violations[:5])
        super().__init__(f"{engine} produced an invalid placement: {shown}")
        self.engine = engine
        self.violations = violations


@dataclass(frozen=True)
class Result:
    """The answer of :func:`solve` (immutable; built once, by :func:`_assemble`).

    Attributes
    ----------
    engine
        The step that produced the answer: ``greedy``, ``origin-first`` or ``cpsat``
        (:data:`RESULT_ENGINES`; a kept previous answer keeps its engine).
    status
        ``optimal``, ``feasible`` or ``greedy`` (contract meaning).
    plan
        The node plan of the jobs of ``jobs``; the ``vnpu-jobs`` are in ``placement``
        only (with their chips).
    metrics
        The metrics of the whole answer (vNPU jobs included).
    placement
        The answer as a placement file (its header, notes and metrics are this result's).
    bound
        A proven upper bound on the objective (CP-SAT), else ``None``.
    wall_seconds
        Seconds from the start of the budget to the answer.
    notes
        What happened on the way, in order.
    greedy_objective
        Greedy's objective (``None``: greedy did not run).
    origin_first_objective
        The origin-first construction's objective (``None``: it did not finish).
    solver_objective, solver_status, solver_wall_seconds
        CP-SAT's own objective of its plan, its status name and its wall time (``None``:
        CP-SAT did not run).
    models
        The CP-SAT models the solve reused and built (``None``: CP-SAT did not run).
    solver_deterministic_seconds
        CP-SAT's deterministic time used by the solve, summed over its phases (and the
        vNPU model's); ``None`` when CP-SAT did not run or the amount is not known.
    """

    engine: str
    status: Status
    plan: Plan
    metrics: Metrics
    placement: PlacementFile
    bound: int | None
    wall_seconds: float
    notes: tuple[str, ...] = ()
    greedy_objective: int | None = None
    solver_wall_seconds: float | None = None
    solver_objective: int | None = None
    solver_status: str | None = None
    origin_first_objective: int | None = None
    models: ModelCounts | None = None
    solver_deterministic_seconds: float | None = None

    @property
    def objective(self) -> int:
        """The objective of the answer (``metrics.objective``)."""
        return self.metrics.objective

    @property
    def gap(self) -> float | None:
        """Relative gap ``(bound - objective) / max(1, |bound|)``, else ``None``."""
        return _gap(self.objective, self.bound)

    def with_note(self, note: str) -> Result:
        """A copy of this result with ``note`` added (to its placement's notes too)."""
        notes = (*self.notes, note)
        placement = self.placement.model_copy(update={"notes": list(notes)})
        return replace(self, notes=notes, placement=placement)


@dataclass(frozen=True)
class Request:
    """One call of :func:`solve`, its arguments checked and its budget started.

    A sub-solve (the non-vNPU jobs in their share of the budget) is a derived request
    (``dataclasses.replace``); nothing changes a request once made.
    """

    problem: Problem
    engine: str
    time_limit: float
    workers: int
    seed: int
    weights: Weights | None
    resolved: ResolvedWeights
    deterministic_time: float | None
    started: float
    on_fallback: Callable[[Result], None] | None = None
    cache: SolveCache | None = None

    @property
    def end(self) -> float:
        """When the call must have returned (``time.perf_counter()`` seconds)."""
        return self.started + self.time_limit

    @property
    def deadline(self) -> float:
        """When the engines stop: :attr:`end` less :data:`RETURN_MARGIN_SECONDS`."""
        return self.end - RETURN_MARGIN_SECONDS

    @property
    def deterministic(self) -> bool:
        """Whether CP-SAT's budget is its deterministic time (else the wall clock)."""
        return self.deterministic_time is not None


@dataclass(frozen=True)
class Candidate:
    """A validated, scored answer of one step of the chain.

    Attributes
    ----------
    engine
        The step that produced it (:data:`RESULT_ENGINES`, or a kept answer's engine).
    plan
        Its node plan.
    metrics
        Its metrics (objective included).
    placement
        Its placement file as the validator read it, with the per-job origin hits and
        candidates; :func:`_assemble` only sets the header, notes and metrics.
    """

    engine: str
    plan: Plan
    metrics: Metrics
    placement: PlacementFile
    #: seconds its placement took to build (part of what an answer costs to finish)
    build_seconds: float = 0.0

    @property
    def objective(self) -> int:
        """The candidate's objective."""
        return self.metrics.objective


def _candidate(request: Request, plan: Plan, engine: str, metrics: Metrics,
               checked: PlacementFile | None) -> Candidate:
    """A :class:`Candidate` of ``plan``; ``checked`` is the placement the validator read
    (:func:`_checked`), completed rather than built again."""
    started = time.perf_counter()
    hits, candidates = metrics.per_job_hits, metrics.per_job_candidates
    placement = (to_placement(request.problem, plan, engine=engine, status=Status.GREEDY,
                              seed=request.seed, hits=hits, candidates=candidates)
                 if checked is None else
                 complete_placement(checked, engine=engine, status=Status.GREEDY,
                                    seed=request.seed, hits=hits, candidates=candidates))
    return Candidate(engine, plan, metrics, placement, time.perf_counter() - started)


@dataclass(frozen=True)
class Facts:
    """What the steps measured, carried into the :class:`Result` (see its attributes)."""

    greedy_objective: int | None = None
    origin_first_objective: int | None = None
    solver_wall_seconds: float | None = None
    solver_objective: int | None = None
    solver_status: str | None = None
    models: ModelCounts | None = None
    solver_deterministic_seconds: float | None = None


def _assemble(request: Request, answer: Candidate, *, status: Status, bound: int | None,
              notes: Sequence[str], facts: Facts) -> Result:
    """The one place a :class:`Result` is made: ``answer`` with its status, bound, notes
    and the steps' facts; the placement file's header, notes and metrics are the
    result's."""
    wall = time.perf_counter() - request.started
    objective = answer.metrics.objective
    placement = answer.placement.model_copy(update={
        "engine": answer.engine, "status": Status(status), "wall_seconds": round(wall, 6),
        "objective": int(objective), "bound": None if bound is None else int(bound),
        "gap": _gap(objective, bound), "seed": request.seed,
        "metrics": answer.metrics.to_model(), "notes": list(notes)})
    return Result(
        engine=answer.engine, status=status, plan=answer.plan, metrics=answer.metrics,
        placement=placement, bound=bound, wall_seconds=wall, notes=tuple(notes),
        greedy_objective=facts.greedy_objective,
        solver_wall_seconds=facts.solver_wall_seconds,
        solver_objective=facts.solver_objective, solver_status=facts.solver_status,
        origin_first_objective=facts.origin_first_objective, models=facts.models,
        solver_deterministic_seconds=facts.solver_deterministic_seconds)


def _facts(result: Result) -> Facts:
    """The facts ``result`` carries."""
    return Facts(result.greedy_objective, result.origin_first_objective,
                 result.solver_wall_seconds, result.solver_objective, result.solver_status,
                 result.models, result.solver_deterministic_seconds)


def _gap(objective: int, bound: int | None) -> float | None:
    """The relative gap between ``objective`` and ``bound`` (``None`` without a bound)."""
    return None if bound is None else max(0.0, (bound - objective) / max(1, abs(bound)))


def _checked(problem: Problem, plan: Plan, engine: str) -> PlacementFile:
    """The placement of ``plan`` once the independent validator passed it (raises
    :class:`InvalidAnswer` if broken); :func:`_candidate` completes it instead of
    building the answer's placement again."""
    placement = to_placement(problem, plan, engine=engine, status=Status.GREEDY)
    violations = check(problem, placement, include_vnpu=False)
    if violations:
        raise InvalidAnswer(engine, violations)
    return placement


#: Seconds kept at the end of a budget for returning (result assembly, stack unwinding).
RETURN_MARGIN_SECONDS = 0.005


def _has_origin_first(problem: Problem) -> bool:
    return has_origin_first_jobs(problem)


class FallbackChain:
    """The steps of one solve of the non-vNPU jobs, each returning a :class:`Candidate`:
    :meth:`greedy`, :meth:`origin_first`, :meth:`kept_answer`, then :meth:`search`
    (CP-SAT from the best of them).

    The chain holds the solve's notes, in the order things happened, and what each step
    measured (greedy's objective, the construction's, the cost of checking an answer).
    """

    def __init__(self, request: Request) -> None:
        self.request = request
        self.notes: list[str] = list(request.resolved.notes)
        self.greedy_objective: int | None = None
        self.origin_first_objective: int | None = None
        #: seconds that checking and scoring greedy's answer took: CP-SAT's answer must
        #: leave that much (and the result's assembly) before the deadline
        self.check_cost = 0.0
        #: the origin-first construction's first part (see :meth:`warm_start`)
        self.blocks: Plan | None = None
        #: the plan the construction says a search starts from (see :meth:`warm_start`)
        self.search_start: Plan | None = None
        #: the bound every answer of a large batch carries at least (:meth:`bound_first`)
        self.first_bound: int | None = None

    def greedy(self) -> Candidate:
        """Greedy's answer (always; it cannot be interrupted: a note says if it alone
        overran the budget)."""
        request, problem = self.request, self.request.problem
        greedy_started = time.perf_counter()
        plan = greedy_plan(problem)
        greedy_seconds = time.perf_counter() - greedy_started
        checked = _checked(problem, plan, "greedy")
        metrics = evaluate(problem, plan.as_mapping(), request.resolved)
        self.check_cost = time.perf_counter() - greedy_started - greedy_seconds
        greedy_done = time.perf_counter()
        if greedy_done > request.end:
            self.notes.append(f"greedy alone took {greedy_done - request.started:.3f} s, "
                              f"over the {request.time_limit:g} s budget")
        self.greedy_objective = metrics.objective
        return _candidate(request, plan, "greedy", metrics, checked)

    def bound_first(self) -> None:
        """Compute :attr:`first_bound` on a batch of at least
        :data:`solver.phases.GAP_MIN_NODES` nodes: the sum of achievable hits
        (:func:`solver.phases.hits_bound`, under a millisecond at 65,536 nodes), before
        anything else can use up the budget, so that every answer there has a gap, also
        one given before or without CP-SAT's search (whose own bound, the origin-hit LP's
        or the whole-batch model's, is tighter and replaces it when there is one)."""
        from solver.phases import GAP_MIN_NODES, hits_bound

        problem = self.request.problem
        if problem.num_nodes >= GAP_MIN_NODES:
            self.first_bound = hits_bound(problem, self.request.resolved)

    def _bound(self, answer: Candidate, bound: int | None) -> int | None:
        """The tighter of ``bound`` and :attr:`first_bound` (when it holds for
        ``answer``)."""
        first = self.first_bound
        if first is None or first < answer.objective:
            return bound
        return first if bound is None else min(bound, first)

    def origin_first(self, greedy: Candidate) -> Candidate | None:
        """The origin-first construction from greedy's answer, validated and scored;
        ``None`` when the family has none, time ran out or it broke a rule (a BUG note)."""
        request, problem = self.request, self.request.problem
        if not _has_origin_first(problem):
            return None
        # under a wall-clock budget the construction stops at a deadline that leaves time
        # to check and score its answer (twice what greedy's took: it may be larger)
        end = None if request.deterministic else request.deadline - 2 * self.check_cost
        if end is not None and time.perf_counter() >= end:
            self.notes.append("no time for the origin-first construction after greedy")
            return None
        from heuristics.origin_first import origin_first_parts

        try:
            construction = origin_first_parts(problem, greedy.plan, end, request.resolved)
            self.blocks, self.search_start = construction.blocks, construction.start
            plan = construction.best
        except OutOfTime:
            self.notes.append("no time to finish the origin-first construction after greedy")
            return None
        try:
            checked = _checked(problem, plan, "origin-first")
        except InvalidAnswer as exc:
            log.error("%s; ignored", exc)
            self.notes.append(f"BUG: {exc}; ignored")
            return None
        metrics = evaluate(problem, plan.as_mapping(), request.resolved)
        self.origin_first_objective = metrics.objective
        return _candidate(request, plan, "origin-first", metrics, checked)

    def kept_answer(self, best: Candidate) -> Candidate | None:
        """The previous session's answer (``cache``) when it is still valid here and at
        least as good as ``best`` (ties go to it: fewer pods move between sessions, and
        the search continues from where it stopped); else ``None``."""
        request, cache = self.request, self.request.cache
        if cache is None:
            return None
        previous = cache.recall(request.problem, best.plan)
        if previous is None:
            return None
        metrics = evaluate(request.problem, previous.as_mapping(), request.resolved)
        if metrics.objective < best.objective:
            return None
        cache.kept()
        self.notes.append("warm start: the previous session's answer, still valid here")
        # recall() checked it; its placement is built here
        return _candidate(request, previous, cache.engine, metrics, None)

    def fallback(self, greedy: Candidate) -> Candidate:
        """The best of ``greedy``, :meth:`origin_first` and :meth:`kept_answer`: the answer
        from the moment it is known until the search improves it."""
        best = greedy
        constructed = self.origin_first(greedy)
        if constructed is not None and constructed.objective > best.objective:
            best = constructed
            self.notes.append("the origin-first construction beat greedy")
        kept = self.kept_answer(best)
        return best if kept is None else kept

    def result(self, answer: Candidate, status: Status, bound: int | None,
               search: CpsatOutcome | None = None,
               models: ModelCounts | None = None) -> Result:
        """``answer`` as the chain's :class:`Result`, with the notes so far and what the
        search (``search``) reported."""
        bound = self._bound(answer, bound)
        facts = Facts(self.greedy_objective, self.origin_first_objective)
        if search is not None:
            facts = Facts(self.greedy_objective, self.origin_first_objective,
                          search.wall_seconds, search.objective, search.solver_status,
                          models, search.deterministic_seconds)
        return _assemble(self.request, answer, status=status, bound=bound, notes=self.notes,
                         facts=facts)

    def warm_start(self, greedy: Candidate, best: Candidate) -> tuple[Plan, bool]:
        """The plan CP-SAT's search starts from, chosen here only: the fallback, except
        that the whole-batch search of a small multilevel batch starts from the
        construction's first part (its multilevel jobs as greedy placed them) when that
        beats greedy (:data:`solver.phases.FULL_MODEL_OLD_START`), without running the
        construction again.  The flag says the construction's first part was chosen."""
        from solver.phases import FULL_MODEL_OLD_START, search_mode

        problem = self.request.problem
        if not (best.engine == "origin-first" and FULL_MODEL_OLD_START
                and search_mode(problem) == "full"
                and any(job.rules.in_tree for job in problem.jobs)):
            return self._search_start(greedy, best), False
        blocks = self.blocks
        assert blocks is not None  # the construction finished: best is its answer
        placement = to_placement(problem, blocks, engine="origin-first", status=Status.GREEDY)
        if check(problem, placement, include_vnpu=False):
            log.error("origin-first construction produced an invalid plan; ignored")
            return greedy.plan, False
        if evaluate(problem, blocks.as_mapping(), self.request.resolved).objective <= (
                greedy.objective):
            return greedy.plan, False
        return blocks, True

    def _search_start(self, greedy: Candidate, best: Candidate) -> Plan:
        """``best``'s plan, except when ``best`` is the construction's answer and the
        construction names another plan as the search's start
        (:class:`heuristics.origin_first.Construction`): then that plan when it is valid
        and beats greedy, else greedy's.  ``best`` stays the answer until the search
        beats it, so a longer budget still never answers worse."""
        start = self.search_start
        if best.engine != "origin-first" or start is None or start is best.plan:
            return best.plan
        problem = self.request.problem
        placement = to_placement(problem, start, engine="origin-first", status=Status.GREEDY)
        if check(problem, placement, include_vnpu=False):
            log.error("origin-first construction produced an invalid start; ignored")
            return greedy.plan
        if evaluate(problem, start.as_mapping(), self.request.resolved).objective <= (
                greedy.objective):
            return greedy.plan
        return start

    def search(self, greedy: Candidate, best: Candidate) -> Result:
        """The last step: CP-SAT in the rest of the budget from the warm start; the answer
        is the better of its plan and ``best`` (see :func:`solve` for ties)."""
        request, problem = self.request, self.request.problem
        fallback_status = Status.GREEDY if best.engine == "greedy" else Status.FEASIBLE
        finish_started = time.perf_counter()
        fallback = self.result(best, fallback_status, None)
        # what finishing an answer costs: its placement, the result, checking and scoring
        finish_cost = (time.perf_counter() - finish_started + best.build_seconds
                       + self.check_cost)
        if best is not greedy and request.on_fallback is not None:
            _publish(request.on_fallback, fallback)
        start, older_start = self.warm_start(greedy, best)
        remaining = request.deadline - time.perf_counter() - finish_cost
        if remaining <= 0.0:
            self.notes.append("no time left for CP-SAT after greedy")
            return self.result(best, fallback_status, None)
        # loaded by solve() before the budget started
        from solver.engine import solve_cpsat
        from solver.request import SolveRequest

        models = None if request.cache is None else request.cache.models
        if models is not None:
            why = models.new_session(problem)
            if why is not None:
                self.notes.append(why)
        if older_start:
            self.notes.append("warm start: the origin-first construction beat greedy")
        outcome = solve_cpsat(SolveRequest(
            problem, greedy.plan, request.resolved, time_limit=remaining,
            workers=request.workers, seed=request.seed,
            deterministic_time=request.deterministic_time, warm_start=start,
            recover_reserve=min(0.2 * remaining, 2 * finish_cost + 0.01), models=models))
        notes = self.notes
        notes.extend(outcome.notes)
        counts = outcome.models
        if models is not None and counts is not None and counts.total:
            notes.append(f"CP-SAT models: {counts.carried} reused from earlier sessions, "
                         f"{counts.within} within this one, {counts.built} built")

        def fall_back(bound: int | None) -> Result:
            return self.result(best, fallback_status, bound, outcome, counts)

        if outcome.plan is None:
            return fall_back(outcome.bound)
        if (not request.deterministic
                and time.perf_counter() + finish_cost > request.end):
            notes.append("CP-SAT's answer came too late to be checked within the budget")
            return fall_back(outcome.bound)
        # the search may hand back the fallback itself (no neighbourhood improved it): that
        # answer was checked and scored already, and the end of the budget is no time to
        # redo it
        kept = outcome.plan is best.plan
        solver_checked: PlacementFile | None = None
        if not kept:
            try:
                solver_checked = _checked(problem, outcome.plan, "cpsat")
            except InvalidAnswer as exc:
                log.error("%s; returning the fallback answer", exc)
                notes.append(f"BUG: {exc}; returned the {best.engine} answer")
                return fall_back(None)
        metrics = (best.metrics if kept
                   else evaluate(problem, outcome.plan.as_mapping(), request.resolved))
        status = outcome.status
        if status is Status.OPTIMAL and metrics.objective != outcome.objective:
            log.error("CP-SAT objective %s differs from evaluate() %s", outcome.objective,
                      metrics.objective)
            notes.append(f"BUG: CP-SAT reported objective {outcome.objective} but the "
                         f"placement evaluates to {metrics.objective}; status lowered to "
                         "feasible")
            status = Status.FEASIBLE  # the bound stays valid, optimality is not shown
        elif outcome.objective is not None and metrics.objective > outcome.objective:
            notes.append(f"the post-pass found a better placement than the solver's counts "
                         f"({metrics.objective} > {outcome.objective})")
        bound = outcome.bound
        if bound is not None and max(metrics.objective, best.objective) > bound:
            # the model's bound does not cover this placement: report no bound rather
            # than a false one
            notes.append(f"the solver's bound {bound} is below a known placement's "
                         "objective; not reported")
            bound = None
        if metrics.objective < best.objective:
            notes.append(f"the solver's answer was worse than the {best.engine} answer; "
                         f"returned the {best.engine} answer")
            return fall_back(bound)
        if (request.engine == "auto" and metrics.objective == best.objective
                and status is not Status.OPTIMAL):
            return fall_back(bound)
        answer = (Candidate("cpsat", best.plan, metrics, best.placement) if kept
                  else _candidate(request, outcome.plan, "cpsat", metrics, solver_checked))
        return self.result(answer, status, bound, outcome, counts)


def _solve_jobs(request: Request) -> Result:
    """The non-vNPU jobs of ``request``: the chain's answer.  Greedy's answer is published
    (``on_fallback``) as soon as it exists; it is the answer of engine ``greedy``."""
    chain = FallbackChain(request)
    greedy = chain.greedy()
    if request.engine != "greedy":
        chain.bound_first()
    if request.engine == "greedy" or request.on_fallback is not None:
        first = chain.result(greedy, Status.GREEDY, None)
        if request.on_fallback is not None:
            _publish(request.on_fallback, first)
        if request.engine == "greedy":
            return first
    return chain.search(greedy, chain.fallback(greedy))


def _publish(on_fallback: Callable[[Result], None], result: Result) -> None:
    try:
        on_fallback(result)
    except Exception:  # the caller's bookkeeping never breaks the solve
        log.exception("the on_fallback callback failed; ignored")


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


#: The modules :func:`preload` imports for the engines that search: what a search may
#: import on its way (the origin-first construction and its multilevel passes, and
#: ``numpy.ma``, which ``np.unique`` imports when first called) costs 30-60 ms the first
#: time, inside the budget of a process's first solve when left to then.
PRELOADED = ("solver.engine", "solver.model.vnpu", "heuristics.vnpu", "heuristics.origin_first",
             "heuristics.multilevel.first", "numpy.ma")


def preload(engine: str = "auto") -> None:
    """Import the code :func:`solve` runs for ``engine`` (OR-Tools' first import is about
    1 s cold; the greedy engine needs nothing more than this module).

    :func:`solve` calls it before its budget starts, so that no import counts in the
    budget; the caller still waits for it once.  A process that serves many calls (the
    planning service, a benchmark) may call it when it starts.
    """
    if engine != "greedy":
        for name in PRELOADED:
            importlib.import_module(name)


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
    time_limit, workers, seed, deterministic_time = check_solve_arguments(
        scenario, engine, time_limit, workers, seed, weights, deterministic_time,
        on_fallback, cache)
    # OR-Tools' first import (about 1 s cold) is paid before the budget starts, and the
    # greedy path never loads it
    preload(engine)
    started = time.perf_counter()
    # no collector pauses, and no model freed, just before the deadline (cancel.quiet:
    # the collector's state is restored when the call returns; docs/library.md)
    with quiet(time_limit):
        problem = scenario if isinstance(scenario, Problem) else compile_scenario(scenario)
        request = Request(problem, engine, time_limit, workers, seed, weights,
                          resolve_weights(problem, weights), deterministic_time, started,
                          on_fallback, cache)
        if compile_vnpu(problem).jobs:
            return _solve_with_vnpu(request)
        result = _solve_jobs(request)
        if cache is not None and engine != "greedy":
            cache.remember(result.placement)
        return result


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


@dataclass(frozen=True)
class VnpuAnswer:
    """The vNPU sub-solve's answer: its plan, greedy's, and what the search reported."""

    plan: VnpuPlan
    greedy: VnpuPlan
    greedy_score: int
    status: Status
    bound: int | None
    notes: tuple[str, ...]
    #: CP-SAT's deterministic time of the vNPU model (``None``: it did not run)
    deterministic_seconds: float | None = None


def _vnpu_score(request: Request, plan: VnpuPlan) -> int:
    resolved = request.resolved
    return vnpu_objective(request.problem, plan, resolved.vnpu_placed, resolved.origin_hit,
                          resolved.subhealthy, resolved.vnpu_image)


def _solve_vnpu(request: Request, greedy: VnpuPlan | None) -> VnpuAnswer:
    """The vNPU jobs: their greedy (``greedy`` when it ran already), then, unless the
    engine is greedy, their CP-SAT model until ``request.end`` warm-started from it."""
    problem = request.problem
    if greedy is None:
        from heuristics.vnpu import greedy_vnpu

        greedy = greedy_vnpu(problem, deadline=vnpu_greedy_deadline(problem, request.end))
    greedy_score = _vnpu_score(request, greedy)
    notes: list[str] = []
    if greedy.out_of_time:
        late = sum(1 for reason in greedy.reasons if reason == OUT_OF_TIME_REASON)
        notes.append(f"the vNPU greedy ran out of the time budget: {late} vNPU job(s) it "
                     "had not finished are pending")
    if request.engine == "greedy" or greedy.out_of_time:
        return VnpuAnswer(greedy, greedy, greedy_score, Status.GREEDY, None, tuple(notes))
    remaining = request.end - time.perf_counter() - RETURN_MARGIN_SECONDS
    if remaining <= 0.01:
        notes.append("no time left for the vNPU model after the other jobs")
        return VnpuAnswer(greedy, greedy, greedy_score, Status.GREEDY, None, tuple(notes))
    from solver.model.vnpu import solve_vnpu_cpsat  # loaded by solve() before the budget

    outcome = solve_vnpu_cpsat(problem, request.resolved, greedy, time_limit=remaining,
                               workers=request.workers, seed=request.seed,
                               deterministic_time=request.deterministic_time)
    notes.extend(outcome.notes)
    best, status = greedy, Status.GREEDY
    if outcome.plan is not None and outcome.objective is not None:
        solver_score = _vnpu_score(request, outcome.plan)
        if solver_score != outcome.objective:
            notes.append(f"BUG: the vNPU model reported {outcome.objective} but its plan "
                         f"scores {solver_score}; kept the greedy vNPU answer")
        elif solver_score > greedy_score or outcome.status is Status.OPTIMAL:
            best, status = outcome.plan, outcome.status or Status.FEASIBLE
    return VnpuAnswer(best, greedy, greedy_score, status, outcome.bound, tuple(notes),
                      outcome.deterministic_seconds)


def _combined(request: Request, main: Result, vnpu: VnpuAnswer) -> Result:
    """One answer of the other jobs' (``main``) and the vNPU jobs' (``vnpu``): joined,
    checked with every other job and scored as a whole (a new :class:`Result`)."""
    problem = request.problem
    notes = [*main.notes, *vnpu.notes]
    best, vnpu_status = vnpu.plan, vnpu.status
    placement = _joined(problem, main.placement, best)
    violations = check(problem, placement)
    if violations and best is not vnpu.greedy:
        log.error("vNPU answer invalid: %s; using greedy's", violations[:3])
        notes.append(f"BUG: the vNPU model's answer is invalid ({violations[0]}); "
                     "returned greedy's vNPU answer")
        best, vnpu_status = vnpu.greedy, Status.GREEDY
        placement = _joined(problem, main.placement, best)
        violations = check(problem, placement)
    if violations:
        raise InvalidAnswer("greedy (vNPU)", violations)
    metrics = evaluate(problem, placement, request.resolved)
    placement = placement.model_copy(update={
        "jobs": _joined(problem, main.placement, best, metrics).jobs})
    statuses = {vnpu_status} | ({main.status} if problem.jobs else set())
    status = (Status.OPTIMAL if statuses == {Status.OPTIMAL}
              else Status.GREEDY if statuses == {Status.GREEDY} else Status.FEASIBLE)
    main_bound = main.bound if problem.jobs else 0
    bound = (None if main_bound is None or vnpu.bound is None or status is Status.GREEDY
             else main_bound + vnpu.bound)
    if bound is not None and bound < metrics.objective:
        bound = None
    notes.append(f"vNPU jobs: {'CP-SAT' if best is not vnpu.greedy else 'greedy'} answer "
                 f"({sum(1 for n in best.nodes if n is not None)}/{len(best.nodes)} placed)")
    engine = main.engine if problem.jobs else ("cpsat" if best is not vnpu.greedy
                                               else "greedy")
    facts = _facts(main)
    deterministic = facts.solver_deterministic_seconds
    if vnpu.deterministic_seconds is not None and (deterministic is not None
                                                   or not problem.jobs):
        deterministic = (deterministic or 0.0) + vnpu.deterministic_seconds
    facts = Facts(None if facts.greedy_objective is None
                  else facts.greedy_objective + vnpu.greedy_score,
                  facts.origin_first_objective, facts.solver_wall_seconds,
                  facts.solver_objective, facts.solver_status, facts.models, deterministic)
    return _assemble(request, Candidate(engine, main.plan, metrics, placement),
                     status=status, bound=bound, notes=notes, facts=facts)


def _joined(problem: Problem, main: PlacementFile, plan: VnpuPlan,
            metrics: Metrics | None = None) -> PlacementFile:
    """``main`` with the vNPU jobs of ``plan`` appended (a copy)."""
    hits = metrics.per_job_hits if metrics is not None else None
    candidates = metrics.per_job_candidates if metrics is not None else None
    jobs = [job for job in main.jobs if job.name in problem.job_index]
    joined = main.model_copy()
    joined.jobs = jobs + vnpu_job_placements(problem, plan, hits, candidates)
    return joined


def _solve_with_vnpu(request: Request) -> Result:
    """A problem with vNPU jobs: vNPU nodes serve vNPU jobs only, so the two parts are
    solved apart, in shares of the budget, and their answers joined (the objective is
    their sum).  The vNPU greedy runs once, right after the other jobs' greedy and
    before any search, so that every job has an answer as early as possible; a caller
    with its own deadline first gets that answer with the vNPU jobs pending."""
    problem, engine = request.problem, request.engine
    share = VNPU_BUDGET_SHARE if problem.jobs else 0.0
    greedy: VnpuPlan | None = None

    def hook(main: Result) -> None:
        # called with the other jobs' greedy answer, then with each better fallback
        nonlocal greedy
        on_fallback = request.on_fallback
        greedy_request = replace(request, engine="greedy")
        if greedy is None:
            if on_fallback is not None:
                _publish(on_fallback, _combined(greedy_request, main, _solve_vnpu(
                    greedy_request, vnpu_pending(problem))))
            greedy = _greedy_vnpu(problem, request.end)
        if on_fallback is not None:
            _publish(on_fallback, _combined(greedy_request, main,
                                            _solve_vnpu(greedy_request, greedy)))

    main_engine = engine if problem.jobs else "greedy"
    # the reuse cache keeps the other jobs' answer (reuse checks it without the vNPU
    # jobs); the vNPU part starts from greedy every session
    main_request = replace(
        request, engine=main_engine, time_limit=max(request.time_limit * (1.0 - share), 0.001),
        deterministic_time=(None if request.deterministic_time is None
                            else max(request.deterministic_time * (1.0 - share), 0.001)),
        on_fallback=hook, cache=request.cache if main_engine != "greedy" else None)
    main = _solve_jobs(main_request)
    if main_request.cache is not None:
        main_request.cache.remember(main.placement)
    vnpu_request = replace(
        request, deterministic_time=(None if request.deterministic_time is None
                                     else request.deterministic_time
                                     * (share if problem.jobs else 1.0)))
    return _combined(request, main, _solve_vnpu(vnpu_request, greedy))


def _greedy_vnpu(problem: Problem, end: float) -> VnpuPlan:
    from heuristics.vnpu import greedy_vnpu

    return greedy_vnpu(problem, deadline=vnpu_greedy_deadline(problem, end))
