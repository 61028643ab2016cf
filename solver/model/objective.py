"""The objective of the counted model: the ``models`` objective, term by term, exactly.

Every term is written as a function of the counts so that, for the placement the
post-pass recovers, ``evaluate(scenario, placement)`` equals the objective CP-SAT reports
(tests assert it per family).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from models.compiled import SUBHEALTHY, JobView, Problem
from models.derived import Derived
from models.objective import ResolvedWeights, block_spill, job_image_hits
from models.scenario import Family
from solver.families import solver_family
from solver.model.cancel import checked, checkpoint
from solver.model.structure import DomainKey, JobStructure, Structure, ml_domain_at, ml_key
from solver.model.variables import (
    Lin,
    ModelVariables,
    Registry,
    Var,
    cell_usage,
    ge1_rule,
    group_count,
    product_rule,
)


@dataclass
class ObjectiveTerms:
    """The objective split into its named terms (all maximised as ``total``)."""

    placed: Lin = field(default_factory=Lin)
    hits: Lin = field(default_factory=Lin)
    fault_returns: Lin = field(default_factory=Lin)
    subhealthy: Lin = field(default_factory=Lin)
    reserve: Lin = field(default_factory=Lin)
    fragment: Lin = field(default_factory=Lin)
    spill: Lin = field(default_factory=Lin)
    # image locality: per job, the nodes hosting it that hold its image
    image: dict[int, Lin] = field(default_factory=dict)

    def total(self, w: ResolvedWeights) -> Lin:
        """The weighted objective (``placed`` already carries the job weights)."""
        out = Lin()
        out.plus(self.placed)
        for j, lin in sorted(self.image.items()):
            out.plus(lin, w.image_of(j))
        out.plus(self.hits, w.origin_hit)
        out.plus(self.fault_returns, -w.fault_return)
        out.plus(self.subhealthy, -w.subhealthy)
        out.plus(self.reserve, -w.reserve)
        out.plus(self.fragment, -w.fragment)
        out.plus(self.spill, -w.affinity_spill)
        return out


def _whole_members_by_path(problem: Problem, tree: int) -> Counter[tuple[int, ...]]:
    """Completely free member nodes of a multilevel tree per level path (all levels), once
    per problem: every large-neighbourhood step of a batch asks for them."""
    def compute() -> Counter[tuple[int, ...]]:
        view = problem.trees[problem.tree_names[tree]]
        nodes = np.flatnonzero(problem.whole_free & view.member & (problem.node_tree == tree))
        paths: Counter[tuple[int, ...]] = Counter()
        # in slices: all at once it took 10-13 ms of CPU at 65,536 nodes without a
        # checkpoint, inside the first step's build
        for first in range(0, len(nodes), PATHS_PER_CHECK):
            checkpoint()
            part = nodes[first:first + PATHS_PER_CHECK]
            columns = [np.asarray(view.level_value[i])[part].tolist()
                       for i in range(view.depth)]
            paths.update(zip(*columns, strict=True))
        return paths

    return problem.derived.get_or_compute(WHOLE_MEMBERS_BY_PATH, tree, compute)


#: Nodes whose level path :func:`_whole_members_by_path` counts between two checkpoints
#: (about 1 ms of CPU).
PATHS_PER_CHECK = 4096
#: :func:`_whole_members_by_path` per tree index.
WHOLE_MEMBERS_BY_PATH: Derived[int, Counter[tuple[int, ...]]] = Derived(
    "whole members by level path")


def placed_term(mv: ModelVariables, weights: ResolvedWeights,
                pinned: dict[int, np.ndarray]) -> Lin:
    """The ``placed`` term: each job's weight when it is placed, pinned jobs as constants.

    The only term whose coefficients are weights (:mod:`solver.model.reuse` re-weights a
    kept model with it)."""
    lin = Lin()
    for j, var in mv.placed.items():
        lin.add(var, weights.job_placed[j])
    lin.const += sum(weights.job_placed[j] for j in pinned)
    return lin


class ObjectiveBuilder:
    """Builds every objective term from the model's variables and the pinned jobs."""

    def __init__(self, reg: Registry, problem: Problem, structure: Structure,
                 mv: ModelVariables, weights: ResolvedWeights,
                 pinned: dict[int, np.ndarray]) -> None:
        self.reg = reg
        self.problem = problem
        self.structure = structure
        self.mv = mv
        self.weights = weights
        self.pinned = pinned
        self.pinned_nodes: set[int] = set()
        # completely free nodes that pinned node-level jobs use in part (not in any cell)
        self.pinned_partial: set[int] = set()
        # a partly running job's running ranks take no chips and host no counted node
        self.own = {j: problem.jobs[j].placed_nodes(nodes) for j, nodes in pinned.items()}
        # one job at a time, by array (a fixed job of a 65,536-node batch holds
        # thousands of nodes: 16 of them node by node were one stretch of about 30 ms)
        for j, nodes in checked(self.own.items(), 1):
            arr = np.asarray(nodes, dtype=np.int64)
            if problem.jobs[j].whole_node:
                self.pinned_nodes.update(arr.tolist())
            else:
                self.pinned_partial.update(arr[problem.whole_free[arr]].tolist())
        self._usage: dict[int, Lin] | None = None
        self._frag_cache: dict[tuple[object, ...], Lin] = {}

    # ------------------------------------------------------------------ usage
    def cell_usage(self) -> dict[int, Lin]:
        """Whole nodes used per cell, by every job (node-level touches included)."""
        if self._usage is None:
            self._usage = cell_usage(self.mv, self.structure)
        return self._usage

    def build(self) -> ObjectiveTerms:
        """Every term."""
        terms = ObjectiveTerms()
        self._placed_hits_faults(terms)
        self._image(terms)
        self._subhealthy(terms)
        self._reserve(terms)
        self._fragment(terms)
        return terms

    # ------------------------------------------------------------------ simple terms
    def _placed_hits_faults(self, terms: ObjectiveTerms) -> None:
        w = self.weights
        terms.placed = placed_term(self.mv, w, self.pinned)
        for var in checked(self.mv.hit.values(), 4096):
            terms.hits.add(var)
        for var in checked(self.mv.fault_return.values(), 4096):
            terms.fault_returns.add(var)
        for var in checked(self.mv.node_fault_return.values(), 4096):
            terms.fault_returns.add(var)
        for j, nodes in self.pinned.items():
            checkpoint()
            job = self.problem.jobs[j]
            arr = np.asarray(nodes)
            on = (arr == job.origin) & (job.origin >= 0)
            terms.hits.const += int((on & ~job.fault).sum())
            terms.fault_returns.const += int((on & job.fault).sum())
            terms.spill.const += block_spill(self.problem, job, [int(n) for n in nodes])

    def _image(self, terms: ObjectiveTerms) -> None:
        """Image locality: per job, the hosting nodes that hold its image.

        Whole-node jobs take whole nodes of cells, and the cells are split by the images
        their nodes hold (:func:`solver.model.structure.node_image_classes`), so a cell's
        first node speaks for all; node-level jobs host a node when ``node_uses``."""
        problem = self.problem
        masks = {job.index: mask for job in problem.jobs
                 if (mask := problem.image_mask(job.image)) is not None}
        if not masks:
            return
        out: dict[int, Lin] = {}
        cells = self.structure.cells
        for (j, _, c), var in checked(self.mv.cell_take.items(), 4096):
            if j in masks and masks[j][cells[c].nodes[0]]:
                out.setdefault(j, Lin()).add(var)
        for (j, c), var in checked(self.mv.pool_take.items(), 4096):
            if j in masks and masks[j][cells[c].nodes[0]]:
                out.setdefault(j, Lin()).add(var)
        for (j, n), var in checked(self.mv.node_uses.items(), 4096):
            if j in masks and masks[j][n]:
                out.setdefault(j, Lin()).add(var)
        for j, own in self.own.items():
            if j in masks:
                out.setdefault(j, Lin()).const += job_image_hits(problem, problem.jobs[j], own)
        terms.image = out

    def _subhealthy(self, terms: ObjectiveTerms) -> None:
        problem = self.problem
        touched = {var.index for var in checked(self.mv.touched.values(), 4096)}
        for c, lin in checked(self.cell_usage().items(), 16):
            if self.structure.cells[c].health == SUBHEALTHY:
                terms.subhealthy.plus(_without_touches(lin, touched))
        for n, var in checked(self.mv.touched.items(), 4096):
            if problem.health[n] == SUBHEALTHY:
                terms.subhealthy.add(var)
        terms.subhealthy.const += self.pinned_subhealthy()

    def pinned_subhealthy(self) -> int:
        """Sub-healthy nodes that pinned jobs use: the constant of the sub-healthy term
        (:mod:`solver.model.reuse` sets it again on a kept model)."""
        problem = self.problem
        hosts = set(self.pinned_nodes)
        for j, nodes in checked(self.own.items(), 16):
            if not problem.jobs[j].whole_node:
                hosts.update(int(n) for n in nodes)
        return sum(1 for n in checked(hosts, 4096) if problem.health[n] == SUBHEALTHY)

    # ------------------------------------------------------------------ reserve
    def _family_use_per_cell(self, family: Family) -> dict[int, Lin]:
        use: dict[int, Lin] = defaultdict(Lin)
        for (j, _, c), var in checked(self.mv.cell_take.items(), 1024):
            if self.problem.jobs[j].family is family:
                use[c].add(var)
        for (j, c), var in checked(self.mv.pool_take.items(), 1024):
            if self.problem.jobs[j].family is family:
                use[c].add(var)
        return use

    def _reserve(self, terms: ObjectiveTerms) -> None:
        problem = self.problem
        whole = problem.whole_free
        families = {job.family for job in problem.jobs}
        if Family.SUPERPOD in families and problem.reserve_nodes > 0:
            use = self._family_use_per_cell(Family.SUPERPOD)
            per_pod: dict[int, Lin] = defaultdict(Lin)
            for c, lin in use.items():
                per_pod[self.structure.cells[c].super_pod].plus(lin)
            # node-level super-pod jobs touching completely free nodes
            touches: dict[int, list] = defaultdict(list)
            for (j, n), var in checked(self.mv.node_uses.items(), 1024):
                if problem.jobs[j].family is Family.SUPERPOD and whole[n]:
                    touches[n].append(var)
            for n, lits in touches.items():
                per_pod[int(problem.super_pod[n])].add(
                    self.reg.any_of(lits, f"sptouch[{n}]"))
            pinned_hosts: set[int] = set()
            for j, nodes in checked(self.own.items(), 16):
                if problem.jobs[j].family is Family.SUPERPOD:
                    pinned_hosts.update(int(n) for n in nodes if whole[n])
            for n in pinned_hosts:
                per_pod[int(problem.super_pod[n])].const += 1
            free_per_pod = Counter(problem.super_pod[whole & (problem.super_pod >= 0)].tolist())
            for sp in sorted(per_pod):
                slack = max(0, free_per_pod[sp] - problem.reserve_nodes)
                lin = Lin(list(per_pod[sp].terms), per_pod[sp].const - slack)
                terms.reserve.plus(self.reg.positive_part(lin, f"res[sp{sp}]"))
        if Family.MULTILEVEL in families:
            use = self._family_use_per_cell(Family.MULTILEVEL)
            # modelled partly running multilevel jobs take whole nodes one by one
            for (j, n), var in checked(self.mv.node_uses.items(), 1024):
                if j in self.structure.pod and problem.jobs[j].rules.in_tree:
                    use[self.structure.cell_of[n]].add(var)
            per_domain: dict[int, Lin] = defaultdict(Lin)
            for c, lin in checked(use.items(), 64):
                cell = self.structure.cells[c]
                if cell.tree < 0:
                    continue
                view = problem.trees[problem.tree_names[cell.tree]]
                if view.reserved_nodes <= 0:
                    continue
                per_domain[ml_domain_at(self.structure, cell, 1)].plus(lin)
            self._pinned_multilevel_reserve(per_domain, terms)
            pinned_in: dict[int, Counter[DomainKey]] = {}  # per level, pinned nodes per domain
            for d in checked(sorted(per_domain), 1):
                dom = self.structure.domains[d]
                tree = int(str(dom.key[1]))
                view = problem.trees[problem.tree_names[tree]]
                if dom.level not in pinned_in:
                    pinned_in[dom.level] = _nodes_per_ml_domain(
                        problem, self.pinned_nodes | self.pinned_partial, dom.level)
                free = _whole_free_in_domain(self.structure, d, pinned_in[dom.level])
                slack = max(0, free - view.reserved_nodes)
                lin = Lin(list(per_domain[d].terms), per_domain[d].const - slack)
                terms.reserve.plus(self.reg.positive_part(lin, f"res[ml{d}]"))

    def _pinned_multilevel_reserve(self, per_domain: dict[int, Lin],
                                   terms: ObjectiveTerms) -> None:
        """Whole nodes pinned multilevel jobs use, per level1 domain with a reserve.

        A domain the model has cells of gets them as a constant of its usage; a domain
        left without cells (every free node pinned) is a constant term of its own.
        """
        problem = self.problem
        whole = problem.whole_free
        hosts: Counter[tuple[object, ...]] = Counter()
        for j, nodes in self.own.items():
            if not problem.jobs[j].rules.in_tree:
                continue
            checkpoint()
            # a job's distinct nodes, sorted, by one array call (a 65,536-node step pins
            # tens of thousands of nodes); then a path of numpy look-ups per node
            for n in checked(np.unique(np.asarray(nodes)).tolist(), PATH_NODES_PER_CHECK):
                t = int(problem.node_tree[n])
                if not whole[n] or t < 0:
                    continue
                view = problem.trees[problem.tree_names[t]]
                if view.reserved_nodes <= 0 or not view.member[n]:
                    continue
                path = tuple(int(view.level_value[i][n]) for i in range(view.depth))
                hosts[("ml", t, 1, *path)] += 1
        for key, count in checked(hosts.items(), 1024):
            d = self.structure.domain_of_key.get(key)
            if d is not None:
                per_domain[d].const += count
                continue
            t = int(str(key[1]))
            view = problem.trees[problem.tree_names[t]]
            members = _whole_members_by_path(problem, t)[tuple(int(str(v)) for v in key[3:])]
            spare = max(0, members - view.reserved_nodes)
            terms.reserve.const += max(0, count - spare)

    # ------------------------------------------------------------------ fragment
    def _fragment(self, terms: ObjectiveTerms) -> None:
        reg = self.reg
        problem = self.problem
        for j, js in self.structure.jobs.items():
            job = problem.jobs[j]
            if job.rules.in_tree:
                contrib = Lin()
                for t in js.trees:
                    frag_t = self._job_fragment(job, t)
                    contrib.plus(reg.when(self.mv.tree[(j, t)], frag_t, f"frag[{j},{t}]"))
                terms.fragment.plus(contrib)
            else:
                frag = self._job_fragment(job, None)
                if frag.is_const and frag.const == 0:
                    continue
                terms.fragment.plus(reg.when(self.mv.placed[j], frag, f"frag[{j}]"))
        for j, nodes in self.pinned.items():
            job = problem.jobs[j]
            tree = int(problem.node_tree[int(nodes[0])]) if job.rules.in_tree \
                else None
            terms.fragment.plus(self._job_fragment(job, tree))
        # modelled partly running jobs (node level): their tree is their running ranks'
        for j, scope in sorted(self.structure.pod.items()):
            frag = self._job_fragment(problem.jobs[j], scope.tree if scope.tree >= 0 else None)
            if not (frag.is_const and frag.const == 0):
                terms.fragment.plus(reg.when(self.mv.placed[j], frag, f"frag[{j}]"))
        self._ordinary_fragment(terms)

    def _ordinary_fragment(self, terms: ObjectiveTerms) -> None:
        """Ordinary jobs: nodes hosting the job that are left partly used."""
        reg = self.reg
        problem = self.problem
        by_node: dict[int, list[tuple[int, Var]]] = defaultdict(list)
        for (j, n), var in checked(self.mv.node_ranks.items(), 1024):
            by_node[n].append((j, var))
        left_flag: dict[int, Var] = {}

        def flag_of(n: int) -> Var:
            """True when node ``n`` keeps at least one free chip after the batch."""
            flag = left_flag.get(n)
            if flag is None:
                left = Lin(const=int(problem.free[n]))
                for j2, var in by_node[n]:
                    left.add(var, -problem.jobs[j2].npu_per_task)
                for jp, nodes in self.own.items():
                    count = int(np.sum(np.asarray(nodes) == n))
                    left.const -= problem.jobs[jp].npu_per_task * count
                flag = reg.bool_var(f"left[{n}]")
                reg.model.add(left.expr() >= 1).only_enforce_if(flag)
                reg.model.add(left.expr() <= 0).only_enforce_if(~flag)
                reg.aux(flag, partial(ge1_rule, left))
                left_flag[n] = flag
            return flag

        for (j, n), use in self.mv.node_uses.items():
            if problem.jobs[j].rules.grouped:
                continue
            flag = flag_of(n)
            partial_var = reg.bool_var(f"partial[{j},{n}]")
            reg.model.add_multiplication_equality(partial_var, [use, flag])
            reg.aux(partial_var, partial(product_rule, use.index, flag.index))
            terms.fragment.add(partial_var)
        # pinned ordinary jobs (a partly running job's pod-level answer): each node their
        # placed ranks use is partly used exactly when something is left on it
        for jp, nodes in sorted(self.own.items()):
            if not problem.jobs[jp].rules.grouped and problem.jobs[jp].partly_running:
                for n in sorted({int(x) for x in nodes}):
                    terms.fragment.add(flag_of(n))

    def _group_count(self, j: int, li: int, d: int) -> Lin:
        """Groups of job ``j`` at level ``li`` placed in domain ``d``."""
        return group_count(self.mv, self.structure.jobs[j], li, d)

    def left_per_domain(self, job: JobView, kind: str, ml_level: int,
                         tree: int | None) -> dict[int, Counted]:
        """Left eligible nodes of ``job`` per domain of a kind (``sp``/``rack``/``ml``).

        Usage by a whole-node job of the same node size that has this kind of domain as
        one of its levels is kept symbolic, as ``group size × groups in the domain``, so
        that modulo and division can see whole groups (see :class:`Counted`).  Other
        usage is summed per cell.
        """
        structure = self.structure
        mv = self.mv
        out: dict[int, Counted] = {}
        take_by_job_cell: dict[tuple[int, int], list[Var]] = defaultdict(list)
        for (jj, _, c), var in checked(mv.cell_take.items(), 1024):
            take_by_job_cell[(jj, c)].append(var)
        for dom in structure.domains:
            checkpoint()
            if dom.kind != kind or (kind == "ml" and (dom.level != ml_level
                                                      or int(str(dom.key[1])) != tree)):
                continue
            cells = [c for c in dom.cells if structure.cells[c].npus == job.npu_per_task]
            if not cells:
                continue
            counted = Counted(dom.id, sum(structure.cells[c].size for c in cells), {}, Lin())
            cell_set = set(cells)
            for j2, js2 in structure.jobs.items():
                level = _matching_level(js2.kinds, kind, ml_level)
                same = self.problem.jobs[j2].npu_per_task == job.npu_per_task
                if level is not None and same:
                    key = (j2, level)
                    counted.groups[key] = counted.groups.get(key, 0) - js2.sizes[level]
                    continue
                for c in cells:
                    pooled = mv.pool_take.get((j2, c))
                    if pooled is not None:
                        counted.other.add(pooled, -1)
                taken = [v for c in cell_set for v in take_by_job_cell.get((j2, c), ())]
                # the order of cell_take's insertion, as a scan of cell_take would give
                for took in sorted(taken, key=lambda v: v.index):
                    counted.other.add(took, -1)
            for c in cells:
                for n in structure.cells[c].nodes:
                    touch = mv.touched.get(n)
                    if touch is not None:
                        counted.other.add(touch, -1)
            out[dom.id] = counted
        return out

    def parent_of(self, domain: int) -> int:
        """The domain one level up of ``domain`` (``-1``: none)."""
        return self.structure.domains[domain].parent

    def zero(self) -> Lin:
        """An empty linear expression (a family's fragment term starts from it)."""
        return Lin()

    # symbolic group counts ----------------------------------------------------
    def _materialize(self, counted: Counted) -> Lin:
        lin = Lin(list(counted.other.terms), counted.const + counted.other.const)
        for (j2, li), coef in counted.groups.items():
            lin.plus(self._group_count(j2, li, counted.domain), coef)
        return lin

    def mod(self, counted: Counted, m: int, name: str) -> Lin:
        """``left mod m``; whole groups of size ``k·m`` drop out."""
        if m == 1:
            return Lin()
        kept = {k: v for k, v in counted.groups.items() if not (v < 0 and v % m == 0)}
        reduced = Counted(counted.domain, counted.const, kept, counted.other)
        return self.reg.modulo(self._materialize(reduced), m, name)

    def div(self, counted: Counted, m: int, name: str) -> Counted:
        """``left // m``, kept symbolic when the groups are whole multiples of ``m``."""
        if counted.other.is_const and all(v % m == 0 for v in counted.groups.values()):
            total = counted.const + counted.other.const
            return Counted(counted.domain, total // m,
                           {k: v // m for k, v in counted.groups.items()}, Lin())
        lin = self.reg.divide(self._materialize(counted), m, name)
        return Counted(counted.domain, 0, {}, lin)

    def lift(self, children: list[Counted], parent: int) -> Counted:
        """Sum child domains into ``parent``.

        ``Σ_children size·G_j(child) = size·ratio·G_j(parent)`` for job ``j``'s groups one
        level up: every group of the parent level has all its children inside it.
        """
        out = Counted(parent, sum(c.const for c in children), {}, Lin())
        keys = {k for c in children for k in c.groups}
        for key in sorted(keys):
            j2, li = key
            coefs = {c.groups.get(key, 0) for c in children}
            js2 = self.structure.jobs[j2]
            liftable = (len(coefs) == 1 and li > 0
                        and self._covers(js2, li, parent, {c.domain for c in children}))
            if liftable:
                coef = coefs.pop()
                ratio = js2.sizes[li - 1] // js2.sizes[li]
                up = (j2, li - 1)
                out.groups[up] = out.groups.get(up, 0) + coef * ratio
            else:
                for c in children:
                    if key in c.groups:
                        out.other.plus(self._group_count(j2, li, c.domain), c.groups[key])
        for c in children:
            out.other.plus(c.other)
        return out

    def _covers(self, js2: JobStructure, li: int, parent: int, children: set[int]) -> bool:
        """Whether ``children`` holds every level-``li`` candidate domain of ``js2`` in
        ``parent``."""
        needed = {d for d in js2.candidates[li] if self.structure.domains[d].parent == parent}
        return needed <= children

    def _job_fragment(self, job: JobView, tree: int | None) -> Lin:
        """The job's fragment score as a function of the counts (see models.objective)."""
        key: tuple[object, ...] = (job.family, job.npu_per_task, job.sp_block, job.tp_block,
                                   job.levels, tree)
        cached = self._frag_cache.get(key)
        if cached is not None:
            return cached
        tag = f"{job.family.value}{job.npu_per_task}.{job.sp_block}.{job.tp_block}" \
              f".{'-'.join(map(str, job.levels))}.{tree}"
        out = solver_family(job.family).fragment(self, job, tree, tag)
        self._frag_cache[key] = out
        return out


@dataclass
class Counted:
    """Left nodes of a domain: ``const + Σ coef·G_j,level(domain) + other``.

    ``G_j,level(domain)`` is the number of job ``j``'s groups of that level in the domain
    (a linear expression of the model).  Keeping it symbolic lets ``mod``/``div`` drop
    whole groups exactly and lets sums over child domains become counts one level up.
    """

    domain: int
    const: int
    groups: dict[tuple[int, int], int]
    other: Lin


def _matching_level(kinds: list[str], kind: str, ml_level: int) -> int | None:
    """Index of the job level whose domains are of ``kind`` (and multilevel level)."""
    for li, k in enumerate(kinds):
        if k != kind:
            continue
        if kind == "ml" and len(kinds) - li != ml_level:
            continue
        return li
    return None


def _without_touches(lin: Lin, touched: set[int]) -> Lin:
    """``lin`` without the terms of the ``touched`` variables (their indices)."""
    return Lin([(v, c) for v, c in lin.terms if v.index not in touched], lin.const)


#: Nodes whose multilevel path (one numpy look-up per level, a few µs a node) is read
#: between two checkpoints.
PATH_NODES_PER_CHECK = 256


def _whole_free_in_domain(structure: Structure, d: int,
                          pinned_in: Counter[DomainKey]) -> int:
    """Completely free usable nodes of a multilevel level1 domain, pinned ones included
    (``pinned_in``: :func:`_nodes_per_ml_domain` of the pinned nodes at ``d``'s level)."""
    dom = structure.domains[d]
    return sum(structure.cells[c].size for c in dom.cells) + pinned_in[dom.key]


def _nodes_per_ml_domain(problem: Problem, nodes: set[int], level: int) -> Counter[DomainKey]:
    """How many of ``nodes`` lie in each multilevel level-``level`` domain (by its key).

    Counted once per model: a 65,536-node step has tens of thousands of pinned nodes, and
    testing each against each domain took most of a multilevel step's building.
    """
    out: Counter[DomainKey] = Counter()
    for n in checked(nodes, PATH_NODES_PER_CHECK):
        tree = int(problem.node_tree[n])
        if tree < 0:
            continue
        view = problem.trees[problem.tree_names[tree]]
        if not view.member[n]:
            continue
        path = tuple(int(view.level_value[i][n]) for i in range(view.depth))
        out[ml_key(tree, level, path)] += 1
    return out
