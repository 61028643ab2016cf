"""Partly running A3/850, 950 and multilevel jobs in the CP-SAT model.

Such a job's running ranks never move: they are not variables at all (their nodes are
not free), but they anchor the groups that hold them (:mod:`solver.model.podscope`).  Its
pending ranks are a node-level job of their own (``node_ranks``: one whole free node per
rank, candidates limited to the scope's nodes), and its group tree is kept by

* ``pod_dom[j, li, g, d]``: group ``g`` of level ``li`` without running ranks sits in
  domain ``d`` (exactly one when the job is placed, inside its parent's domain; the
  candidates already carry the anchors and the stage rules);
* per leaf domain, the pending ranks' nodes there equal the pending ranks of the leaf
  groups there: anchored leaf groups (``placed`` × their pending ranks) plus free leaf
  groups (``pod_dom`` × group size).

Inside a leaf domain the ranks of its groups are interchangeable for every hard rule, so
the post-pass (:func:`solver.model.recover.recover_pod_job`) matches them to the
domain's nodes as one pool: hits first, fault ranks off their old nodes when another node
is left.  Hits and fault returns are counted per pool the same way, so CP-SAT's objective
equals ``evaluate()``.  The fragment, reserve and sub-healthy terms see the pending
ranks' nodes through the node-level ``touched`` / ``node_uses`` literals.
"""

from __future__ import annotations

from collections import defaultdict

from ortools.sat.python import cp_model

from models.compiled import Problem
from models.plan import Plan
from solver.model.podscope import PodScope, node_keys
from solver.model.structure import Structure
from solver.model.variables import Assignment, Lin, ModelVariables, Var


def _free_groups(scope: PodScope) -> list[tuple[int, int]]:
    """Groups without running ranks, top level first."""
    return [(li, g) for li in range(len(scope.sizes)) for g in range(scope.groups(li))
            if (li, g) not in scope.fixed]


def _at(mv: ModelVariables, structure: Structure, j: int, g: int,
        d: int) -> Var | None:
    """The literal "leaf group ``g`` of job ``j`` is in leaf domain ``d``" (``placed`` for
    an anchored group there), ``None`` when it cannot be."""
    scope = structure.pod[j]
    if (scope.leaf, g) in scope.fixed:
        return mv.placed[j] if structure.pod_choices[j].anchored_leaf.get(g) == d else None
    return mv.pod_dom.get((j, scope.leaf, g, d))


def add_pod_constraints(model: cp_model.CpModel, problem: Problem, structure: Structure,
                        mv: ModelVariables) -> None:
    """Group choices, leaf pools, hits and fault returns of every modelled partly running
    job (its gang, ``Σ node_ranks = pending ranks × placed``, is the node-level one)."""
    for j, scope in structure.pod.items():
        _job(model, problem, structure, mv, j, scope)


def _job(model: cp_model.CpModel, problem: Problem, structure: Structure,
         mv: ModelVariables, j: int, scope: PodScope) -> None:
    job = problem.jobs[j]
    placed = mv.placed[j]
    choices = structure.pod_choices[j]
    leaf = scope.leaf
    for li, g in _free_groups(scope):
        domains = choices.choices.get((li, g), {})
        if not domains:
            model.add(placed == 0)
            continue
        model.add(sum(mv.pod_dom[(j, li, g, d)] for d in domains) == placed)
        if li == 0:
            continue
        up = g * scope.sizes[li] // scope.sizes[li - 1]
        if (li - 1, up) in scope.fixed:
            continue  # the candidates lie inside the anchored parent's domain
        for d, parent in domains.items():
            above = mv.pod_dom.get((j, li - 1, up, parent))
            if above is None:
                model.add(mv.pod_dom[(j, li, g, d)] == 0)
            else:
                model.add(mv.pod_dom[(j, li, g, d)] <= above)
    # leaf pools: nodes taken in a leaf domain = pending ranks of the groups there
    demand: dict[int, Lin] = defaultdict(Lin)
    for g, d in choices.anchored_leaf.items():
        if d < 0:
            model.add(placed == 0)  # no free node where its running ranks are
            continue
        demand[d].add(placed, scope.pending_in(leaf, g))
    for (li, g), domains in choices.choices.items():
        if li == leaf:
            for d in domains:
                demand[d].add(mv.pod_dom[(j, li, g, d)], scope.sizes[leaf])
    supply: dict[int, Lin] = defaultdict(Lin)
    for n, d in choices.leaf_of.items():
        var = mv.node_ranks.get((j, n))
        if var is not None:
            supply[d].add(var)
    for d in sorted(set(demand) | set(supply)):
        model.add(supply[d].expr() == demand[d].expr())
    # a hit needs its rank's leaf group in the leaf domain of the rank's cached node
    size = scope.sizes[leaf]
    hits_in: dict[int, Lin] = defaultdict(Lin)
    hits_at: dict[int, Lin] = defaultdict(Lin)
    for (jj, r), hit in mv.hit.items():
        if jj != j:
            continue
        n = int(job.origin[r])
        d = choices.leaf_of.get(n, -1)
        there = _at(mv, structure, j, r // size, d)
        if there is None:
            model.add(hit == 0)
            continue
        model.add(hit <= there)
        hits_in[d].add(hit)
        hits_at[n].add(hit)
    # fault returns, per pool (see the module docstring and Constraints.fault_returns)
    for (jj, x), ret in mv.node_fault_return.items():
        if jj != j:
            continue
        d = choices.leaf_of[x]
        left = Lin()  # pool ranks that are not hits and do not avoid x
        avoiders = Lin()  # pool ranks that avoid x
        for g in range(scope.groups(leaf)):
            pend = [r for r in scope.ranks(leaf, g) if scope.pending[r]]
            if not pend:
                continue
            there = _at(mv, structure, j, g, d)
            if there is None:
                continue
            avoid = sum(1 for r in pend if job.fault[r] and int(job.origin[r]) == x)
            left.add(there, len(pend) - avoid)
            avoiders.add(there, avoid)
        left.plus(hits_in[d], -1)
        slots = Lin().add(mv.node_ranks[(j, x)]).plus(hits_at[x], -1)
        model.add(ret >= slots.plus(left, -1).expr())
        model.add(ret <= mv.node_ranks[(j, x)])
        model.add(ret <= avoiders.expr())


def pod_hint(problem: Problem, structure: Structure, mv: ModelVariables, plan: Plan,
             values: Assignment) -> None:
    """Hint the group choices of the modelled partly running jobs placed in ``plan``.

    The node-level part (``node_ranks``, hits, fault returns) is hinted with the other
    node-level jobs.

    Raises
    ------
    KeyError
        A group of ``plan`` sits in a domain the model does not offer it (the caller,
        :func:`solver.model.hints.plan_to_assignment`, raises ``HintError``).
    """
    for j, scope in structure.pod.items():
        nodes = plan.nodes[j]
        if nodes is None:
            continue
        for li, g in _free_groups(scope):
            first = int(nodes[scope.ranks(li, g).start])
            keys = node_keys(problem, scope.kinds, scope.tree, first)
            if keys is None or keys[li] not in structure.domain_of_key:
                raise KeyError(f"job {problem.jobs[j].name}: group {g} of level {li} is on "
                               f"node {problem.node_names[first]}, outside its domains")
            var = mv.pod_dom.get((j, li, g, structure.domain_of_key[keys[li]]))
            if var is None:
                raise KeyError(f"job {problem.jobs[j].name}: group {g} of level {li} sits "
                               f"in {keys[li]}, not one of its candidate domains")
            values[var.index] = 1
