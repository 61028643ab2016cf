"""Where the missing ranks of a partly running job may go (no ortools here).

A partly running A3/850, 950 or multilevel job (``running-ranks``) is modelled by CP-SAT
at node level: its pending ranks take whole free nodes one by one, and its group tree
(blocks, rack windows, level groups) is kept by per-group domain choices
(:mod:`solver.model.podlevel`).  This module derives, from the problem alone, what those
choices may be:

* a group holding a running rank is **anchored**: its domain at its level is the one of
  its running ranks (they never move), so its pending ranks complete it there;
* a group without running ranks is free within its parent's domain, restricted by the
  stage rules that are hard upstream (``heuristics.podlevel``, reference §2.5.5), for 950
  jobs at pod level only:

  - ``pending-sessions < 6``: a block without running ranks whose pending ranks have old
    nodes (cache entries) stays in a super pod of those old nodes (greedy: their
    majority);
  - ``pending-sessions < 3``: a rack window without running ranks whose pending ranks have
    old nodes in the super pod its block takes goes to a rack of those old nodes
    (``getSameRackNodes``; greedy: the first one's);

  and for a UB-memory 950 job every window stays in the UB-memory domain (16 consecutive
  racks of one super pod) of the running ranks.  A3/850 and multilevel have no stage rule
  on placement (the stage decides what the rescheduler deletes, ``simulate``'s part):
  their hard rules are the anchors and the nesting.

A job whose running ranks break its own group tree (a block's running ranks in two super
pods, a multilevel group's in two domains, ranks outside any tree) gets no scope: CP-SAT
then keeps greedy's pod-level answer for it, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from heuristics.podlevel import SP_STAGE, TP_STAGE, rack_stage
from models.check import running_rank_violations
from models.compiled import UNHEALTHY, JobView, Problem
from models.derived import Derived
from models.scenario import Family
from models.validation import UB_MEM_RACKS

DomainKey = tuple[object, ...]


@dataclass
class PodScope:
    """The group tree of a partly running whole-node job and where its groups may go.

    Levels are numbered from the top (0); ``kinds[li]`` is the domain kind of level ``li``
    (``"sp"``, ``"rack"``, ``"ml"``) and ``sizes[li]`` its group size in ranks.  Domain keys
    are those of :mod:`solver.model.structure` (``("sp", s)``, ``("rack", s, k)``,
    ``("ml", tree, level, *path)``).
    """

    job: int
    kinds: tuple[str, ...]
    sizes: tuple[int, ...]
    tree: int  # multilevel: the running ranks' tree; else -1
    pending: np.ndarray  # bool [tasks]
    fixed: dict[tuple[int, int], DomainKey] = field(default_factory=dict)  # (li, g) → key
    only: dict[tuple[int, int], frozenset[DomainKey]] = field(default_factory=dict)
    # (li, g) → parent key → allowed keys inside that parent (950 stage 0 windows)
    only_within: dict[tuple[int, int], dict[DomainKey, frozenset[DomainKey]]] = field(
        default_factory=dict)
    ub_home: tuple[int, int] | None = None  # (super pod, rack // 16) of a UB-memory job
    mask: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    @property
    def leaf(self) -> int:
        """Index of the leaf level."""
        return len(self.sizes) - 1

    def groups(self, li: int) -> int:
        """Number of groups at level ``li``."""
        return len(self.pending) // self.sizes[li]

    def ranks(self, li: int, g: int) -> range:
        """Ranks of group ``g`` at level ``li``."""
        size = self.sizes[li]
        return range(g * size, (g + 1) * size)

    def pending_in(self, li: int, g: int) -> int:
        """Pending ranks of group ``g`` at level ``li``."""
        r = self.ranks(li, g)
        return int(self.pending[r.start:r.stop].sum())

    def allows(self, li: int, g: int, key: DomainKey, parent: DomainKey | None) -> bool:
        """Whether group ``g`` of level ``li`` may sit in the domain ``key`` (inside
        ``parent``, its domain one level up, ``None`` at the top)."""
        found = self.fixed.get((li, g))
        if found is not None:
            return found == key
        only = self.only.get((li, g))
        if only is not None and key not in only:
            return False
        within = self.only_within.get((li, g))
        if within is not None and parent is not None and parent in within \
                and key not in within[parent]:
            return False
        if self.ub_home is not None:
            if key[0] == "sp" and key[1] != self.ub_home[0]:
                return False
            if key[0] == "rack" and (key[1], int(str(key[2])) // UB_MEM_RACKS) != self.ub_home:
                return False
        return True


def node_keys(problem: Problem, scope_kinds: tuple[str, ...], tree: int,
              n: int) -> tuple[DomainKey, ...] | None:
    """Domain key of node ``n`` at every level of a job (top first), ``None`` when the
    node is outside the job's kind of domain."""
    out: list[DomainKey] = []
    depth = len(scope_kinds)
    for li, kind in enumerate(scope_kinds):
        if kind == "sp":
            sp = int(problem.super_pod[n])
            if sp < 0:
                return None
            out.append(("sp", sp))
        elif kind == "rack":
            sp, rack = int(problem.super_pod[n]), int(problem.rack[n])
            if sp < 0 or rack < 0:
                return None
            out.append(("rack", sp, rack))
        else:
            view = problem.trees[problem.tree_names[tree]]
            if int(problem.node_tree[n]) != tree or not view.member[n]:
                return None
            path = tuple(int(view.level_value[i][n]) for i in range(view.depth))
            level = depth - li
            out.append(("ml", tree, level, *path[level - 1:]))
    return tuple(out)


