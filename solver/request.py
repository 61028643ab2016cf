"""What one CP-SAT solve is asked (:class:`SolveRequest`) and what it answers
(:class:`CpsatOutcome`).

A request holds everything a solve reads: the problem, the plan its models are built
around (:attr:`SolveRequest.anchor`), the resolved weights, the warm start
(:attr:`SolveRequest.warm_start`), the budget (when it started, its wall-clock limit,
its deterministic time, the seconds kept for recovery), the search parameters (workers,
seed), the model cache and the channel that stops the search at the deadline
(:class:`SearchControl`).  It is
immutable: every function of the solve takes the request instead of a long parameter
list, and a phase that runs under a different budget (the whole-batch phase after the
neighbourhoods, with the deterministic time they left) runs on a derived request,
``dataclasses.replace(request, deterministic_time=left)``.

:func:`solver.engine.solve_cpsat` runs a request; the budget runs from the moment the
request was made (:attr:`SolveRequest.started`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import KW_ONLY, dataclass, field

from ortools.sat.python import cp_model

from models.compiled import Problem
from models.objective import ResolvedWeights
from models.placement import Status
from models.plan import Plan
from solver.lns import StepRecord
from solver.model.reuse import ModelCache, ModelCounts


class SearchControl:
    """The channel between a solve's caller and the worker thread that searches.

    The caller stops the search at the deadline (:attr:`stopped`, then ``stop_search``
    on :attr:`solver`); the worker registers each CP-SAT search it starts
    (:meth:`SolveRequest.begin_search`) and publishes every validated improvement of the
    neighbourhood search (:attr:`published`) and the bound computed before it
    (:attr:`bound`), so that a caller that has to give up on the worker still has its
    best answer and its gap.
    """

    def __init__(self) -> None:
        #: orders "solver created" against "stop requested"
        self.lock = threading.Lock()
        #: set by the caller when the search must end
        self.stopped = threading.Event()
        #: the CP-SAT search running now (the last one started)
        self.solver: cp_model.CpSolver | None = None
        #: the best validated answer of the neighbourhood search and its objective
        self.published: tuple[Plan, int] | None = None
        #: the bound on the objective computed before the neighbourhoods (rule 5 of
        #: :mod:`solver.phases`), kept for an answer given without the worker
        self.bound: int | None = None

    def stop(self) -> None:
        """End the search: no new one starts, and the running one stops within
        milliseconds (CP-SAT answers ``stop_search`` between its steps)."""
        with self.lock:
            self.stopped.set()
            if self.solver is not None:
                self.solver.stop_search()


@dataclass(frozen=True)
class SolveRequest:
    """One CP-SAT solve: the problem, its start, its budget and its search parameters.

    Parameters
    ----------
    problem
        The compiled scenario.
    anchor
        The plan the models are built around (greedy's; the whole-batch phase after the
        neighbourhoods uses their answer): soft jobs whose blocks spill are pinned to it,
        and its nodes stay candidates of node-level jobs, so it is always representable.
        Not the warm start (:attr:`warm_start`), which may be another plan.
    weights
        The resolved objective weights.
    time_limit
        Wall-clock budget for building, solving and recovering, from :attr:`started`.
    workers, seed
        CP-SAT search parameters.
    deterministic_time
        Bound the search by CP-SAT's deterministic time (reproducible under any load);
        the wall-clock limit stays as a safety net, and a note says when it was hit.
    fix_to_hint
        Fix every variable to its hinted value (tests use it to show the hint is exact).
    warm_start
        The plan the search starts from, hinted to CP-SAT (the facade gives its fallback
        answer; default: the better of ``anchor`` and its origin-first reconstruction,
        :func:`solver.phases.better_start`, for callers of :func:`solver.engine.solve_cpsat`
        that give none).
    recover_reserve
        Seconds kept at the end of the budget for turning the solution into a plan.
    mode
        ``"lns"`` (large neighbourhoods only, :mod:`solver.lns`), ``"full"`` (one model
        of the whole batch), ``"hybrid"`` (the first, then the second), or ``None``:
        decided by the problem's shape (:func:`solver.phases.search_mode`).
    models
        Built models kept between solves of a stored cluster (:mod:`solver.model.reuse`):
        a model whose build would be identical is taken from it, new ones are added.
        Without it the solve keeps its models in a cache of its own, dropped at its end,
        so a step the search repeats (its last sweep repeats the one before) is not
        built twice.  The outcome counts them (``CpsatOutcome.models``).
    started
        ``time.perf_counter()`` when the budget started (default: when the request was
        made).
    control
        How the caller stops the search, made with the request: a request is one solve
        (:func:`solver.engine.solve_cpsat` stops it at the deadline), and the requests
        derived from it during that solve share it.  Solve again with a new request.
    """

    problem: Problem
    anchor: Plan
    weights: ResolvedWeights
    _: KW_ONLY
    time_limit: float
    workers: int = 1
    seed: int = 0
    deterministic_time: float | None = None
    fix_to_hint: bool = False
    warm_start: Plan | None = None
    recover_reserve: float = 0.0
    mode: str | None = None
    models: ModelCache | None = None
    started: float = field(default_factory=time.perf_counter)
    control: SearchControl = field(default_factory=SearchControl, compare=False, repr=False)

    @property
    def deadline(self) -> float:
        """When the call returns (``time.perf_counter()`` seconds)."""
        return self.started + self.time_limit

    @property
    def search_end(self) -> float:
        """When the search stops, leaving :attr:`recover_reserve` to recover the plan."""
        return self.deadline - self.recover_reserve

    @property
    def deterministic(self) -> bool:
        """Whether the budget is CP-SAT's deterministic time (else the wall clock)."""
        return self.deterministic_time is not None

    def begin_search(self, solver: cp_model.CpSolver, latency: float) -> bool:
        """Make ``solver`` the search the caller stops at the deadline.

        ``False`` (the search is not started) when the solve was stopped already or,
        under a wall-clock budget, when less than twice ``latency`` (the least time a
        search of the model needs, :func:`solver.cpsat.min_search_seconds`) is left
        before :attr:`search_end`.
        """
        with self.control.lock:
            if self.control.stopped.is_set() or (
                    self.deterministic_time is None
                    and time.perf_counter() + 2 * latency >= self.search_end):
                return False
            self.control.solver = solver
            return True


@dataclass(frozen=True)
class CpsatOutcome:
    """What a CP-SAT run produced."""

    plan: Plan | None
    status: Status
    objective: int | None  # CP-SAT's objective of the returned plan
    bound: int | None
    wall_seconds: float
    notes: list[str] = field(default_factory=list)
    hint_objective: int | None = None
    solver_status: str = ""
    num_variables: int = 0
    #: the phases run, in order, each with how it ended (see :mod:`solver.phases`)
    phases: list[str] = field(default_factory=list)
    #: every large-neighbourhood step started, in order
    steps: list[StepRecord] = field(default_factory=list)
    #: the models this run took from its model cache or built (``None``: none counted)
    models: ModelCounts | None = None
    #: :func:`solver.bounds.hit_lp.objective_bound` when it was computed (``bound`` is the
    #: smaller of it and the search's own)
    lp_bound: int | None = None
    #: CP-SAT's deterministic time used, summed over every phase and step (``None``: not
    #: known, e.g. a run abandoned at its deadline); reproducible with one worker and a seed
    deterministic_seconds: float | None = None
