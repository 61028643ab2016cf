"""Warm start: translate a placement (greedy's) into a value for every model variable."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from models.compiled import Problem
from models.plan import Plan
from models.validation import UB_MEM_RACKS
from solver.model.cancel import checked, checkpoint
from solver.model.podlevel import pod_hint
from solver.model.structure import POOLED_PARENT, JobStructure, Structure, parent_at
from solver.model.variables import Assignment, ModelVariables, leaf_domain_of


class HintError(Exception):
    """The placement cannot be expressed in the model (a bug or an unmodelled case)."""


def plan_to_assignment(
    problem: Problem, structure: Structure, mv: ModelVariables, plan: Plan
) -> Assignment:
    """Values of every variable (auxiliaries included) that encode ``plan``.

    Raises
    ------
    HintError
        When a placed job's layout has no counterpart in the model.
    """
    values: Assignment = {var.index: 0 for var in checked(mv.reg.variables, 4096)}
    plan = relabel_to_candidates(problem, structure, plan)

    def put(key: object, table: dict[Any, Any], value: int) -> None:
        var = table.get(key)
        if var is None:
            if value == 0:
                return
            raise HintError(f"no variable for {key}")
        values[var.index] = value

    for j, js in structure.jobs.items():
        checkpoint()
        nodes = plan.nodes[j]
        if nodes is None:
            continue
        put(j, mv.placed, 1)
        _job_values(problem, structure, mv, js, [int(n) for n in nodes], values, put)
    for j in structure.ordinary:
        checkpoint()
        nodes = plan.nodes[j]
        if nodes is None:
            continue
        job = problem.jobs[j]
        put(j, mv.placed, 1)
        counts = Counter(int(n) for n in job.placed_nodes(nodes))
        for n, k in checked(counts.items()):
            put((j, n), mv.node_ranks, k)
            put((j, n), mv.node_uses, 1)
            if n in mv.touched:
                values[mv.touched[n].index] = 1
        returns: Counter[int] = Counter()
        for r, n in checked(enumerate(nodes), 1024):
            if int(job.origin[r]) != int(n):
                continue
            if job.fault[r]:
                returns[int(n)] += 1
            elif (j, r) in mv.hit:
                values[mv.hit[(j, r)].index] = 1
        for n, k in returns.items():
            put((j, n), mv.node_fault_return, k)
    try:
        pod_hint(problem, structure, mv, plan, values)
    except KeyError as exc:
        raise HintError(str(exc.args[0])) from None
    # a rule can sum hundreds of terms (a job's fragment score): a checkpoint every 64
    for var in checked(mv.reg.variables, 64):
        rule = mv.reg.rules.get(var.index)
        if rule is not None:
            values[var.index] = rule(values)
    return values


def relabel_to_candidates(problem: Problem, structure: Structure, plan: Plan) -> Plan:
    """``plan`` with its node-level jobs moved, inside each cell, onto the nodes the model
    keeps for them.

    The model gives node-level jobs only the first nodes of each cell of interchangeable
    whole free nodes (the last ones for partly running whole-node jobs,
    :func:`solver.model.structure._ordinary_candidates`); a plan built elsewhere (the
    origin-first construction, an earlier session's answer) may use another node of the
    cell.  Such a node is swapped for a node of the same cell that the plan's node-level
    jobs leave unused and that every job on it may take: the same objective, now
    representable.  Whole-node jobs are counted per cell, so their own nodes do not
    matter.  A node that cannot be swapped is left (the hint then fails as before).
    """
    candidates = {j: set(o.nodes) for j, o in structure.ordinary.items()}
    users: dict[int, set[int]] = {}
    for j in structure.ordinary:
        nodes = plan.nodes[j]
        if nodes is not None:
            for n in problem.jobs[j].placed_nodes(nodes).tolist():
                users.setdefault(int(n), set()).add(j)
    mapping: dict[int, int] = {}
    taken = set(users)
    for n, jobs in users.items():
        if all(n in candidates[j] for j in jobs):
            continue
        cell = structure.cell_of.get(n)
        if cell is None:
            continue
        for m in structure.cells[cell].nodes:
            if m not in taken and all(m in candidates[j] for j in jobs):
                mapping[n] = m
                taken.add(m)
                break
    if not mapping:
        return plan
    out = Plan(list(plan.nodes), list(plan.reasons))
    for j in structure.ordinary:
        nodes = out.nodes[j]
        if nodes is None:
            continue
        moved = np.asarray(nodes).copy()
        for r in np.flatnonzero(problem.jobs[j].to_place).tolist():
            moved[r] = mapping.get(int(moved[r]), int(moved[r]))
        out.nodes[j] = moved
    return out


def _job_values(problem: Problem, structure: Structure, mv: ModelVariables, js: JobStructure,
                nodes: list[int], values: Assignment, put: object) -> None:
    j = js.job
    job = problem.jobs[j]
    setter = put  # callable(key, table, value)
    assert callable(setter)
    leaf = js.leaf_level
    domain_of: dict[int, int] = {}
    for gid, group in checked(enumerate(js.groups)):
        first = nodes[group.ranks[0]]
        cell = structure.cell_of.get(first)
        if cell is None:
            raise HintError(f"job {job.name}: node {problem.node_names[first]} is not free")
        try:
            leaf_dom = leaf_domain_of(structure, js.kinds[leaf], cell,
                                      structure.cells[cell].tree)
        except KeyError:  # e.g. a node lacking only a trimmed level's label (greedy uses it)
            raise HintError(f"job {job.name}: node {problem.node_names[first]} is in none of "
                            "the model's domains for this job") from None
        domain_of[gid] = parent_at(structure, js, leaf_dom, group.level)
    if job.ub_memory and job.tasks > 1:
        rack = int(problem.rack[nodes[0]])
        setter((j, rack // UB_MEM_RACKS), mv.ub_domain, 1)
    if js.trees:
        top = domain_of[js.by_level[0][0]]
        tree = int(str(structure.domains[top].key[1]))
        setter((j, tree), mv.tree, 1)
    explicit: set[int] = set()
    anon_counts: Counter[tuple[int, int]] = Counter()
    child_counts: Counter[tuple[int, int]] = Counter()
    for li in range(len(js.sizes)):
        for gid in checked(js.by_level[li]):
            group = js.groups[gid]
            d = domain_of[gid]
            parent_ok = group.parent < 0 or group.parent in explicit
            if d in group.pref_domains and parent_ok:
                explicit.add(gid)
                setter((j, gid, d), mv.explicit, 1)
            elif group.parent >= 0 and group.parent in explicit:
                pooled = structure.pools_windows(j)
                child_counts[(POOLED_PARENT if pooled else group.parent, d)] += 1
            else:
                anon_counts[(li, d)] += 1
    for (li, d), k in anon_counts.items():
        setter((j, li, d), mv.anon_count, k)
    for (pid, d), k in child_counts.items():
        setter((j, pid, d), mv.child_count, k)
    pool: Counter[int] = Counter()
    for gid in checked(js.by_level[leaf], 64):
        group = js.groups[gid]
        outside = [nodes[r] for r in group.ranks if nodes[r] not in structure.cell_of]
        if outside:  # a start built elsewhere (a random or earlier plan): not this model's
            raise HintError(f"job {job.name}: node {problem.node_names[outside[0]]} is in "
                            "none of the model's cells")
        cells = Counter(structure.cell_of[nodes[r]] for r in group.ranks)
        if gid in explicit:
            for c, k in cells.items():
                setter((j, gid, c), mv.cell_take, k)
        else:
            pool.update(cells)
        returned: set[int] = set()
        for r in group.ranks:
            n = nodes[r]
            if int(job.origin[r]) != n:
                continue
            if job.fault[r]:
                returned.add(n)
            elif (j, r) in mv.hit:
                values[mv.hit[(j, r)].index] = 1
        for n in returned:
            setter((j, gid, n), mv.fault_return, 1)
    for c, k in pool.items():
        setter((j, c), mv.pool_take, k)
