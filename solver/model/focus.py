"""Which nodes a large-neighbourhood step keeps (see :mod:`solver.lns`).

A step re-places a few jobs with every other job fixed, on the domains that matter:
the ones the neighbourhood's jobs use now, the ones holding their cached nodes, and a
few roomy ones for slack.  Domains are kept as whole *units*, the jobs' leaf domains
(super pods for A3/850 jobs, racks for 950 jobs, level1 domains for multilevel jobs);
node-level jobs keep their current and cached nodes and a few spares of each class of
nodes.  Every other free node is left out of the step's model: it stays free, so any
answer of the step is a valid placement of the whole problem.  The step's reserve and
fragment terms only see the kept nodes, so they are a proxy; a step is accepted only
when :func:`models.objective.evaluate` of the whole placement improves.

**Lean steps** (batches of more than :data:`LEAN_ABOVE_NODES` nodes): a step's cached
nodes are cells of their own, and an explicitly placed block used to get a variable for
every such cell of its preferred domain, so a step on three 1,024-rank jobs built
15,000-30,000 variables (most of them these) and needed about a second of Python, more
than a 1-s budget leaves after the construction. In a lean step a block placed
explicitly may take, of the single-node cells, only its own ranks' cached nodes and its
current nodes, and a job's anonymous blocks only its own cached and current nodes
(:func:`lean_groups`, :meth:`solver.model.structure.Structure.may_take`); both still
take any number of the counted (interchangeable) nodes of their domains. Every answer of
the smaller model is an answer of the full step model, and the incumbent stays one of
them (its blocks keep their current nodes), so a lean step is still valid and its hint
still representable; what it gives up is a block moving onto a cached node of another
block (explicit) or of another job (anonymous), which earns no hit and takes that node
from its owner.

Two more rules make a lean step of a 950 batch small (at 65,536 nodes the first steps
had 13,000-16,000 variables and took about 0.9 s of CPU each, so a 1-s budget got at
most one).  The explicitly placed super-pod blocks of a 950 job count their anonymous
windows together, one count per rack, instead of one per block and rack (racks hold
eight nodes, so a super pod has 50-120 candidate racks and a job 30-60 explicit blocks;
:data:`solver.model.structure.POOLED_PARENT`): the same solutions, as windows of
different blocks are interchangeable for every rule of the model.  And a node-level 950
job takes, of the single-node cells, only its own current and cached nodes: it gives up
moving onto another job's cached node, which earns nothing and takes the node from its
owner.  Both keep the incumbent a solution.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from models.compiled import UNHEALTHY, JobView, Problem
from models.plan import Plan
from solver.families import solver_family
from solver.model.cancel import checked, checkpoint

#: Roomiest extra units kept per step (slack for blocks that leave their domain).
EXTRA_UNITS = 4
#: Node-level jobs: spare nodes kept per class of nodes (at least; else the step's tasks).
SPARE_PER_CLASS = 4
#: Focused models of batches of more nodes than this are lean (see the module docstring):
#: batches of at most 16,384 nodes build exactly the step models they built before lean
#: steps existed.  (Whether the whole-batch phase runs no longer follows the node count:
#: :data:`solver.phases.LNS_ONLY_PAIRS`.)
LEAN_ABOVE_NODES = 16384

def lean_groups(problem: Problem) -> bool:
    """Whether a focused model of ``problem`` restricts its blocks' single-node cells."""
    return problem.num_nodes > LEAN_ABOVE_NODES


def unit_keys(problem: Problem) -> np.ndarray:
    """An integer unit id per node (``-1``: no unit); units of different kinds differ.

    A unit is the leaf domain of the pending jobs' family: a super pod for A3/850 jobs,
    a rack (within its super pod) for 950 jobs, a level1 domain for multilevel jobs.
    """
    units = np.full(problem.num_nodes, -1, dtype=np.int64)
    leaves = {solver_family(job.family).leaf_domain for job in problem.jobs}
    base = 0
    if "rack" in leaves:
        has = (problem.super_pod >= 0) & (problem.rack >= 0)
        width = int(problem.rack.max(initial=0)) + 1
        units[has] = problem.super_pod[has].astype(np.int64) * width + problem.rack[has]
        base = int(units.max(initial=-1)) + 1
    if "sp" in leaves:
        has = (problem.super_pod >= 0) & (units < 0)
        units[has] = base + problem.super_pod[has].astype(np.int64)
        base = int(units.max(initial=-1)) + 1
    if "ml" in leaves:
        for t, name in enumerate(problem.tree_names):
            view = problem.trees[name]
            mine = view.member & (problem.node_tree == t) & (units < 0)
            if not mine.any():
                continue
            # the level1 domain: the path of label values of levels 1..D
            path = np.zeros(problem.num_nodes, dtype=np.int64)
            for i in range(view.depth):
                width = len(view.level_values[i]) + 1
                path = path * width + (view.level_value[i].astype(np.int64) + 1)
            _, dense = np.unique(path[mine], return_inverse=True)
            units[mine] = base + dense
            base += int(dense.max()) + 1
    return units


