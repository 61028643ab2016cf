"""The phase plan of a CP-SAT solve: which searches run, in what order, on what budget.

The plan
--------
A solve (:func:`solver.engine.solve_cpsat` runs :func:`run_phases` on its
:class:`~solver.request.SolveRequest`) follows five rules:

1. **Which search** depends on the problem's shape only, never on the budget or the
   machine's load (:func:`search_mode`):

   * fewer than :data:`LNS_MIN_NODES` (2,048) nodes, or at most :data:`FULL_MAX_JOBS`
     (1) job: ``full``, one model of the whole batch, which builds fast enough there
     and can prove optimality (a single job is proved in seconds);
   * a whole-batch model of more than :data:`LNS_ONLY_PAIRS` (200,000) (job, cell)
     pairs or more than :data:`LNS_ONLY_FREE_NODES` (16,384) completely free nodes
     (:func:`models.search_size.search_size`, counted from the compiled view without
     building the model): ``lns``, large neighbourhoods only (such a model costs too
     much memory and build time for what its search adds);
   * otherwise ``hybrid``: large neighbourhoods first, then the whole-batch model.

2. **The start** is the caller's warm start, else the better of greedy's plan and its
   origin-first reconstruction (:func:`better_start`; small multilevel batches searched
   ``full`` keep the older construction, :data:`FULL_MODEL_OLD_START`).

3. **Neighbourhoods** (:func:`run_neighbourhoods`, :mod:`solver.lns`) re-solve one job
   and the jobs in its way at a time, every step with the same
   :data:`solver.lns.STEP_DETERMINISTIC_SECONDS` of deterministic time, until a sweep
   improves nothing (``converged``), until they used :data:`LNS_LIMIT_DETERMINISTIC`
   (``capped``; ``hybrid`` under a deterministic budget only) or until the budget runs
   out (``budget``).  When they converge, *wide* steps go on from their answer
   (:func:`solver.lns.wide_hood`: a job with the jobs in the super pods, racks or
   multilevel domains of its missed cached nodes) by the same rules, within the same
   :data:`LNS_LIMIT_DETERMINISTIC`: a converged search otherwise returned with most of a
   short budget unused, since the whole-batch phase needs seconds (A3, 4,096 nodes,
   seed 8803: at 0.24 s of a 1-s budget with 62 % of the 10-s gain; the first wide step
   won the rest, 0.18 s of CPU after the convergence).

4. **The whole-batch phase** (:func:`solver.cpsat.run_whole_batch`) is the whole search
   of ``full``.  In ``hybrid`` it runs only when the neighbourhoods ended by their own
   rule (not by the budget) and at least :data:`FULL_MIN_DETERMINISTIC` deterministic
   seconds (or :data:`FULL_MIN_SECONDS` of wall clock) are left; it is hinted with, and
   keeps, their answer, and gets all the rest of the budget.  When its model could not
   search and the neighbourhoods had been capped, the rest of a wall-clock budget goes
   back to neighbourhoods (:data:`RESUME_LNS_SECONDS`).

5. **The bound.**  Neighbourhoods prove nothing, so a search that starts with them on a
   batch of at least :data:`GAP_MIN_NODES` nodes computes a bound on the objective before
   them (:func:`neighbourhood_bound`: the origin-hit LP when the budget leaves room, else
   the sum of achievable hits) and reports it with its answer, the smaller of it and the
   whole-batch model's own when that phase ran: every such answer has a gap.

The anytime rule: more budget never gives a worse answer
----------------------------------------------------------
The plan's choice and lengths do not depend on the budget; the budget only decides
where the plan is cut.  So for budgets ``T1 < T2`` the run under ``T2`` first does exactly
what the run under ``T1`` did, then goes on from the best answer so far, and every phase
returns the better of its own answer and the one it started from.

* **Neighbourhoods** (narrow, then wide) visit jobs in an order that depends only on
  the incumbent, and every step gets the same deterministic time under every budget,
  deterministic or wall-clock (with the CP-SAT parameters of the budget's kind: clique
  merging is off under a wall clock, whose deadline it ignores;
  :func:`solver.cpsat.solve_step`).  Under a deterministic budget a step starts while
  the time used is below the budget; under a wall-clock budget it starts while the clock
  leaves room to search (the first step without room ends the phase: a smaller step
  after it would be one that a longer budget never reaches), and the step running at
  the deadline is stopped there and offers the best solution it found so far (accepted
  only when better, as every step's).  Whether the narrow steps converged does not
  depend on the budget either, so every budget that reaches the wide steps runs the
  same ones.
* **The whole-batch phase** too gives at least as much under a longer limit only if one
  CP-SAT search with one worker and a fixed seed follows the same path under any limit;
  CP-SAT does not promise it (some of its work limits may scale with the time left), so
  in ``hybrid`` the phase is kept to long budgets (at least
  :data:`LNS_LIMIT_DETERMINISTIC` + :data:`FULL_MIN_DETERMINISTIC`, or 5 s left after
  the neighbourhoods converged).

Every run records its phases (:attr:`CpsatOutcome.phases`) and its steps
(:attr:`CpsatOutcome.steps`: job, neighbourhood, deterministic limit, outcome).

What holds where
~~~~~~~~~~~~~~~~
*Deterministic budget* (``deterministic_time``), one worker: ``answer(D2) >= answer(D1)``
for ``D2 > D1`` exactly, up to the whole-batch phase (tested in
``tests/solver/test_anytime_monotone.py``), independent of machine load.

*Wall-clock budget*, one worker: the run under ``T2`` starts the same steps, with the same
deterministic limits and parameters, as the run under ``T1`` (tested there through the
step log); every step that ``T1`` completed, ``T2`` completes identically, and the step
``T1`` was cutting is the same search that ``T2`` runs further.  So ``answer(T2) >=
answer(T1)`` holds as far as one CP-SAT search cut later is at least as good, which
CP-SAT's sequential search gives but does not promise.  It does not hold when

- the load differs so much between the two runs that the clock cuts ``T2``'s plan
  earlier than ``T1``'s (the plan is the same, where the clock cuts it is not): fewer
  steps, or the same step cut during model building or presolve (nothing from it is
  kept) where ``T1``'s was cut during its search;
- the plan recovered from a cut step's solution scores (by
  :func:`models.objective.evaluate`, which decides acceptance) above the model's
  objective: the post-pass can do that, so a later cut with a better model objective
  can, rarely, be accepted with less;
- the whole-batch phase runs under both budgets: its length is the clock's, and whether
  it runs at all depends on the wall clock left after the neighbourhoods converged;
- the facade's own fallbacks differ: under a short budget the origin-first
  construction may be cut (greedy is then the start), or CP-SAT's answer may come too
  late to be checked (:mod:`solver.facade`).

*Several workers*: they share solutions in a way that depends on timing (under a wall
clock) or on the limit (under a deterministic budget); no rule is promised there.

What holds for every budget: the answer is never worse than the fallback (greedy or the
origin-first construction), passes the validator, and the call returns at its deadline
with no search left running (unless a worker had to be abandoned:
:mod:`solver.engine`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from functools import partial

from heuristics.families import has_origin_first_jobs
from heuristics.origin_first import origin_first_plan
from models.check import check
from models.compiled import Problem
from models.eligibility import achievable_hits
from models.objective import ResolvedWeights, evaluate
from models.placement import Status
from models.plan import Plan, to_placement
from models.search_size import search_size
from solver.bounds.hit_lp import BOUND_MAX_SECONDS, objective_bound
from solver.cpsat import run_whole_batch, solve_step
from solver.explain import fill_reasons
from solver.lns import LnsResult, large_neighbourhood_search
from solver.model.cancel import BuildCancelled, retain
from solver.request import CpsatOutcome, SolveRequest

log = logging.getLogger("npu_place.cpsat")

SEARCH_MODES = ("lns", "hybrid", "full")
#: Problems with fewer nodes always get the full model (it builds fast enough).
LNS_MIN_NODES = 2048
#: Batches whose whole-batch model would hold more than this many (job, cell) pairs
#: (:attr:`models.search_size.SearchSize.pairs`, counted without building it) search by
#: large neighbourhoods only, without the whole-batch phase.  Its model of a 65,536-node
#: multilevel batch (281,000 pairs on seed 7) took the process from 0.7 to 2.6 GB (peak
#: resident memory; deterministic time 10; the goal at that scale is 2 GB), where the
#: neighbourhoods had already converged on most batches of that size.  The largest models
#: the phase built before this limit (16,384-node 950 and ordinary batches: 234,000 and
#: 285,000 variables, 180,000 and 346,000 pairs) built in about 4 s of CPU into less than
#: 0.5 GB; the limit keeps the phase for batches of up to 200,000 pairs at any node count
#: (docs/scale.md, *The search mode follows the model*).
LNS_ONLY_PAIRS = 200_000
#: ... and so do batches with more completely free nodes than this, whatever their
#: pairs: the counted pairs do not predict the phase's memory at 65,536 nodes (an 850
#: batch of 116,000 pairs and 42,015 free nodes, seed 7717, peaked at 2.09 GB at
#: deterministic time 10 with the phase; seed 7's 850 model of that size has 107,000
#: variables and builds into 0.28 GB), while the generated 16,384-node batches
#: (10,000-10,500 free nodes) and 24,576-node ones (15,400-15,700) stay below the limit
#: (docs/scale.md, *The search mode follows the model*).
LNS_ONLY_FREE_NODES = 16384
#: Problems with at most this many jobs always get the full model: a single job's whole
#: model proves it in seconds where neighbourhoods prove nothing (a 512-rank job on
#: 4,608 nodes: proved in about 1 s of search).
FULL_MAX_JOBS = 1
#: Under a deterministic budget the large-neighbourhood phase of a hybrid search ends
#: after this much CP-SAT deterministic time, whatever the budget (under a wall-clock
#: budget it goes on while a sweep improves something).
LNS_LIMIT_DETERMINISTIC = 3.0
#: The whole-batch phase of a hybrid search starts only with at least this much
#: deterministic time left (its building costs seconds of wall clock on large batches,
#: and with 2 left on a3-n4096-batch10-s8 its search ran 40 min of wall clock without
#: returning on a loaded machine: LP solves between time checks) ...
FULL_MIN_DETERMINISTIC = 5.0
#: ... or this many wall-clock seconds left; otherwise the neighbourhoods go on.
FULL_MIN_SECONDS = 5.0
#: A hybrid run whose whole-batch model could not search goes back to large
#: neighbourhoods when at least this much time (seconds) is left.
RESUME_LNS_SECONDS = 0.2
#: The whole-batch search of a batch searched in ``full`` mode (small or single-job
#: batches) with multilevel jobs starts from greedy's answer as the origin-first
#: construction without its multilevel part re-placed it (as before the multilevel part
#: existed), even when the facade's fallback is the full construction: with the full
#: construction as its first solution the search of multilevel-n1024-batch8-d3-s2 at
#: deterministic time 10 ended at 354,090,874 (174 hits) against 354,731,198 (182) from
#: the older start (the construction had 353,372,917).  The answer is still never worse
#: than the fallback.  Large batches (``hybrid``) start their neighbourhoods from the
#: full construction (multilevel-n8192-batch11-d4-s0: 1,018 hits against 679).
FULL_MODEL_OLD_START = True
#: Searches that start with neighbourhoods on batches of at least this many nodes report
#: a bound, and so a gap, with every answer (rule 5: :func:`neighbourhood_bound`).
GAP_MIN_NODES = 16384
#: The origin-hit LP bound is computed before the neighbourhoods only with at least this
#: many wall-clock seconds before the search's end (always under a deterministic budget);
#: otherwise the bound is the cheaper sum of achievable hits.  Kept below what any step
#: needs, so that whether the LP runs does not decide which steps a budget gets: every
#: budget that reaches a step paid for the LP first (a shift of the same plan).
LP_BOUND_MIN_SECONDS = 0.05
#: ... and GLOP then gets at most this share of the time left.
LP_BOUND_SHARE = 0.25


def search_mode(problem: Problem) -> str:
    """``"hybrid"``, ``"full"`` or ``"lns"``: how ``problem`` is searched (rule 1 of the
    module docstring).

    Chosen by the problem's shape only: problems below :data:`LNS_MIN_NODES` nodes and
    problems of at most :data:`FULL_MAX_JOBS` jobs get one model of the whole batch
    (``full``), which builds fast enough there or proves a single job quickly; batches
    whose whole-batch model would hold more than :data:`LNS_ONLY_PAIRS` (job, cell) pairs
    or :data:`LNS_ONLY_FREE_NODES` completely free nodes search by large neighbourhoods
    only (``lns``: what the model would cost, counted by
    :func:`models.search_size.search_size`, not the node count: at 16,384 nodes an A3
    batch's model can be less than a quarter of an ordinary batch's); the others by large
    neighbourhoods first, then the whole-batch model (``hybrid``).

    The budget is deliberately no input (it was an ignored argument before): the anytime
    rule needs the plan of a longer budget to begin with the plan of a shorter one, which a
    budget-dependent choice breaks (a 1-s ``lns`` plan of uncapped steps is not the start
    of a 10-s ``hybrid`` plan, whose steps stop at :data:`LNS_LIMIT_DETERMINISTIC`).  The
    budget decides only whether the whole-batch phase of ``hybrid`` runs
    (:data:`FULL_MIN_DETERMINISTIC`, :data:`FULL_MIN_SECONDS`), and below that every
    ``hybrid`` run is the ``lns`` run.  What makes short budgets weak on large batches is
    the cost of the first steps, not this choice (docs/scale.md, *The 1-s answer*).
    """
    if (problem.num_nodes < LNS_MIN_NODES or len(problem.jobs) <= FULL_MAX_JOBS):
        return "full"
    size = search_size(problem)
    if size.pairs > LNS_ONLY_PAIRS or size.free_nodes > LNS_ONLY_FREE_NODES:
        return "lns"
    return "hybrid"


def better_start(problem: Problem, hint: Plan, weights: ResolvedWeights,
                 multilevel: bool = True) -> Plan:
    """The better of ``hint`` and its origin-first reconstruction (validated).

    A hint that is not a valid placement itself (a caller's own warm start) is returned
    as it is: the reconstruction builds on the hint's other jobs.  ``multilevel`` off
    leaves the multilevel jobs as the hint has them (see :data:`FULL_MODEL_OLD_START`).
    """
    if not has_origin_first_jobs(problem):
        return hint
    if check(problem, to_placement(problem, hint, engine="hint", status=Status.GREEDY),
             include_vnpu=False):
        return hint
    candidate = origin_first_plan(problem, hint, weights=weights, multilevel=multilevel,
                                  search_start=True)
    placement = to_placement(problem, candidate, engine="origin-first", status=Status.GREEDY)
    if check(problem, placement, include_vnpu=False):
        log.error("origin-first construction produced an invalid plan; ignored")
        return hint
    if evaluate(problem, candidate.as_mapping(), weights).objective > evaluate(
            problem, hint.as_mapping(), weights).objective:
        return candidate
    return hint


def run_phases(request: SolveRequest) -> CpsatOutcome:
    """Run the plan of the module docstring for ``request`` (its ``mode`` decided, its
    model cache set); runs in the worker thread of :func:`solver.engine.solve_cpsat`.

    A search that starts with neighbourhoods on a batch of at least
    :data:`GAP_MIN_NODES` nodes gets its bound first (:func:`neighbourhood_bound`, rule 5
    of the module docstring): the neighbourhoods prove nothing, and under a wall-clock
    budget they use it to the end, so the bound cannot wait until after them.
    """
    bound: int | None = None
    if request.mode in ("lns", "hybrid") and request.problem.num_nodes >= GAP_MIN_NODES:
        bound = neighbourhood_bound(request)
        request.control.bound = bound  # an answer given at the deadline carries it too
    outcome = _run_phases(request)
    if bound is None:
        return outcome
    tighter = bound if outcome.bound is None else min(bound, outcome.bound)
    return replace(outcome, bound=tighter, lp_bound=bound)


def neighbourhood_bound(request: SolveRequest) -> int | None:
    """An upper bound on the objective of every valid placement of ``request.problem``.

    The origin-hit LP (:func:`solver.bounds.hit_lp.objective_bound`: at most 0.13 s of
    CPU at 65,536 nodes, every family) when the budget leaves it room (a deterministic
    budget, or at least :data:`LP_BOUND_MIN_SECONDS` of wall clock before the search's
    end), else ``Σ job_placed + origin_hit · Σ achievable hits``
    (:func:`hits_bound`), which costs milliseconds and is looser.  ``None`` when a
    weight is negative (a term's best value is then not 0).
    """
    problem, weights = request.problem, request.weights
    cheap = hits_bound(problem, weights)
    if cheap is None:
        return None
    left = request.search_end - time.perf_counter()
    if request.deterministic or left >= LP_BOUND_MIN_SECONDS:
        found = objective_bound(problem, weights,
                                time_limit=min(BOUND_MAX_SECONDS, LP_BOUND_SHARE * left))
        if found is not None and found < cheap:
            return found
    return cheap


def hits_bound(problem: Problem, weights: ResolvedWeights) -> int | None:
    """``Σ job_placed + origin_hit · Σ achievable hits``: every job placed, every origin
    candidate whose cached node is usable hit, every penalty at 0 (``None`` when a weight
    is negative)."""
    penalties = (weights.fault_return, weights.affinity_spill, weights.subhealthy,
                 weights.reserve, weights.fragment)
    if (weights.origin_hit < 0 or min(penalties) < 0
            or any(w < 0 for w in weights.job_placed)):
        return None
    hits = sum(achievable_hits(problem, job) for job in problem.jobs)
    return int(sum(weights.job_placed)) + weights.origin_hit * hits


def _run_phases(request: SolveRequest) -> CpsatOutcome:
    """The plan of the module docstring, without the bound of rule 5."""
    notes: list[str] = []
    start = request.warm_start
    if start is None:  # rule 2
        start = better_start(request.problem, request.anchor, request.weights,
                             multilevel=not (FULL_MODEL_OLD_START and request.mode == "full"))
        if start is not request.anchor:
            notes.append("warm start: the origin-first construction beat greedy")
    if request.mode == "full":  # rule 4: the whole search
        return run_whole_batch(request, start, notes)
    # rule 3.  Under a wall-clock budget the neighbourhoods go on while they improve: a
    # capped phase handed a 10 s budget's rest to a whole-batch model that, under load,
    # found less than a 5 s budget's neighbourhoods did
    limit = LNS_LIMIT_DETERMINISTIC if request.mode == "hybrid" and request.deterministic else None
    first, searched = run_neighbourhoods(request, start, notes, limit)
    if searched.stopped_by == "converged":  # rule 3: then the wide steps
        first, searched = _widen(request, first, searched, limit)
    assert first.plan is not None
    if request.mode == "lns" or searched.stopped_by == "budget":
        return first
    used = first.deterministic_seconds or 0.0
    # rule 4 in hybrid: only when the neighbourhoods ended by their own rule (never by
    # the budget) and enough is left, both decided the same way under every budget that
    # gets this far; it starts from their answer, which stays the fallback
    if request.deterministic_time is not None:
        left = request.deterministic_time - used
        enough = left >= FULL_MIN_DETERMINISTIC
    else:
        left = request.search_end - time.perf_counter()
        enough = left >= FULL_MIN_SECONDS
    if not enough:
        phase = (f"whole batch: not run ({left:.2f} "
                 f"{'deterministic ' if request.deterministic else ''}s left)")
        log.debug("phase %s", phase)
        return replace(first, phases=[*first.phases, phase])
    # the whole-batch model is built around the incumbent, so it stays representable
    whole_batch = replace(request, anchor=first.plan,
                          deterministic_time=left if request.deterministic else None)
    full_notes = list(first.notes)
    try:
        outcome = run_whole_batch(whole_batch, first.plan, full_notes)
    except BuildCancelled as exc:
        retain(exc)
        phase = "whole batch: building cancelled at the deadline"
        log.debug("phase %s", phase)
        return replace(first, notes=[*full_notes, "the whole-batch model was not ready "
                                     "within the budget; the large-neighbourhood answer stands"],
                       phases=[*first.phases, phase],
                       wall_seconds=time.perf_counter() - request.started)
    outcome = replace(outcome, phases=[*first.phases, *outcome.phases], steps=first.steps,
                      deterministic_seconds=_det_sum(first.deterministic_seconds,
                                                     outcome.deterministic_seconds))
    if (outcome.plan is None and searched.stopped_by == "capped"
            and time.perf_counter() + RESUME_LNS_SECONDS < request.search_end):
        # the whole-batch model could not search: the rest of the budget goes back to
        # large neighbourhoods (by wall clock only: a deterministic run gets here only
        # when its safety net cut the model).  Not after neighbourhoods that converged
        # (every wall-clock run): they would repeat their last sweep, step for step.
        again, _ = run_neighbourhoods(replace(request, deterministic_time=None), first.plan,
                                      [], None)
        return replace(again, notes=[*outcome.notes, *again.notes],
                       phases=[*outcome.phases, *again.phases],
                       steps=[*outcome.steps, *again.steps],
                       deterministic_seconds=_det_sum(outcome.deterministic_seconds,
                                                      again.deterministic_seconds))
    if outcome.plan is None or (first.objective is not None and evaluate(
            request.problem, outcome.plan.as_mapping(), request.weights).objective
                                < first.objective):
        phases = [*outcome.phases[:-1], outcome.phases[-1] + ", the neighbourhoods' answer kept"]
        log.debug("phase %s", phases[-1])
        return replace(first, notes=outcome.notes, phases=phases,
                       deterministic_seconds=outcome.deterministic_seconds,
                       wall_seconds=time.perf_counter() - request.started)
    return outcome


def _widen(request: SolveRequest, first: CpsatOutcome, narrow: LnsResult,
           limit: float | None) -> tuple[CpsatOutcome, LnsResult]:
    """Wide steps (:func:`solver.lns.wide_hood`) from the answer ``first`` of narrow
    neighbourhoods that converged (``narrow``), within what they left of the budget and
    of ``limit``; the outcome of both, one after the other, and the wide search's own
    result (whose ``stopped_by`` says how the neighbourhoods ended).
    """
    assert first.plan is not None
    used = narrow.deterministic_time
    rest = replace(request, deterministic_time=None if request.deterministic_time is None
                   else max(0.0, request.deterministic_time - used))
    own: list[str] = []
    wide, searched = run_neighbourhoods(rest, first.plan, own,
                                        None if limit is None else max(0.0, limit - used),
                                        wide=True)
    # the search's count of its steps, named as the wide steps' (none when no job had a
    # wide step: the answer then is the narrow one, notes included)
    prefix = "large-neighbourhood search:"
    notes = [*first.notes, *(f"wide steps:{note[len(prefix):]}" if note.startswith(prefix)
                             else note for note in own
                             if searched.steps or not note.startswith(prefix))]
    # the wide search starts from first.plan and accepts improvements only
    return replace(wide, notes=notes, phases=[*first.phases, *wide.phases],
                   steps=[*first.steps, *wide.steps],
                   deterministic_seconds=_det_sum(first.deterministic_seconds,
                                                  wide.deterministic_seconds)), searched


def _det_sum(a: float | None, b: float | None) -> float | None:
    """The deterministic time of two phases run one after the other (``None``: unknown)."""
    return None if a is None or b is None else a + b


def run_neighbourhoods(request: SolveRequest, start: Plan, notes: list[str],
                       limit: float | None, *, wide: bool = False
                       ) -> tuple[CpsatOutcome, LnsResult]:
    """Large-neighbourhood search (:mod:`solver.lns`) from ``start``, each step solved by
    :func:`solver.cpsat.solve_step`; rule 3 of the module docstring.

    ``limit`` caps the search and ``wide`` makes its steps wide (see
    :func:`solver.lns.large_neighbourhood_search`); the
    search's own result is returned next to the outcome, which carries ``notes`` with the
    search's own.  Every accepted improvement is published to ``request.control``.
    """
    problem = request.problem
    control = request.control

    def publish(plan: Plan, objective: int) -> None:
        control.published = (plan, objective)

    result = large_neighbourhood_search(
        problem, start, request.weights, search_end=request.search_end,
        deterministic_time=request.deterministic_time, solve_step=partial(solve_step, request),
        stopped=control.stopped, publish=publish, limit=limit, wide=wide)
    notes.extend(result.notes)
    if (request.deterministic_time is not None
            and result.deterministic_time < request.deterministic_time
            and time.perf_counter() >= request.search_end):
        notes.append("the wall-clock limit stopped the large-neighbourhood search before its "
                      "deterministic time: this answer depends on machine load")
    plan = fill_reasons(problem, result.plan)
    phase = (f"{'wide ' if wide else ''}neighbourhoods: {result.stopped_by}, {result.steps} steps, "
             f"{result.improved_steps} improved, {result.deterministic_time:.3f} "
             f"deterministic s, objective {result.objective}")
    log.debug("phase %s", phase)
    return CpsatOutcome(plan, Status.FEASIBLE, result.objective, None,
                        time.perf_counter() - request.started, notes, None, "LNS",
                        phases=[phase], steps=list(result.log),
                        deterministic_seconds=result.deterministic_time), result
