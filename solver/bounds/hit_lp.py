"""A cheap upper bound on the objective from a small LP over origin hits.

On large 950 batches the whole-batch model's bound stays at "every reachable origin
hit" (``950-n8192-batch11-s0`` at deterministic time 10: 956 of 957), while the LP of
its linear rows, which is tighter, takes half a minute to solve.  Most of what makes
origins unreachable is local: a rack window sits in one rack and a block in one super
pod, and the windows whose origins share a rack do not all fit into its free nodes.
This module states just that, as an LP of a few thousand variables solved by GLOP in a
fraction of a second, and turns its optimum into a bound on the objective:

``Σ job_placed + origin_hit · ⌊LP⌋`` (every job placed, every other term at its best,
0), valid whenever no weight is negative.

The LP (:func:`origin_hit_lp`), for the hard whole-node jobs of the super-pod families
(A3 / 850 / 950) that run no rank yet:

* ``x[w, R] ∈ [0, 1]``: window ``w`` (a 950 rack window; a block of the other
  super-pod families) sits in domain ``R`` (a rack of a super pod; a super pod), one
  variable per domain holding a usable origin of its ranks; ``Σ_R x[w, R] ≤ 1``;
* ``y[b, S]``: the window's block sits in super pod ``S``, ``x[w, R] ≤ y[b, S(R)]``,
  ``Σ_S y[b, S] ≤ 1``;
* ``z[w, n] ≤ x[w, R(n)]``: the window hits origin node ``n``; a node is hit at most
  once over every job (``Σ z[·, n] ≤ 1``);
* capacity per domain and node size: ``Σ size_w · x[w, R] ≤ free whole nodes of R``,
  and ``Σ_{size_w ≥ t} x[w, R] ≤ ⌊free / t⌋`` for every window size ``t`` there (a
  rack of 6 free nodes holds one window of 4, not 1.5).

Every other rank counts on its own: a rank of a soft job (whose windows may spill) or of
a job whose sizes do not divide is a window of one node in its rack; partly running
jobs, node-level jobs and other families count their achievable hits
(:func:`models.objective.achievable_hits`).  Each row holds for every valid placement
(windows and blocks each sit in one domain, whole nodes are used once), so the LP's
optimum bounds the hits of every valid placement; leaving the remaining jobs' node use
out only loosens it.  The search's bound is lowered to this one after the search
(:func:`tighten_bound`).
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from dataclasses import replace

import numpy as np
from ortools.linear_solver import pywraplp

from models.compiled import JobView, Problem
from models.objective import ResolvedWeights, achievable_hits, usable_mask
from models.placement import Status
from solver.request import CpsatOutcome, SolveRequest

log = logging.getLogger("npu_place.cpsat")

#: Families whose hard whole-node jobs get window and block variables.


def _windows(job: JobView) -> tuple[int, int]:
    """``(block, window)`` sizes of a job's LP variables; ``(1, 1)``: rank by rank."""
    if job.soft:
        return 1, 1
    block = job.sp_block
    window = job.rules.window(job)
    if block < 1 or window < 1 or job.tasks % block or block % window:
        return 1, 1
    return block, window


