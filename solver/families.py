"""The CP-SAT engine's hooks of each placement family (the ``solver`` layer's part of
:mod:`models.families`).

One :class:`SolverFamily` per :class:`~models.scenario.Family`, in :data:`SOLVER_FAMILIES`:

* :meth:`~SolverFamily.job_cells` and :meth:`~SolverFamily.group_levels` — the model
  builder's view of a whole-node job: the cells it may take and its group levels, top
  down (:func:`solver.model.structure.build_structure`);
* :meth:`~SolverFamily.fragment` — the job's fragment term as a function of the model's
  counts (:class:`solver.model.objective.ObjectiveBuilder`);
* :meth:`~SolverFamily.alone_reason` — why a whole-node job cannot fit on the cluster even
  alone (:func:`solver.explain.explain_unplaced`);
* :meth:`~SolverFamily.remembered_fits` — the check a remembered answer of a partly
  running job passes before it is reused (:mod:`solver.reuse`).

Ordinary jobs are modelled node by node (:func:`solver.model.structure.is_node_job`), so
their group hooks are never called.  The objective's reserve term (super-pod reserve and
topotree reserve) and the pod-level scopes of :mod:`solver.model.podscope` stay in their
modules: each is one family's rule, not a dispatch.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Protocol, Self, TypeVar

import numpy as np

from models.compiled import JobView, Problem
from models.objective import eligible_nodes
from models.scenario import Family
from solver.model.podscope import within_scope

# The model builder's own types (solver.model.structure.Cell, solver.model.variables.Lin,
# solver.model.objective.Counted) are described here by what the hooks read of them:
# those modules look the hooks up, so this module does not import them.


class CellView(Protocol):
    """A cell of interchangeable free nodes (:class:`solver.model.structure.Cell`)."""

    @property
    def id(self) -> int:
        """The cell's index."""
        ...

    @property
    def npus(self) -> int:
        """NPUs of each node."""
        ...

    @property
    def super_pod(self) -> int:
        """The super pod, -1 when none."""
        ...

    @property
    def rack(self) -> int:
        """The rack, -1 when none."""
        ...

    @property
    def tree(self) -> int:
        """The topotree, -1 when none."""
        ...


class LinearSum(Protocol):
    """A linear expression that sums in place (:class:`solver.model.variables.Lin`)."""

    def plus(self, other: Self, factor: int = 1) -> Self:
        """Add ``factor·other`` in place."""
        ...


#: The builder's count of left nodes in one domain (:class:`solver.model.objective.Counted`).
CountT = TypeVar("CountT")
LinT = TypeVar("LinT", bound=LinearSum)
LinT_co = TypeVar("LinT_co", bound=LinearSum, covariant=True)


class FragmentCounts(Protocol[CountT, LinT_co]):
    """What a family's fragment term is built from (implemented by
    :class:`solver.model.objective.ObjectiveBuilder`): left nodes per domain, kept
    symbolic in whole groups, and ``mod`` / ``div`` / sums over child domains of them."""

    def left_per_domain(self, job: JobView, kind: str, ml_level: int,
                        tree: int | None) -> dict[int, CountT]:
        """Left eligible nodes of ``job`` per domain of ``kind``."""
        ...

    def mod(self, counted: CountT, m: int, name: str) -> LinT_co:
        """``left mod m``."""
        ...

    def div(self, counted: CountT, m: int, name: str) -> CountT:
        """``left // m``."""
        ...

    def lift(self, children: list[CountT], parent: int) -> CountT:
        """The sum of child domains, counted in ``parent``."""
        ...

    def parent_of(self, domain: int) -> int:
        """The domain one level up of ``domain`` (``-1``: none)."""
        ...

    def zero(self) -> LinT_co:
        """An empty linear expression."""
        ...


class SolverFamily:
    """The CP-SAT engine's hooks of one family (the defaults: a family whose jobs are
    modelled node by node, with no group term)."""

    family: Family
    #: Batches with a job of the family search the whole-batch model with the warm start
    #: as its first solution only (CP-SAT's ``use_optimization_hints = False``): by
    #: default CP-SAT keeps branching towards the hinted values, and on multilevel
    #: batches the greedy start's layout then holds the search
    #: (multilevel-n1024-batch8-d3-s2 at deterministic time 10: 344,099,655 with the hint
    #: followed, 354,330,583 without, bound 354,752,758; greedy has 48 origin hits, the
    #: answer without it 177).  The answer still starts from, and is never worse than,
    #: the warm start.  The other families were not measured this way.
    free_search: bool = False
    #: The kind of the innermost domain a group of the family's jobs sits in (``sp``,
    #: ``rack``, ``ml``; ``None``: not grouped): a neighbourhood step frees whole such
    #: domains (:func:`solver.model.focus.unit_keys`).
    leaf_domain: str | None = None

    def job_cells(self, problem: Problem, cells: Sequence[CellView],
                  job: JobView) -> tuple[list[int], list[int]]:
        """The cells whole-node ``job`` may take (its node size, its family's domains)
        and the topotrees it may use (empty for families without trees)."""
        raise NotImplementedError(f"{self.family.value} jobs are not modelled in groups")

    def group_levels(self, job: JobView) -> list[tuple[str, int]]:
        """The job's group levels, top down: the domain kind (``sp``, ``rack``, ``ml``)
        each group sits in, and its size in ranks."""
        raise NotImplementedError(f"{self.family.value} jobs are not modelled in groups")

    def fragment(self, counts: FragmentCounts[CountT, LinT], job: JobView, tree: int | None,
                 tag: str) -> LinT:
        """The job's fragment score as a function of the model's counts (the same
        formula as :func:`models.fragment.job_fragment`)."""
        return counts.zero()

    def alone_reason(self, problem: Problem, job: JobView) -> str | None:
        """Why whole-node ``job`` cannot be placed even on the empty cluster, or ``None``."""
        return None

    def remembered_fits(self, problem: Problem, job: JobView, nodes: np.ndarray) -> bool:
        """Whether a remembered node per rank of partly running ``job`` may be reused
        (beyond the validator's hard rules)."""
        return True


