"""What one job's multilevel schedules share: candidates, tree indexes, leaf order.

:class:`Context` is everything one schedule of a job
(:func:`heuristics.multilevel.solve_job`) shares: the job's candidate nodes per topotree
(and why a tree is unusable), the tree indexes (:meth:`Context.index`, kept in
``Problem.derived`` across jobs), one ``Schedule`` on a whole tree
(:meth:`Context.schedule_tree`), the leaf order inside a level1 domain
(:meth:`Context.leaf_key`), and the answers of repairs
(:mod:`heuristics.multilevel.history`).  One ``Schedule`` call is
:class:`heuristics.multilevel.run.Run`, the rank order :mod:`heuristics.multilevel.order`.
Part of :mod:`heuristics.multilevel`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from heuristics.images import tie_list, tie_positions
from heuristics.multilevel.order import write_layout
from heuristics.multilevel.run import Run
from heuristics.multilevel.tree import Span, TreeIndex
from heuristics.state import ClusterState
from models.compiled import SUBHEALTHY, JobView, Problem, TreeView, natural_key
from models.derived import Derived

#: Run._plain_counts' answers per span: id(span) -> (span, offered, leaves per level1,
#: reserved), shared by every run and job of a problem.
PlainCounts = dict[int, tuple[Span, np.ndarray, np.ndarray, np.ndarray | None]]
PLAIN_COUNTS: Derived[None, PlainCounts] = Derived("multilevel plain counts")
#: Context.index per (tree, depth).
TREE_INDEX: Derived[tuple[int, int], TreeIndex] = Derived("multilevel tree index")
#: The leaf keys of free nodes per image (None: no image tie order).
LEAF_RANK: Derived[str | None, list[int]] = Derived("multilevel leaf rank")


class Context:
    """Everything one call of :func:`place_multilevel` shares."""

    def __init__(self, problem: Problem, job: JobView, state: ClusterState,
                 held: Sequence[int] = (),
                 repairs: dict[tuple[Any, ...], list[int] | None] | None = None) -> None:
        self.problem = problem
        self.repairs = {} if repairs is None else repairs  # _repair_subtree answers
        # Run._plain_counts: id(span) -> (span, offered, leaves per level1, reserved), the
        # last answer per span, kept with the spans for every later run and job (an entry
        # is replaced whole and never changed, so a stale one only costs a larger update)
        self.counts: dict[int, tuple[Span, np.ndarray, np.ndarray, np.ndarray | None]] = (
            problem.derived.get_or_compute(PLAIN_COUNTS, None, dict))
        self.job = job
        self.levels = job.levels
        self.tasks = job.tasks
        self.num_nodes = problem.num_nodes
        # natural positions, holders of the job's image first (natural order
        # without image locality)
        self.npos = tie_list(problem, job.image)
        self.health = problem.health_list
        self.base = state.whole_free(problem) & (problem.npus == job.npu_per_task)
        self.base[list(held)] = False  # fault nodes kept back (see place_multilevel)
        self.preferred = job.preferred.tolist()
        self.fault_origin = {r: int(job.origin[r]) for r in np.flatnonzero(job.fault).tolist()
                             if job.origin[r] >= 0}
        self.fault_nodes = set(self.fault_origin.values())
        self.leaf_rank = _leaf_rank(problem, self.fault_nodes, job.image)
        # Ranks still running (a partly running job): fixed, never swapped.
        self.fixed = set(np.flatnonzero(~job.to_place).tolist())
        self.needed = self.tasks - len(self.fixed)  # nodes the job still needs
        # Usable trees in natural name order (tie-break between trees).
        self.cand: dict[int, np.ndarray] = {}
        self.tree_reasons: dict[int, str] = {}
        names = problem.tree_names
        self.tree_order = sorted(range(len(names)), key=lambda t: natural_key(names[t]))
        for t in self.tree_order:
            self._check_tree(t)

    # ----------------------------------------------------------------- trees
    def _check_tree(self, t: int) -> None:
        problem = self.problem
        name = problem.tree_names[t]
        view = problem.trees[name]
        if view.depth < len(self.levels):
            self.tree_reasons[t] = (f"tree '{name}' has {view.depth} levels but the "
                                    f"affinity-config needs {len(self.levels)}")
            return
        named = self.base & (problem.node_tree == t)
        # removeRedundantLayers runs before any label is read: only the job's own levels
        # (level1..levelK) must be labelled; a label of a trimmed level may be missing.
        used = self.labelled(view)
        lacking = np.flatnonzero(named & ~used)
        if len(lacking):
            first = int(lacking[np.argmin(problem.natural_pos[lacking])])
            node = problem.node_names[first]
            label = next(view.labels[i] for i in range(len(self.levels))
                         if view.level_value[i][first] < 0)
            self.tree_reasons[t] = (f"tree '{name}' is invalid: node '{node}' lacks label "
                                    f"'{label}' (a node missing the label of a level the job "
                                    f"uses invalidates its tree)")
            return
        cand = named & used
        usable = int(cand.sum())
        if usable == 0:
            self.tree_reasons[t] = (f"tree '{name}' has no usable node (completely free, "
                                    f"{self.job.npu_per_task} NPUs, not unhealthy)")
            return
        if usable < self.needed:
            self.tree_reasons[t] = (f"tree '{name}': select node failed by not enough node "
                                    f"({usable} usable, {self.needed} needed)")
            return
        self.cand[t] = cand

    def labelled(self, view: TreeView) -> np.ndarray:
        """Nodes of ``view`` carrying the labels of the job's levels (level1..levelK)."""
        mask = view.level_value[0] >= 0
        for i in range(1, len(self.levels)):
            mask = mask & (view.level_value[i] >= 0)
        return mask

    def index(self, t: int, depth: int) -> TreeIndex:
        """The trimmed index of tree ``t`` to ``depth`` levels over every node that names
        the tree and carries its level1 label, whether free or not.

        It depends on the problem alone, so it is kept in ``Problem.derived`` and shared by
        every job (with its domain spans); a job's candidates are the leaves a run offers.
        """
        problem = self.problem

        def compute() -> TreeIndex:
            view = problem.trees[problem.tree_names[t]]
            # every node that can be any job's candidate (a job's candidates carry the labels
            # of its own levels, so a node lacking a label above level1 may be one: the
            # strict rule's extra level then puts it in the domain of "no label")
            members = (problem.node_tree == t) & (view.level_value[0] >= 0)
            return TreeIndex(view, members, depth, problem.label_order(view.name, depth))

        return problem.derived.get_or_compute(TREE_INDEX, (t, depth), compute)

    @staticmethod
    def req_of(levels: Sequence[int], tasks: int) -> list[int]:
        """Task levels (§2.6.2): pods per group from the job down to one node."""
        return [tasks, *reversed(levels), 1]

    # ----------------------------------------------------------------- fresh schedule
    def pref_map(self, mask: np.ndarray, ranks: range) -> dict[int, int]:
        """Preferred node → rank for ``ranks`` whose cached node ``mask`` offers.

        A node cached for several ranks keeps the smallest rank.
        """
        pref: dict[int, int] = {}
        preferred = self.preferred
        for r in ranks:
            n = preferred[r]
            if n >= 0 and mask[n] and n not in pref:
                pref[n] = r
        return pref

    def schedule_tree(
        self, t: int, levels: Sequence[int], pref: dict[int, int]
    ) -> tuple[tuple[int, list[int]] | None, str]:
        """``Schedule`` on one whole tree: (initial root frag, node per rank) or a reason."""
        tix = self.index(t, len(levels))
        req = self.req_of(levels, self.tasks)
        idx = np.flatnonzero(self.cand[t][tix.order])
        run = Run(self, tix, req, 0, idx, pref)
        frag = run.root.frag
        if not run.run():
            name = self.problem.tree_names[t]
            top = len(levels)
            reserve = (f"; reservedNode {tix.reserve} per level1 domain"
                       if tix.reserve else "")
            return None, (f"tree '{name}': failed to schedule tasks ({len(idx)} usable "
                          f"nodes hold {run.capacity()} of the {req[0] // req[1]} "
                          f"level{top} groups of {req[1]} pods needed{reserve})")
        out: list[int] = [-1] * self.tasks
        self.write(run, 0, out)
        return (frag, out), ""


    # ----------------------------------------------------------------- ranks
    def write(self, run: Run, base: int, out: list[int]) -> None:
        """Turn ``run``'s task tree into ranks ``base..`` of ``out``
        (:func:`heuristics.multilevel.order.write_layout`)."""
        write_layout(run, base, out, self.npos, self.tasks)

    def leaf_key(self, pref: dict[int, int], reserved: frozenset[int] | set[int],
                 x: int) -> tuple[int, int]:
        """Order of leaf ``x`` inside its level1 domain: preferred by rank, then healthy,
        sub-healthy, former fault nodes, and (pass 2 only) ``reserved`` ones, each in
        natural order."""
        r = pref.get(x)
        if r is not None:
            return 0, r
        npos = self.npos[x]
        if x in reserved:  # only reached in pass 2
            return 5, npos
        if x in self.fault_nodes:
            return 4, npos
        if self.health[x] == SUBHEALTHY:
            return 3, npos
        return 2, npos

def _leaf_rank(problem: Problem, fault_nodes: set[int], image: str | None = None
               ) -> list[int]:
    """:meth:`Context.leaf_key` of every node that is not preferred nor reserved, as
    one integer ``class * 2 num_nodes + tie position`` (class 0 healthy, 1 sub-healthy,
    2 a fault node; the tie position is the natural one, holders of ``image`` first:
    :func:`heuristics.images.tie_positions`); a preferred node's key is then
    ``rank - tasks`` (negative)."""
    key = image if problem.image_mask(image) is not None else None
    span = 2 * problem.num_nodes
    tie = tie_positions(problem, image)
    base = problem.derived.get_or_compute(
        LEAF_RANK, key, lambda: (tie.astype(np.int64)
                                 + span * (problem.health == SUBHEALTHY)).tolist())
    if not fault_nodes:
        return base
    out = base.copy()
    for x in fault_nodes:
        out[x] = 2 * span + int(tie[x])
    return out


__all__ = ["Context"]
