"""A combinatorial upper bound on the origin hits of each whole-node job (no model rows).

Every group of a whole-node job sits in one domain of its level, inside its parent's
domain, and a leaf group takes its nodes from its leaf domain only.  So a group's hits in
a domain ``d`` are at most

* leaf group: the origin nodes of its ranks (those with a hit variable) inside ``d``,
  and at most its size;
* upper group: the best assignment of its children to distinct child domains of ``d``,
  a child domain taking at most as many children as it holds whole groups
  (``JobStructure.max_groups``), each child scoring its own bound there;

and 0 in a domain that cannot hold the group.  The job's bound is the best assignment of
its top groups to top-level domains (all in one tree for multilevel jobs).  Assignments
are solved exactly as maximum-weight b-matchings (OR-Tools' min-cost flow).

The LP relaxation of the counted model misses this: it spreads a group fractionally over
its preferred domains and takes the origin node in each, so its bound can count every
origin as a hit (``multilevel-n8192-batch11-d4-s0`` at deterministic time 10: bound at
1,135 of 1,140 candidates).  The bound is applied to the reported bound only
(:func:`hit_bound_reduction`, :func:`combinatorial_bound`); it adds nothing to the model,
so the search follows the same path with or without it.
"""

from __future__ import annotations

from collections import defaultdict

from ortools.graph.python import min_cost_flow

from models.compiled import Problem
from models.objective import ResolvedWeights
from solver.model.built import BuiltModel
from solver.model.cancel import checkpoint
from solver.model.structure import JobStructure, Structure
from solver.model.variables import ModelVariables, leaf_domain_of


def _best_assignment(scores: list[dict[int, int]], capacity: dict[int, int]) -> int:
    """Most total score placing each item in at most one domain, a domain ``d`` taking at
    most ``capacity[d]`` items (items not placed score 0)."""
    domains = sorted({d for row in scores for d in row})
    if not domains:
        return 0
    # quick exact cases: every item's best domain distinct enough
    best = [max(row.values(), default=0) for row in scores]
    used: dict[int, int] = defaultdict(int)
    for row in scores:
        if row:
            used[max(row, key=lambda d: (row[d], -d))] += 1
    if all(used[d] <= capacity.get(d, 0) for d in used):
        return sum(best)
    flow = min_cost_flow.SimpleMinCostFlow()
    source, sink = 0, 1
    item_base = 2
    dom_node = {d: item_base + len(scores) + k for k, d in enumerate(domains)}
    for i, row in enumerate(scores):
        if not row:
            continue
        flow.add_arc_with_capacity_and_unit_cost(source, item_base + i, 1, 0)
        flow.add_arc_with_capacity_and_unit_cost(item_base + i, sink, 1, 0)
        for d, s in row.items():
            if s > 0:
                flow.add_arc_with_capacity_and_unit_cost(item_base + i, dom_node[d], 1, -s)
    for d, node in dom_node.items():
        flow.add_arc_with_capacity_and_unit_cost(node, sink, max(0, capacity.get(d, 0)), 0)
    items = sum(1 for row in scores if row)
    flow.set_node_supply(source, items)
    flow.set_node_supply(sink, -items)
    status = flow.solve()
    if status != flow.OPTIMAL:  # cannot happen (every item can go straight to the sink)
        return sum(best)
    return -int(flow.optimal_cost())


def job_hit_bound(problem: Problem, structure: Structure, mv: ModelVariables,
                  js: JobStructure) -> int:
    """An upper bound on the hits of job ``js.job`` over its hit variables in ``mv``."""
    j = js.job
    job = problem.jobs[j]
    domains = structure.domains
    leaf = js.leaf_level
    cands = [set(c) for c in js.candidates]
    # leaf groups: distinct origin nodes per leaf domain
    score: dict[int, dict[int, int]] = {}  # group id → domain → bound
    for gid in js.by_level[leaf]:
        nodes: dict[int, set[int]] = defaultdict(set)
        for r in js.groups[gid].ranks:
            if (j, r) not in mv.hit:
                continue
            n = int(job.origin[r])
            c = structure.cell_of[n]
            d = leaf_domain_of(structure, js.kinds[leaf], c, structure.cells[c].tree)
            if d in cands[leaf] and js.max_groups.get(d, 0) >= 1:
                nodes[d].add(n)
        size = js.sizes[leaf]
        score[gid] = {d: min(size, len(ns)) for d, ns in nodes.items()}
    for li in range(leaf - 1, -1, -1):
        checkpoint()
        for gid in js.by_level[li]:
            group = js.groups[gid]
            rows = [score[c] for c in group.children]
            # the domains of this level above the children's scoring domains
            ups: dict[int, list[int]] = defaultdict(list)
            for row in rows:
                for d in row:
                    up = domains[d].parent
                    if up in cands[li] and js.max_groups.get(up, 0) >= 1:
                        ups[up].append(d)
            out: dict[int, int] = {}
            for up, inside in ups.items():
                within = set(inside)
                sub = [{d: s for d, s in row.items() if d in within} for row in rows]
                value = _best_assignment(sub, {d: js.max_groups.get(d, 0) for d in within})
                if value > 0:
                    out[up] = value
            score[gid] = out
    tops = [score[g] for g in js.by_level[0]]
    if not js.trees:
        return _best_assignment(tops, {d: js.max_groups.get(d, 0) for d in cands[0]})
    best = 0
    for t in js.trees:
        in_tree = [{d: s for d, s in row.items() if domains[d].key[1] == t} for row in tops]
        best = max(best, _best_assignment(
            in_tree, {d: js.max_groups.get(d, 0) for d in cands[0]}))
    return best


def hit_bound_reduction(problem: Problem, structure: Structure, mv: ModelVariables) -> int:
    """How many origin hits the model's hit variables can never reach together.

    Per whole-node job (partly running ones excepted): its hit variables minus
    :func:`job_hit_bound`.  ``best_possible − W_hit × reduction`` is an upper bound on the
    model's objective.
    """
    per_job: dict[int, int] = defaultdict(int)
    for (j, _r) in mv.hit:
        per_job[j] += 1
    total = 0
    for j, js in structure.jobs.items():
        if j in structure.pod or per_job.get(j, 0) == 0:
            continue
        total += max(0, per_job[j] - job_hit_bound(problem, structure, mv, js))
    return total


def combinatorial_bound(built: BuiltModel, weights: ResolvedWeights) -> int:
    """``best_possible`` less the origin hits no solution of the model reaches
    (:func:`hit_bound_reduction`); adds nothing to the model, so it cannot change the
    search.  Focused models report no bound: their ``best_possible`` is returned."""
    if built.focused or weights.origin_hit <= 0:
        return built.best_possible
    missed = hit_bound_reduction(built.problem, built.structure, built.variables)
    return built.best_possible - weights.origin_hit * missed