class OrdinaryFamily(SolverFamily):
    """Ordinary jobs: rank by rank on any usable node, modelled node by node."""

    family = Family.ORDINARY


class _Grouped(SolverFamily):
    """Families whose partly running jobs are modelled inside their running ranks' scope."""

    def remembered_fits(self, problem: Problem, job: JobView, nodes: np.ndarray) -> bool:
        """The pending ranks sit where CP-SAT's model of the job may put them
        (:func:`solver.model.podscope.within_scope`)."""
        return within_scope(problem, job, nodes)


class SuperPodFamily(_Grouped):
    """A3 / 850 jobs: blocks of spBlock whole nodes, each in one super pod."""

    family = Family.SUPERPOD
    leaf_domain = "sp"

    def job_cells(self, problem: Problem, cells: Sequence[CellView],
                  job: JobView) -> tuple[list[int], list[int]]:
        """Cells of the job's node size in a super pod."""
        return [c.id for c in cells if c.npus == job.npu_per_task and c.super_pod >= 0], []

    def group_levels(self, job: JobView) -> list[tuple[str, int]]:
        """One level: blocks in super pods."""
        return [("sp", job.sp_block)]

    def fragment(self, counts: FragmentCounts[CountT, LinT], job: JobView, tree: int | None,
                 tag: str) -> LinT:
        """Σ over super pods of the left nodes mod spBlock."""
        out = counts.zero()
        if job.sp_block > 1:
            for d, counted in sorted(counts.left_per_domain(job, "sp", 0, None).items()):
                out.plus(counts.mod(counted, job.sp_block, f"fm[{tag},{d}]"))
        return out

    def alone_reason(self, problem: Problem, job: JobView) -> str | None:
        """Too few super pods with spBlock eligible nodes for the job's blocks."""
        mask = eligible_nodes(problem, job)
        per_pod = Counter(problem.super_pod[mask].tolist())
        blocks = sum(c // job.sp_block for c in per_pod.values())
        if blocks < job.num_blocks:
            best = max(per_pod.items(), key=lambda kv: (kv[1], -kv[0]), default=(None, 0))
            return (f"no room for {job.num_blocks} blocks of spBlock {job.sp_block} whole free "
                    f"{job.npu_per_task}-NPU nodes in one super pod each: the super pods hold "
                    f"{blocks} (largest: {best[1]} free nodes in super pod {best[0]})")
        return None


class RackFamily(_Grouped):
    """Atlas 950 jobs: blocks in one super pod, made of tpBlock windows in one rack each."""

    family = Family.RACK
    leaf_domain = "rack"

    def job_cells(self, problem: Problem, cells: Sequence[CellView],
                  job: JobView) -> tuple[list[int], list[int]]:
        """Cells of the job's node size in a rack of a super pod."""
        return [c.id for c in cells if c.npus == job.npu_per_task and c.super_pod >= 0
                and c.rack >= 0], []

    def group_levels(self, job: JobView) -> list[tuple[str, int]]:
        """Blocks in super pods, windows in racks."""
        return [("sp", job.sp_block), ("rack", job.tp_block)]

    def fragment(self, counts: FragmentCounts[CountT, LinT], job: JobView, tree: int | None,
                 tag: str) -> LinT:
        """Per rack 10 × (left mod tpBlock); per super pod tpBlock × (whole windows mod
        windows per block)."""
        out = counts.zero()
        windows = job.sp_block // job.tp_block
        alloc: dict[int, list[CountT]] = defaultdict(list)
        for d, counted in sorted(counts.left_per_domain(job, "rack", 0, None).items()):
            sp = counts.parent_of(d)
            alloc[sp].append(counts.div(counted, job.tp_block, f"fq[{tag},{d}]"))
            out.plus(counts.mod(counted, job.tp_block, f"fr[{tag},{d}]"), 10)
        for sp in sorted(alloc):
            lifted = counts.lift(alloc[sp], sp)
            out.plus(counts.mod(lifted, windows, f"fa[{tag},{sp}]"), job.tp_block)
        return out

    def alone_reason(self, problem: Problem, job: JobView) -> str | None:
        """Too few tpBlock windows per super pod for the job's blocks."""
        mask = eligible_nodes(problem, job)
        racks = Counter(zip(problem.super_pod[mask].tolist(), problem.rack[mask].tolist(),
                            strict=True))
        windows_per_pod: Counter[int] = Counter()
        for (sp, _), count in racks.items():
            windows_per_pod[sp] += count // job.tp_block
        per_block = job.sp_block // job.tp_block
        blocks = sum(w // per_block for w in windows_per_pod.values())
        if blocks < job.num_blocks:
            return (f"not enough tpBlock windows: {job.num_blocks} blocks need {per_block} "
                    f"windows of {job.tp_block} free nodes in one rack each, inside one super "
                    f"pod; the super pods hold {blocks} such blocks")
        return None


class MultilevelFamily(_Grouped):
    """Multilevel jobs: nested level groups, each in one domain of one topotree."""

    family = Family.MULTILEVEL
    free_search = True
    leaf_domain = "ml"

    def job_cells(self, problem: Problem, cells: Sequence[CellView],
                  job: JobView) -> tuple[list[int], list[int]]:
        """Cells of the job's node size in a topotree with at least the job's levels."""
        trees = [t for t, name in enumerate(problem.tree_names)
                 if problem.trees[name].depth >= len(job.levels)]
        return [c.id for c in cells if c.npus == job.npu_per_task and c.tree in trees], trees

    def group_levels(self, job: JobView) -> list[tuple[str, int]]:
        """One level per configured level, the largest groups first."""
        return [("ml", size) for size in reversed(job.levels)]

    def fragment(self, counts: FragmentCounts[CountT, LinT], job: JobView, tree: int | None,
                 tag: str) -> LinT:
        """Per level1 domain (left mod level1 size), then per level up the whole groups
        below mod the level's ratio, weighted as :func:`models.fragment.job_fragment`."""
        assert tree is not None
        levels = job.levels
        per_l1 = counts.left_per_domain(job, "ml", 1, tree)
        frag: dict[int, LinT] = {}
        alloc: dict[int, CountT] = {}
        for d in sorted(per_l1):
            frag[d] = counts.mod(per_l1[d], levels[0], f"mf[{tag},{d}]")
            alloc[d] = counts.div(per_l1[d], levels[0], f"ma[{tag},{d}]")
        for i in range(1, len(levels)):
            m = levels[i] // levels[i - 1]
            kids: dict[int, list[int]] = defaultdict(list)
            for d in sorted(alloc):
                kids[counts.parent_of(d)].append(d)
            new_frag: dict[int, LinT] = {}
            new_alloc: dict[int, CountT] = {}
            for parent in sorted(kids):
                sub = counts.lift([alloc[d] for d in kids[parent]], parent)
                f = counts.zero()
                f.plus(counts.mod(sub, m, f"mf[{tag},{parent}]"), levels[i - 1])
                for d in kids[parent]:
                    f.plus(frag[d], 10)
                new_frag[parent] = f
                new_alloc[parent] = counts.div(sub, m, f"ma[{tag},{parent}]")
            frag, alloc = new_frag, new_alloc
        out = counts.zero()
        for d in sorted(frag):
            out.plus(frag[d])
        return out

    def alone_reason(self, problem: Problem, job: JobView) -> str | None:
        """No topotree has a top-level domain with enough eligible whole nodes."""
        best_tree = None
        for t, name in enumerate(problem.tree_names):
            view = problem.trees[name]
            if view.depth < len(job.levels):
                continue
            mask = eligible_nodes(problem, job, t)
            top = len(job.levels)
            values = view.level_value[top - 1][mask]
            per_domain = Counter(values.tolist())
            groups = sum(c // job.levels[-1] for c in per_domain.values())
            best_tree = max(best_tree or 0, groups)
            if groups * job.levels[-1] >= job.tasks:
                return None
        label = "level domain"
        return (f"no {label} has enough free whole nodes: {job.tasks // job.levels[-1]} level"
                f"{len(job.levels)} groups of {job.levels[-1]} pods are needed, the trees hold "
                f"at most {best_tree or 0} (before lower-level grouping)")


_ALL: tuple[SolverFamily, ...] = (OrdinaryFamily(), SuperPodFamily(), RackFamily(),
                                  MultilevelFamily())

#: The CP-SAT hooks of every family (read-only).
SOLVER_FAMILIES: Mapping[Family, SolverFamily] = MappingProxyType({f.family: f for f in _ALL})


def solver_family(family: Family) -> SolverFamily:
    """The :class:`SolverFamily` of ``family``."""
    return SOLVER_FAMILIES[family]
