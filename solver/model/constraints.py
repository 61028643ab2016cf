"""Hard constraints of the counted model, one method per rule family."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from ortools.sat.python import cp_model

from models.compiled import UNHEALTHY, Problem
from models.validation import UB_MEM_RACKS
from solver.model.cancel import checked, checkpoint
from solver.model.podlevel import add_pod_constraints
from solver.model.structure import (
    POOLED_PARENT,
    JobStructure,
    Structure,
    is_node_job,
    parent_at,
    placed_count,
)
from solver.model.variables import (
    Lin,
    ModelVariables,
    cell_usage,
    group_count,
    leaf_domain_of,
)


class Constraints:
    """Adds every hard constraint of the contract to the model.

    Parameters
    ----------
    model
        The CP-SAT model.
    problem
        The compiled scenario.
    structure
        Cells, domains and group trees.
    mv
        The model's variables.
    pinned_use
        Chips per node already used by pinned jobs.
    """

    def __init__(self, model: cp_model.CpModel, problem: Problem, structure: Structure,
                 mv: ModelVariables, pinned_use: np.ndarray) -> None:
        self.model = model
        self.problem = problem
        self.structure = structure
        self.mv = mv
        self.pinned_use = pinned_use

    def add_all(self) -> None:
        """Add every rule family (not :meth:`explicit_take_links`: see there)."""
        for j, js in self.structure.jobs.items():
            self.gang_and_blocks(j, js)
            self.leaf_cells(j, js)
            self.domain_capacity_cuts(j, js)
            self.ub_memory(j, js)
        self.cell_capacity()
        self.aggregate_capacity()
        self.node_level_jobs()
        self.origin_hits()
        self.fault_returns()
        add_pod_constraints(self.model, self.problem, self.structure, self.mv)

    # ------------------------------------------------------------------ structure
    def gang_and_blocks(self, j: int, js: JobStructure) -> None:
        """Gang, super-pod blocks, rack windows and multilevel nesting of one job.

        Every group sits in exactly one domain of its level, inside its parent's domain;
        the job's top-level groups are all placed or none (``placed[j]``).
        """
        mv = self.mv
        model = self.model
        placed = mv.placed[j]
        top_groups = js.by_level[0]
        total = Lin()
        for gid in top_groups:
            group = js.groups[gid]
            chosen = [mv.explicit[(j, gid, d)] for d in group.pref_domains]
            if chosen:
                model.add(sum(chosen) <= placed)
                for var in chosen:
                    total.add(var)
        for d in js.candidates[0]:
            total.add(mv.anon_count[(j, 0, d)])
        model.add(total.expr() == len(top_groups) * placed)
        if js.trees:
            trees = [mv.tree[(j, t)] for t in js.trees]
            model.add(sum(trees) == placed)
            for t in js.trees:
                per_tree = Lin()
                for d in js.candidates[0]:
                    if self.structure.domains[d].key[1] != t:
                        continue
                    per_tree.add(mv.anon_count[(j, 0, d)])
                    for gid in top_groups:
                        top_var = mv.explicit.get((j, gid, d))
                        if top_var is not None:
                            per_tree.add(top_var)
                model.add(per_tree.expr() == len(top_groups) * mv.tree[(j, t)])
        domains = self.structure.domains
        for li in range(1, len(js.sizes)):
            cands = set(js.candidates[li])
            ratio = js.sizes[li - 1] // js.sizes[li]
            # explicit child only inside its explicit parent's domain, in one domain
            for gid in js.by_level[li]:
                group = js.groups[gid]
                if len(group.pref_domains) > 1:
                    model.add(sum(mv.explicit[(j, gid, d)] for d in group.pref_domains) <= 1)
                for d in group.pref_domains:
                    up = parent_at(self.structure, js, d, li - 1)
                    parent_var = mv.explicit.get((j, group.parent, up))
                    if parent_var is None:
                        model.add(mv.explicit[(j, gid, d)] == 0)
                    else:
                        model.add(mv.explicit[(j, gid, d)] <= parent_var)
            # children of an explicit parent: explicit ones plus counted anonymous ones
            pooled: dict[int, tuple[Lin, Lin]] = {}  # big → (children inside, needed)
            for pid in js.by_level[li - 1]:
                parent = js.groups[pid]
                for big in parent.pref_domains:
                    if self.structure.pools_windows(j):
                        inside, needed = pooled.setdefault(big, (Lin(), Lin()))
                    else:
                        inside, needed = Lin(), Lin()
                    for child_dom in domains[big].children:
                        if child_dom not in cands:
                            continue
                        counted = mv.child_count.get((j, pid, child_dom))
                        if counted is not None:
                            inside.add(counted)
                        for cid in parent.children:
                            child_var = mv.explicit.get((j, cid, child_dom))
                            if child_var is not None:
                                inside.add(child_var)
                    if self.structure.pools_windows(j):
                        needed.add(mv.explicit[(j, pid, big)], len(parent.children))
                    else:
                        model.add(inside.expr()
                                  == len(parent.children) * mv.explicit[(j, pid, big)])
            # pooled (lean 950 steps): the blocks explicit in a super pod together, with
            # one count of anonymous windows per rack (structure.POOLED_PARENT)
            for big, (inside, needed) in sorted(pooled.items()):
                for child_dom in domains[big].children:
                    counted = mv.child_count.get((j, POOLED_PARENT, child_dom))
                    if child_dom in cands and counted is not None:
                        inside.add(counted)
                model.add(inside.expr() == needed.expr())
            # children of anonymous parents are anonymous, counted per child domain; the
            # anonymous parents in a domain are the counted ones plus the counted
            # (non-explicit) children of explicit grandparents
            for big in js.candidates[li - 1]:
                inside = Lin()
                for child_dom in domains[big].children:
                    if child_dom in cands:
                        inside.add(mv.anon_count[(j, li, child_dom)])
                parents = Lin().add(mv.anon_count[(j, li - 1, big)])
                if li >= 2:
                    for gid in js.by_level[li - 2]:
                        counted = mv.child_count.get((j, gid, big))
                        if counted is not None:
                            parents.add(counted)
                model.add(inside.expr() == Lin().plus(parents, ratio).expr())

    def leaf_cells(self, j: int, js: JobStructure) -> None:
        """Leaf groups take exactly their size in nodes from the cells of their domain."""
        mv = self.mv
        model = self.model
        leaf = js.leaf_level
        size = js.sizes[leaf]
        eligible = set(js.eligible_cells)
        domains = self.structure.domains
        for gid in js.by_level[leaf]:
            group = js.groups[gid]
            for d in group.pref_domains:
                take = Lin()
                for c in domains[d].cells:
                    if c in eligible and self.structure.may_take(j, gid, c):
                        take.add(mv.cell_take[(j, gid, c)])
                model.add(take.expr() == size * mv.explicit[(j, gid, d)])
        # anonymous leaf groups in each leaf domain draw from the job's pool
        groups_in: dict[int, Lin] = defaultdict(Lin)
        for d in checked(js.candidates[leaf], 1024):
            groups_in[d].add(mv.anon_count[(j, leaf, d)])
        if leaf > 0:
            for pid in js.by_level[leaf - 1]:
                checkpoint()
                for d in js.candidates[leaf]:
                    var = mv.child_count.get((j, pid, d))
                    if var is not None:
                        groups_in[d].add(var)
            if self.structure.pools_windows(j):
                for d in js.candidates[leaf]:
                    var = mv.child_count.get((j, POOLED_PARENT, d))
                    if var is not None:
                        groups_in[d].add(var)
        pool_in: dict[int, Lin] = defaultdict(Lin)
        for c in checked(js.eligible_cells, 512):
            var = mv.pool_take.get((j, c))
            if var is None:
                continue
            d = leaf_domain_of(self.structure, js.kinds[leaf], c, self.structure.cells[c].tree)
            pool_in[d].add(var)
        for d in js.candidates[leaf]:
            model.add(pool_in[d].expr() == size * groups_in[d].expr())

    def domain_capacity_cuts(self, j: int, js: JobStructure) -> None:
        """Whole groups only: a domain holds at most as many groups as fit after rounding.

        A leaf domain holds ``⌊eligible nodes / group size⌋`` groups; an upper domain
        ``⌊Σ children's whole groups × child size / group size⌋``.  Implied by the cell
        capacities for integer solutions; stated explicitly because it closes most of the
        LP gap (a super pod with 973 free nodes holds 7 blocks of 128, not 7.6; with racks
        of 7 free nodes and windows of 8 it holds none).
        """
        for li, cands in enumerate(js.candidates):
            for d in cands:
                count = group_count(self.mv, js, li, d)
                if len(count.terms) > 1 or self.structure.domains[d].kind != js.kinds[-1]:
                    self.model.add(count.expr() <= js.max_groups[d])

    def explicit_take_links(self, j: int, js: JobStructure) -> None:
        """An explicit leaf group takes a small cell only when it sits in the cell's domain.

        ``take[j, g, c] <= min(size, |c|) · x[j, g, d]`` for every cell ``c`` of a preferred
        domain ``d`` of leaf group ``g`` with fewer nodes than the group (origin and fault
        cells are single nodes).  Implied for integer solutions (``x = 0`` leaves the
        domain's takes at 0, ``x = 1`` bounds a take by the cell); when the cell holds a
        whole group it is implied by :meth:`leaf_cells` even in the LP.  Stated because
        without it the LP spreads a group over its preferred domains (``x = 1/2`` in each
        of two) and takes the origin node in both, so both origins count as hits in the
        bound.  Measured effect on the LP of the linear rows, most origin hits with every
        job placed: multilevel-n1024-batch8-d3-s2 185 → 182.5 (best answer found 177),
        950-n4096-batch10-s0 1022.3 → 1021.3: small on the suite, whose batch gaps came
        mostly from weak answers (see :attr:`solver.families.SolverFamily.free_search` and
        the origin-first second pass).

        Not added to the engine's models (:meth:`add_all` leaves them out): valid, but
        they change the whole-batch search's path (on ``950-n1024-batch8-s4`` at
        deterministic time 10 the answer fell from 60,154,177 to 55,388,512 with them).
        Kept for measuring the LP bound; ``tests/solver/test_gap_rows.py`` adds them to a
        built model.
        """
        mv = self.mv
        size = js.sizes[js.leaf_level]
        eligible = set(js.eligible_cells)
        cells = self.structure.cells
        domains = self.structure.domains
        for gid in js.by_level[js.leaf_level]:
            for d in js.groups[gid].pref_domains:
                x = mv.explicit[(j, gid, d)]
                for c in domains[d].cells:
                    if c not in eligible or cells[c].size >= size:
                        continue
                    take = mv.cell_take.get((j, gid, c))
                    if take is not None:
                        self.model.add(take <= cells[c].size * x)

    def ub_memory(self, j: int, js: JobStructure) -> None:
        """A UB-memory job sits in one UB-memory domain (16 consecutive racks)."""
        mv = self.mv
        domains = [u for (jj, u) in mv.ub_domain if jj == j]
        if not domains:
            return
        self.model.add(sum(mv.ub_domain[(j, u)] for u in domains) == mv.placed[j])
        leaf = js.leaf_level
        for d in js.candidates[leaf]:
            u = int(str(self.structure.domains[d].key[2])) // UB_MEM_RACKS
            count = group_count(mv, js, leaf, d)
            self.model.add(count.expr() <= js.max_groups[d] * mv.ub_domain[(j, u)])

    def aggregate_capacity(self) -> None:
        """Knapsack rows over the whole batch (implied, stated for the bound).

        Every rank takes ``npu-per-task`` chips of a healthy node, a node-level rank a slot
        of its size (``⌊free chips / npu-per-task⌋`` per node) and a whole-node rank a
        whole free node of its size; every leaf group of a whole-node job (block, rack
        window, level1 group) sits in one leaf domain, which holds ``max_groups`` of them.
        So the placed jobs' demands fit the cluster's totals.
        The per-node and per-cell rows imply these for integer solutions, but the LP then
        places a fraction of a job that does not fit: stated as one row over the jobs'
        ``placed`` literals, CP-SAT's knapsack cuts see that it cannot, and a batch whose
        jobs do not all fit gets a bound below "every job placed".  A row is added only
        when it can bind.
        """
        problem, mv = self.problem, self.mv
        jobs = sorted(mv.placed)
        if not jobs:
            return
        healthy = problem.health != UNHEALTHY
        left = np.maximum(problem.free.astype(np.int64) - self.pinned_use, 0) * healthy
        self._knapsack({j: placed_count(problem.jobs[j]) * problem.jobs[j].npu_per_task
                        for j in jobs}, int(left.sum()))
        # node-level ranks of one request size: at most the slots of that size (ranks of
        # other sizes only take more)
        by_request: dict[int, list[int]] = defaultdict(list)
        for j in jobs:
            if is_node_job(problem.jobs[j]):
                by_request[problem.jobs[j].npu_per_task].append(j)
        for request, members in by_request.items():
            self._knapsack({j: placed_count(problem.jobs[j]) for j in members},
                           int((left // request).sum()))
        # whole-node jobs: leaf groups (blocks, rack windows, level1 groups) of one size and
        # kind, on nodes of one size, fit the groups the leaf domains can hold
        by_leaf: dict[tuple[str, int, int], list[int]] = defaultdict(list)
        for j, js in self.structure.jobs.items():
            if j in mv.placed:
                by_leaf[(js.kinds[-1], js.sizes[-1], problem.jobs[j].npu_per_task)].append(j)
        for (_kind, size, _npus), members in by_leaf.items():
            room: dict[int, int] = {}
            for j in members:
                js = self.structure.jobs[j]
                for d in js.candidates[js.leaf_level]:
                    room[d] = max(room.get(d, 0), js.max_groups[d])
            self._knapsack({j: problem.jobs[j].tasks // size for j in members},
                           sum(room.values()))
        whole = left == problem.npus
        by_size: dict[int, list[int]] = defaultdict(list)
        for j in jobs:
            job = problem.jobs[j]
            if job.whole_node and not is_node_job(job):
                by_size[job.npu_per_task].append(j)
        for size, members in by_size.items():
            self._knapsack({j: problem.jobs[j].tasks for j in members},
                           int((whole & (problem.npus == size)).sum()))

    def _knapsack(self, demand: dict[int, int], capacity: int) -> None:
        """``Σ demand[j] · placed[j] ≤ capacity``, when the jobs' demands exceed it."""
        if sum(demand.values()) > capacity:
            self.model.add(sum(a * self.mv.placed[j] for j, a in demand.items()) <= capacity)

    def cell_capacity(self) -> None:
        """Whole nodes of a cell are used at most once, across every job of the batch."""
        for c, lin in cell_usage(self.mv, self.structure).items():
            self.model.add(lin.expr() <= self.structure.cells[c].size)

    def node_level_jobs(self) -> None:
        """Ordinary (and single-task super-pod) jobs: chips per node, gang per job."""
        mv = self.mv
        model = self.model
        per_job: dict[int, Lin] = defaultdict(Lin)
        per_node: dict[int, Lin] = defaultdict(Lin)
        uses_at: dict[int, list[cp_model.IntVar]] = defaultdict(list)
        for (j, n), var in mv.node_ranks.items():
            job = self.problem.jobs[j]
            per_job[j].add(var)
            per_node[n].add(var, job.npu_per_task)
            use = mv.node_uses[(j, n)]
            model.add(var >= use)
            model.add(var <= min(job.tasks, int(self.problem.free[n]) // job.npu_per_task) * use)
            uses_at[n].append(use)
        for j in self.structure.ordinary:
            model.add(per_job[j].expr() == placed_count(self.problem.jobs[j]) * mv.placed[j])
        for n, lin in per_node.items():
            avail = int(self.problem.free[n]) - int(self.pinned_use[n])
            model.add(lin.expr() <= avail)
        for n, var in mv.touched.items():
            uses = uses_at[n]
            for use in uses:
                model.add(var >= use)
            model.add(var <= sum(uses))

    # ------------------------------------------------------------------ preferences
    def origin_hits(self) -> None:
        """A hit needs the rank's group to take its origin node (whole nodes: once)."""
        mv = self.mv
        problem = self.problem
        structure = self.structure
        node_hits: dict[tuple[int, int, int], list[cp_model.IntVar]] = defaultdict(list)
        for (j, r), var in mv.hit.items():
            job = problem.jobs[j]
            n = int(job.origin[r])
            if j in structure.ordinary:
                node_hits[(j, -1, n)].append(var)
                continue
            js = structure.jobs[j]
            gid = js.by_level[js.leaf_level][r // js.sizes[js.leaf_level]]
            c = structure.cell_of[n]
            take = mv.cell_take[(j, gid, c)]
            self.model.add(var <= take)
            node_hits[(j, gid, n)].append(var)
        for (j, gid, n), hits in node_hits.items():
            if gid < 0:
                self.model.add(sum(hits) <= mv.node_ranks[(j, n)])
            else:
                c = structure.cell_of[n]
                self.model.add(sum(hits) <= mv.cell_take[(j, gid, c)])

    def fault_returns(self) -> None:
        """A fault rank returns to its old node only when nothing else is left for it.

        Whole-node group ``g`` using node ``x``: a return is forced exactly when every rank
        of ``g`` that is not pinned on its origin avoids ``x`` (a rank matching argument:
        each rank avoids at most one node).  Node-level jobs: returns are forced when the
        slots left on ``x`` exceed the ranks that do not avoid ``x``.
        """
        mv = self.mv
        problem = self.problem
        structure = self.structure
        model = self.model
        for (j, gid, x), var in mv.fault_return.items():
            job = problem.jobs[j]
            js = structure.jobs[j]
            group = js.groups[gid]
            take = mv.cell_take[(j, gid, structure.cell_of[x])]
            avoiders = {r for r in group.ranks if job.fault[r] and int(job.origin[r]) == x}
            free_ranks = Lin(const=len(group.ranks) - len(avoiders))
            for r in group.ranks:
                if r in avoiders:
                    continue
                hit = mv.hit.get((j, r))
                if hit is not None and int(job.origin[r]) != x:
                    free_ranks.add(hit, -1)
            model.add(var >= Lin([(take, 1)]).plus(free_ranks, -1).expr())
            model.add(var <= take)
        for (j, x), var in mv.node_fault_return.items():
            if j in structure.pod:  # counted per leaf domain (solver.model.podlevel)
                continue
            job = problem.jobs[j]
            avoiding = sum(1 for r in range(job.tasks)
                           if job.fault[r] and int(job.origin[r]) == x)
            slots_left = Lin().add(mv.node_ranks[(j, x)])
            ranks_left = Lin(const=job.tasks - avoiding)
            for r in range(job.tasks):
                hit = mv.hit.get((j, r))
                if hit is None:
                    continue
                ranks_left.add(hit, -1)
                if int(job.origin[r]) == x:
                    slots_left.add(hit, -1)
            model.add(var >= slots_left.plus(ranks_left, -1).expr())
            model.add(var <= mv.node_ranks[(j, x)])
            model.add(var <= avoiding)