def neighbourhood_mask(problem: Problem, plan: Plan, hood: list[int],
                       units: np.ndarray) -> np.ndarray:
    """Nodes kept for a large-neighbourhood step on the jobs ``hood``.

    Parameters
    ----------
    problem
        The compiled scenario.
    plan
        The incumbent; the neighbourhood's current nodes are kept, and every other job's
        nodes count as used when the roomiest extra units are chosen.
    hood
        The jobs the step re-places.
    units
        :func:`unit_keys` of ``problem``.
    """
    keep = np.zeros(problem.num_nodes, dtype=bool)
    keep_units: set[int] = set()
    used = np.zeros(problem.num_nodes, dtype=np.int64)
    # one job at a time, by array: a job of a 65,536-node batch holds thousands of nodes
    for k, nodes in checked(enumerate(plan.nodes), 1):
        if nodes is None or len(nodes) == 0:
            continue
        idx = np.asarray(nodes, dtype=np.int64)
        if k in hood:
            keep[idx] = True
            keep_units.update(_units_of(units, idx))
        else:
            np.add.at(used, problem.jobs[k].placed_nodes(idx), problem.jobs[k].npu_per_task)
    for k in hood:
        checkpoint()
        job = problem.jobs[k]
        cached = job.origin[job.origin >= 0].astype(np.int64)
        keep[cached] = True
        keep_units.update(_units_of(units, cached))
        # a partly running job completes its groups where its running ranks are
        held = job.running[job.running >= 0].astype(np.int64)
        keep_units.update(_units_of(units, held))
    checkpoint()
    left = problem.free - used
    whole = (left == problem.npus) & problem.whole_free & (problem.health != UNHEALTHY)
    # whole free nodes per unit, by counting (a Counter of 60,000 units was most of a
    # 19 ms stretch of a 65,536-node multilevel step): roomiest first, then by unit id
    room = np.bincount(units[whole & (units >= 0)], minlength=int(units.max(initial=-1)) + 1)
    checkpoint()
    ranked = np.flatnonzero(room)
    ranked = ranked[np.lexsort((ranked, -room[ranked]))]
    extra = [u for u in ranked.tolist() if u not in keep_units][:EXTRA_UNITS]
    keep_units.update(extra)
    checkpoint()
    if keep_units:
        keep |= np.isin(units, np.fromiter(keep_units, dtype=np.int64))
    checkpoint()
    # nodes outside any unit (ordinary jobs' nodes): a few spares per class of nodes
    loose = np.flatnonzero((units < 0) & (left > 0) & (problem.health != UNHEALTHY) & ~keep)
    if len(loose):
        order = loose[np.argsort(problem.natural_pos[loose], kind="stable")]
        classes: Counter[tuple[int, int, int]] = Counter()
        cap = max(SPARE_PER_CLASS, _movers(problem, plan, hood))
        for n in checked(order.tolist(), 1024):
            key = (int(left[n]), int(problem.npus[n]), int(problem.health[n]))
            if classes[key] < cap:
                classes[key] += 1
                keep[n] = True
    return keep


def _units_of(units: np.ndarray, nodes: np.ndarray) -> list[int]:
    """The units (:func:`unit_keys`) of ``nodes`` that have one."""
    found = units[nodes]
    kept: list[int] = found[found >= 0].tolist()
    return kept


def _movers(problem: Problem, plan: Plan, hood: list[int]) -> int:
    """Ranks of ``hood`` a step may need new room for.

    A placed job moves only ranks that miss their cached node (onto it, displacing at
    most as many ranks of the others) or sit on a fault node; an unplaced job needs room
    for all its ranks.  Spares beyond that only make the step's model larger: a hood with
    a 1,024-rank job kept over 3,000 nodes and took seconds to build.
    """
    count = 0
    for k in hood:
        nodes = plan.nodes[k]
        if nodes is None:
            count += problem.jobs[k].tasks
            continue
        missed, returned = origin_misses(problem.jobs[k], nodes)
        count += missed + returned
    return count


def origin_misses(job: JobView, nodes: np.ndarray) -> tuple[int, int]:
    """``(missed, returned)`` of a placed job: non-fault ranks with a cached node that
    are not on it, and fault ranks back on their old node."""
    cached = job.origin >= 0
    on_origin = cached & (np.asarray(nodes) == job.origin)
    missed = int((cached & ~job.fault & ~on_origin).sum())
    return missed, int((on_origin & job.fault).sum())