def origin_hit_lp(problem: Problem, time_limit: float = 5.0) -> float | None:
    """The most origin hits of the LP described in the module docstring.

    Returns ``None`` when GLOP does not prove its optimum within ``time_limit`` seconds.
    """
    lp = pywraplp.Solver.CreateSolver("GLOP")
    if lp is None:  # pragma: no cover - GLOP ships with OR-Tools
        return None
    lp.SetTimeLimit(max(1, int(time_limit * 1000)))
    goal = lp.Objective()
    constant = 0
    # (npus, super pod, rack or -1 for the whole super pod) → [(window size, x)]
    load: dict[tuple[int, int, int], list[tuple[int, pywraplp.Variable]]] = defaultdict(list)
    node_hits: dict[int, list[pywraplp.Variable]] = defaultdict(list)
    for job in problem.jobs:
        if (not job.rules.in_super_pod or not job.whole_node or job.tasks <= 1
                or job.partly_running):
            constant += achievable_hits(problem, job)
            continue
        usable = usable_mask(problem, job)
        block, window = _windows(job)
        by_rack = job.rules.in_rack  # windows (and single ranks) sit in one rack
        for b in range(job.tasks // block):
            in_pod: dict[int, pywraplp.Variable] = {}
            for w in range(b * block // window, (b + 1) * block // window):
                origins: dict[tuple[int, int, int], set[int]] = defaultdict(set)
                for r in range(w * window, (w + 1) * window):
                    n = int(job.origin[r])
                    if n < 0 or job.fault[r] or not usable[n]:
                        continue
                    rack = int(problem.rack[n]) if by_rack else -1
                    origins[(job.npu_per_task, int(problem.super_pod[n]), rack)].add(n)
                places = []
                for key, nodes in origins.items():
                    x = lp.NumVar(0.0, 1.0, "")
                    places.append(x)
                    pod = key[1]
                    if pod not in in_pod:
                        in_pod[pod] = lp.NumVar(0.0, 1.0, "")
                    lp.Add(x <= in_pod[pod])
                    load[key].append((window, x))
                    for n in nodes:
                        z = lp.NumVar(0.0, 1.0, "")
                        lp.Add(z <= x)
                        node_hits[n].append(z)
                        goal.SetCoefficient(z, 1.0)
                if len(places) > 1:
                    lp.Add(sum(places) <= 1)
            if len(in_pod) > 1:
                lp.Add(sum(in_pod.values()) <= 1)
    whole = problem.whole_free & (problem.super_pod >= 0)
    free: dict[tuple[int, int, int], int] = defaultdict(int)
    for n in np.flatnonzero(whole).tolist():
        npus, pod, rack = int(problem.npus[n]), int(problem.super_pod[n]), int(problem.rack[n])
        free[(npus, pod, -1)] += 1
        if rack >= 0:
            free[(npus, pod, rack)] += 1
    for key, items in load.items():
        room = free.get(key, 0)
        if sum(size for size, _ in items) > room:
            lp.Add(sum(size * x for size, x in items) <= room)
        for t in sorted({size for size, _ in items}):
            big = [x for size, x in items if size >= t]
            if len(big) > room // t:
                lp.Add(sum(big) <= room // t)
    for zs in node_hits.values():
        if len(zs) > 1:
            lp.Add(sum(zs) <= 1)
    goal.SetMaximization()
    if lp.Solve() != pywraplp.Solver.OPTIMAL:
        return None
    return constant + goal.Value()


def objective_bound(problem: Problem, weights: ResolvedWeights,
                    time_limit: float = 5.0) -> int | None:
    """``Σ job_placed + origin_hit · ⌊origin_hit_lp⌋``: no valid placement scores more.

    ``None`` when a weight is negative (a term's best value is then not 0) or the LP
    was not solved in time.
    """
    penalties = (weights.fault_return, weights.affinity_spill, weights.subhealthy,
                 weights.reserve, weights.fragment)
    if (weights.origin_hit < 0 or min(penalties) < 0
            or any(w < 0 for w in weights.job_placed)):
        return None
    started = time.perf_counter()
    hits = origin_hit_lp(problem, time_limit)
    if hits is None or time.perf_counter() - started > time_limit:
        return None
    # GLOP's optimum may be off by its tolerance; hits are whole
    return int(sum(weights.job_placed)) + weights.origin_hit * math.floor(hits + 1e-6)


#: The origin-hit LP bound (:func:`tighten_bound`) is computed only with this many
#: seconds of the budget left after the search ...
BOUND_MIN_SECONDS = 1.0
#: ... and GLOP gets at most this long (about 0.2 s on 950-n8192-batch11-s0).
BOUND_MAX_SECONDS = 5.0


def tighten_bound(request: SolveRequest, outcome: CpsatOutcome) -> CpsatOutcome:
    """``outcome`` with the search's bound lowered to :func:`objective_bound` when that is
    smaller, once the search of ``request`` is over (recorded in :attr:`CpsatOutcome.lp_bound`).

    Only a bound the search proved is lowered (a run without one keeps none), only for
    batches with a super-pod-family job, and only with at least
    :data:`BOUND_MIN_SECONDS` of the budget left before ``request.search_end`` (always
    under a deterministic budget, whose wall clock is a safety net; a wall-clock search
    uses its budget to the end).  Nothing the search does depends on it.  A new outcome
    is returned; ``outcome`` itself is left as it was.
    """
    if (outcome.bound is None or outcome.status is Status.OPTIMAL
            or outcome.lp_bound is not None):  # computed already (solver.phases, rule 5)
        return outcome
    if not any(job.rules.in_super_pod for job in request.problem.jobs):
        return outcome
    left = request.search_end - time.perf_counter()
    if left < BOUND_MIN_SECONDS:
        return outcome
    found = objective_bound(request.problem, request.weights,
                            time_limit=min(BOUND_MAX_SECONDS, left / 2))
    log.debug("origin-hit LP bound %s, the search's %s", found, outcome.bound)
    bound = found if found is not None and found < outcome.bound else outcome.bound
    return replace(outcome, lp_bound=found, bound=bound)
