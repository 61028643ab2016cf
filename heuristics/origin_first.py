"""Origin-first construction: a second warm start for the solver (not an upstream strategy).

The faithful greedy ports decide block by block in upstream's order, so a block that
comes first can take the rack or super pod that a later block's ranks ran on.  This
construction instead places the blocks (and 950 rack windows) with the most reachable
origins first, each into the domain holding its origins, and only then fills the rest.
It is used only as an extra CP-SAT hint when it scores better than greedy; the ``greedy``
engine stays a faithful port.

Hard super-pod (A3/850) and 950 jobs without UB memory are re-placed; every other job
keeps greedy's answer.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

from heuristics.state import ClusterState
from models.compiled import SUBHEALTHY, JobView, Problem
from models.plan import Plan
from models.scenario import Family


def _usable(problem: Problem, job: JobView, free: np.ndarray) -> np.ndarray:
    mask = (free == problem.npus) & (problem.npus == job.npu_per_task)
    mask &= problem.health != 2
    mask &= problem.super_pod >= 0
    if job.family is Family.RACK:
        mask &= problem.rack >= 0
    return mask


def _order_nodes(problem: Problem, nodes: list[int], wanted: set[int]) -> list[int]:
    """Nodes nobody prefers first, healthy before sub-healthy, natural order."""
    return sorted(nodes, key=lambda n: (n in wanted, int(problem.health[n] == SUBHEALTHY),
                                        int(problem.natural_pos[n])))


def _place_job(problem: Problem, job: JobView, free: np.ndarray,
               wanted: set[int]) -> np.ndarray | None:
    """Blocks to super pods by reachable origins, then windows to racks, then nodes."""
    usable = _usable(problem, job, free)
    block = job.sp_block
    window = job.tp_block if job.family is Family.RACK else block
    per_window = block // window
    # racks (950) or whole super pods (A3/850) are the "bins" windows go into
    bins: dict[int, list[int]] = defaultdict(list)
    pod_of_bin: dict[int, int] = {}
    for n in np.flatnonzero(usable).tolist():
        key = int(problem.rack[n]) if job.family is Family.RACK else int(problem.super_pod[n])
        key = key * 100003 + int(problem.super_pod[n])  # racks may repeat across pods
        bins[key].append(n)
        pod_of_bin[key] = int(problem.super_pod[n])
    bin_of_node = {n: k for k, nodes in bins.items() for n in nodes}
    room = {k: len(v) for k, v in bins.items()}
    capacity: dict[int, int] = defaultdict(int)  # windows each pod can still take
    for k, left in room.items():
        capacity[pod_of_bin[k]] += left // window
    windows = job.tasks // window
    # origins of each window per bin
    window_bins: list[Counter[int]] = []
    for w in range(windows):
        counts: Counter[int] = Counter()
        for r in range(w * window, (w + 1) * window):
            o = int(job.preferred[r])
            if o >= 0 and usable[o]:
                counts[bin_of_node[o]] += 1
        window_bins.append(counts)
    blocks = job.tasks // block
    potential = []
    for b in range(blocks):
        pods: Counter[int] = Counter()
        for w in range(b * per_window, (b + 1) * per_window):
            for k, c in window_bins[w].items():
                pods[pod_of_bin[k]] += c
        best = min(pods.items(), key=lambda kv: (-kv[1], kv[0])) if pods else (-1, 0)
        potential.append((-best[1], b, best[0]))
    potential.sort()
    pod_of_block: dict[int, int] = {}
    for _, b, pod in potential:
        if pod >= 0 and capacity[pod] >= per_window:
            pod_of_block[b] = pod
            capacity[pod] -= per_window
    for _, b, _ in potential:
        if b in pod_of_block:
            continue
        fits = [p for p, c in capacity.items() if c >= per_window]
        if not fits:
            return None
        pod = min(fits, key=lambda p: (capacity[p], p))
        pod_of_block[b] = pod
        capacity[pod] -= per_window
    # windows to bins: those with origins first (most origins first), then best fit
    bin_of_window: dict[int, int] = {}
    ranked = sorted(
        (-(max(window_bins[w].values()) if window_bins[w] else 0), w) for w in range(windows))
    for score, w in ranked:
        if score == 0:
            break
        pod = pod_of_block[w // per_window]
        options = sorted(((-c, k) for k, c in window_bins[w].items()
                          if pod_of_bin[k] == pod and room[k] >= window))
        if options:
            k = options[0][1]
            bin_of_window[w] = k
            room[k] -= window
    wanted_bins = Counter(k for w in range(windows) if w not in bin_of_window
                          for k in window_bins[w])
    for w in range(windows):
        if w in bin_of_window:
            continue
        pod = pod_of_block[w // per_window]
        fits = [k for k, left in room.items() if pod_of_bin[k] == pod and left >= window]
        if not fits:
            return None
        k = min(fits, key=lambda k: (wanted_bins[k] > 0, room[k], k))
        bin_of_window[w] = k
        room[k] -= window
    # nodes: every window first takes its own origins in its bin, then the rest
    nodes = np.full(job.tasks, -1, dtype=np.int32)
    left_in: dict[int, set[int]] = {k: set(v) for k, v in bins.items()}
    for w in range(windows):
        k = bin_of_window[w]
        for r in range(w * window, (w + 1) * window):
            o = int(job.preferred[r])
            if o >= 0 and o in left_in[k]:
                nodes[r] = o
                left_in[k].discard(o)
    for w in range(windows):
        k = bin_of_window[w]
        ranks = [r for r in range(w * window, (w + 1) * window) if nodes[r] < 0]
        if not ranks:
            continue
        order = _order_nodes(problem, list(left_in[k]), wanted)
        for r in ranks:
            avoid = int(job.origin[r]) if job.fault[r] else -1
            choice = next((n for n in order if n != avoid), None)
            if choice is None:
                choice = next(iter(order), None)
            if choice is None:
                return None
            nodes[r] = choice
            order.remove(choice)
            left_in[k].discard(choice)
    return nodes


def origin_first_plan(problem: Problem, base: Plan) -> Plan:
    """Re-place the hard super-pod and 950 jobs of ``base`` origin-first.

    Jobs of other families, soft jobs and jobs the construction cannot place keep their
    ``base`` answer; the result is checked by the caller before use.
    """
    plan = Plan([None if n is None else n.copy() for n in base.nodes], list(base.reasons))
    state = ClusterState.initial(problem)
    # node-level and other-family jobs keep their places
    redo = [j for j in problem.queue
            if problem.jobs[j].family in (Family.SUPERPOD, Family.RACK)
            and problem.jobs[j].whole_node and not problem.jobs[j].soft
            and not problem.jobs[j].ub_memory]
    for j, nodes in enumerate(plan.nodes):
        if nodes is not None and j not in redo:
            state.commit(nodes, problem.jobs[j].npu_per_task)
    wanted = {int(n) for job in problem.jobs for n in job.preferred if n >= 0}
    for j in redo:
        job = problem.jobs[j]
        placed = _place_job(problem, job, state.free, wanted)
        previous = plan.nodes[j]
        if placed is None:
            if previous is not None and (state.free[previous] == problem.npus[previous]).all():
                placed = previous
            else:
                plan.nodes[j] = None
                plan.reasons[j] = plan.reasons[j] or "not placed by the origin-first pass"
                continue
        plan.nodes[j] = placed
        plan.reasons[j] = None
        state.commit(np.asarray(placed), job.npu_per_task)
    return plan