def pod_scope(problem: Problem, job: JobView) -> PodScope | None:
    """The scope of partly running whole-node job ``job``, or ``None`` when CP-SAT does
    not model it (ordinary or node-level jobs, running ranks that break the group tree).

    Computed once per problem and job.
    """
    return problem.derived.get_or_compute(POD_SCOPE, job.index, lambda: _scope(problem, job))


#: :func:`pod_scope` per job index (``None`` kept: a job CP-SAT does not model).
POD_SCOPE: Derived[int, PodScope | None] = Derived("pod scope")


def _scope(problem: Problem, job: JobView) -> PodScope | None:
    if not job.partly_running or not job.whole_node or not job.rules.grouped:
        return None
    if running_rank_violations(problem, job.index):
        return None  # the running ranks already break a hard rule: greedy's reason stands
    running = job.running.astype(np.int64)
    held = running[running >= 0]
    tree = -1
    if job.family is Family.SUPERPOD:
        kinds: tuple[str, ...] = ("sp",)
        sizes: tuple[int, ...] = (job.sp_block,)
    elif job.rules.in_rack:
        kinds, sizes = ("sp", "rack"), (job.sp_block, job.tp_block)
    else:
        trees = set(problem.node_tree[held].tolist())
        if len(trees) != 1:
            return None
        tree = int(trees.pop())
        if tree < 0 or problem.trees[problem.tree_names[tree]].depth < len(job.levels):
            return None
        kinds = ("ml",) * len(job.levels)
        sizes = tuple(reversed(job.levels))
    if any(job.tasks % s for s in sizes):
        return None
    scope = PodScope(job.index, kinds, sizes, tree, running < 0)
    keys_of: dict[int, tuple[DomainKey, ...]] = {}
    for n in sorted(set(held.tolist())):
        keys = node_keys(problem, kinds, tree, n)
        if keys is None:
            return None
        keys_of[n] = keys
    for li in range(len(sizes)):
        for g in range(scope.groups(li)):
            r = scope.ranks(li, g)
            found = {keys_of[int(n)][li] for n in running[r.start:r.stop] if n >= 0}
            if len(found) > 1:
                return None  # the running ranks break the group: not modelled
            if found:
                scope.fixed[(li, g)] = found.pop()
    if job.rules.in_rack:
        if job.ub_memory:
            homes = {(int(problem.super_pod[n]), int(problem.rack[n]) // UB_MEM_RACKS)
                     for n in held.tolist()}
            if len(homes) != 1:
                return None
            scope.ub_home = homes.pop()
        _stage_rules(problem, job, scope)
    scope.mask = _mask(problem, job, scope)
    return scope


def _stage_rules(problem: Problem, job: JobView, scope: PodScope) -> None:
    """950's hard stage rules (see the module docstring)."""
    stage = rack_stage(job)
    if stage >= SP_STAGE:
        return
    origin = job.origin
    for g in range(scope.groups(0)):
        if (0, g) in scope.fixed:
            continue
        r = scope.ranks(0, g)
        old = [int(origin[x]) for x in r if origin[x] >= 0 and scope.pending[x]
               and problem.super_pod[int(origin[x])] >= 0]
        if old:
            scope.only[(0, g)] = frozenset(("sp", int(problem.super_pod[n])) for n in old)
    if stage >= TP_STAGE:
        return
    for w in range(scope.groups(1)):
        if (1, w) in scope.fixed:
            continue
        within: dict[DomainKey, set[DomainKey]] = {}
        for x in scope.ranks(1, w):
            n = int(origin[x])
            if n < 0 or not scope.pending[x]:
                continue
            sp, rack = int(problem.super_pod[n]), int(problem.rack[n])
            if sp >= 0 and rack >= 0:
                within.setdefault(("sp", sp), set()).add(("rack", sp, rack))
        if within:
            scope.only_within[(1, w)] = {k: frozenset(v) for k, v in within.items()}


def _mask(problem: Problem, job: JobView, scope: PodScope) -> np.ndarray:
    """Nodes some pending rank of the job may take: whole free nodes of the job's size in
    a leaf domain some leaf group with pending ranks allows."""
    base = ((problem.free == problem.npus) & (problem.npus == job.npu_per_task)
            & (problem.health != UNHEALTHY))
    out = np.zeros(problem.num_nodes, dtype=bool)
    by_leaf: dict[tuple[DomainKey, ...], list[int]] = {}
    for n in np.flatnonzero(base).tolist():
        keys = node_keys(problem, scope.kinds, scope.tree, n)
        if keys is not None:
            by_leaf.setdefault(keys, []).append(n)
    leaf = scope.leaf
    for keys, members in by_leaf.items():
        if any(leaf_allows(scope, g, keys) for g in range(scope.groups(leaf))
               if scope.pending_in(leaf, g)):
            out[members] = True
    return out


def within_scope(problem: Problem, job: JobView, nodes: np.ndarray) -> bool:
    """Whether ``nodes`` (a node per rank of partly running ``job``) keep its running
    ranks and put every pending rank where CP-SAT's model of the job may put it: in a
    leaf domain its group's anchors and stage rules allow (:func:`leaf_allows`).

    The validator (:mod:`models.check`) checks the family's hard rules but not the
    stage rules; an answer recalled from an earlier session (:mod:`solver.reuse`) is
    checked here too.  A job without a scope (CP-SAT keeps greedy's answer for it) is
    never within one.
    """
    scope = pod_scope(problem, job)
    if scope is None:
        return False
    nodes = np.asarray(nodes, dtype=np.int64)
    fixed = job.running >= 0
    if len(nodes) != job.tasks or not np.array_equal(nodes[fixed], job.running[fixed]):
        return False
    size = scope.sizes[scope.leaf]
    for r in np.flatnonzero(~fixed).tolist():
        keys = node_keys(problem, scope.kinds, scope.tree, int(nodes[r]))
        if keys is None or not leaf_allows(scope, r // size, keys):
            return False
    return True


def leaf_allows(scope: PodScope, g: int, keys: tuple[DomainKey, ...]) -> bool:
    """Whether leaf group ``g`` may sit in the leaf domain with ancestor keys ``keys``
    (every level of the chain allowed for the group's ancestors)."""
    leaf = scope.leaf
    for li in range(leaf + 1):
        ancestor = g * scope.sizes[leaf] // scope.sizes[li]
        parent = keys[li - 1] if li else None
        if not scope.allows(li, ancestor, keys[li], parent):
            return False
    return True


@dataclass
class PodChoices:
    """The domain choices of one modelled partly running job, over the model's domains.

    ``choices[(li, g)]`` maps each candidate domain id of group ``g`` of level ``li``
    without running ranks to the domain id one level up (-1 at the top); ``leaf_of`` maps
    each candidate node to its leaf domain id; ``anchored_leaf`` maps each anchored leaf
    group with pending ranks to its leaf domain id (-1 when the model has no free node
    there, so the job cannot be completed).
    """

    choices: dict[tuple[int, int], dict[int, int]]
    leaf_of: dict[int, int]
    anchored_leaf: dict[int, int]


def pod_choices(problem: Problem, scope: PodScope, nodes: list[int],
                domain_of_key: dict[DomainKey, int]) -> PodChoices:
    """Candidate domains of every free group of ``scope`` given the candidate ``nodes``."""
    chains: dict[tuple[DomainKey, ...], list[int]] = {}
    leaf_of: dict[int, int] = {}
    for n in nodes:
        keys = node_keys(problem, scope.kinds, scope.tree, n)
        assert keys is not None  # the scope's mask keeps such nodes only
        chains.setdefault(keys, []).append(n)
    leaf = scope.leaf
    for keys, members in chains.items():
        for n in members:
            leaf_of[n] = domain_of_key[keys[leaf]]
    choices: dict[tuple[int, int], dict[int, int]] = {}
    for g in range(scope.groups(leaf)):
        if not scope.pending_in(leaf, g):
            continue
        for keys in chains:
            if not leaf_allows(scope, g, keys):
                continue
            for li in range(leaf + 1):
                ancestor = g * scope.sizes[leaf] // scope.sizes[li]
                if (li, ancestor) in scope.fixed:
                    continue
                parent = domain_of_key[keys[li - 1]] if li else -1
                choices.setdefault((li, ancestor), {})[domain_of_key[keys[li]]] = parent
    anchored: dict[int, int] = {}
    for g in range(scope.groups(leaf)):
        key = scope.fixed.get((leaf, g))
        if key is not None and scope.pending_in(leaf, g):
            anchored[g] = domain_of_key.get(key, -1)
    return PodChoices(choices, leaf_of, anchored)
