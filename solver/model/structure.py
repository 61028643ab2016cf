"""The counted structure the CP-SAT model is built on (no ortools here).

Decide at the level where choices differ and count the rest:

* **Cells.**  The completely free, usable nodes are partitioned into cells of identical
  attributes (node size, health, super pod, rack, multilevel domain path).  A node that
  some rank prefers (its origin) or avoids (a fault rank's old node) is a cell of its own.
* **Domains.**  Super pods, racks (inside a super pod) and multilevel level-i domains
  (identified by the label values of levels i..D of their tree) form forests over the
  cells.
* **Groups.**  A whole-node job is a tree of groups: blocks (and rack windows) for super
  pods, level groups for multilevel.  A group with a *preferred domain* (one holding an
  origin or a fault rank's old node of one of its ranks) may be placed *explicitly* in such
  a domain; every other group is *anonymous* and only counted per domain.
* **Ordinary nodes.**  Ordinary jobs (and single-task super-pod jobs, which take part of a
  node) get node-level integers on a reduced candidate set: their origin and fault nodes
  plus, per class of interchangeable nodes, only as many nodes as the batch has such tasks.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from models.compiled import SUBHEALTHY, UNHEALTHY, JobView, Problem
from models.families import family_rules
from solver.families import solver_family
from solver.model.cancel import checked, checkpoint
from solver.model.focus import lean_groups
from solver.model.podscope import PodChoices, PodScope, pod_choices, pod_scope

DomainKey = tuple[object, ...]


@dataclass
class Cell:
    """Interchangeable, completely free usable nodes."""

    id: int
    nodes: list[int]  # natural order
    npus: int
    health: int
    super_pod: int
    rack: int
    tree: int  # index into problem.tree_names, -1 when none
    ml_path: tuple[int, ...]  # label value indices level1..levelD (empty when no tree)
    singleton: bool

    @property
    def size(self) -> int:
        """Number of nodes."""
        return len(self.nodes)


@dataclass
class Domain:
    """A super pod, a rack or a multilevel level-i domain."""

    id: int
    key: DomainKey
    kind: str  # "sp", "rack", "ml"
    level: int  # 1 = leaf level of its kind (rack, ml level1); super pods are level 2 over racks
    parent: int  # domain id, -1 at the top
    cells: list[int] = field(default_factory=list)  # cells directly or transitively inside
    children: list[int] = field(default_factory=list)


@dataclass
class Group:
    """A block / window / level group of a whole-node job."""

    id: int  # index within the job's group list
    level: int  # index into JobStructure.levels (0 = top)
    index: int  # group index within its level (rank order)
    ranks: range
    parent: int  # group id, -1 at the top
    children: list[int] = field(default_factory=list)
    pref_domains: list[int] = field(default_factory=list)  # candidate domains with preferences


@dataclass
class JobStructure:
    """The group tree and candidate domains of one whole-node job."""

    job: int
    sizes: list[int]  # ranks per group, top level first
    kinds: list[str]  # domain kind per level
    groups: list[Group]
    by_level: list[list[int]]  # group ids per level
    candidates: list[list[int]]  # candidate domain ids per level
    eligible_cells: list[int]
    trees: list[int]  # multilevel: candidate trees; else []
    # most groups of their level a candidate domain can hold (lower levels rounded down)
    max_groups: dict[int, int] = field(default_factory=dict)

    @property
    def leaf_level(self) -> int:
        """Index of the leaf level."""
        return len(self.sizes) - 1


@dataclass
class OrdinaryStructure:
    """Node-level candidates of an ordinary (or single-task super-pod) job."""

    job: int
    nodes: list[int]  # candidate nodes (natural order)


@dataclass
class Structure:
    """Everything the CP-SAT model needs, derived once from a problem."""

    cells: list[Cell]
    cell_of: dict[int, int]  # node → cell (whole-free usable nodes only)
    domains: list[Domain]
    domain_of_key: dict[DomainKey, int]
    leaf_domain: dict[tuple[int, str, int], int]  # (cell, kind, tree) → leaf domain id
    jobs: dict[int, JobStructure]
    ordinary: dict[int, OrdinaryStructure]
    ordinary_nodes: list[int]  # union of ordinary candidate nodes
    special: set[int]  # nodes that are their own cell
    # partly running whole-node jobs modelled at node level (solver.model.podlevel)
    pod: dict[int, PodScope] = field(default_factory=dict)
    pod_choices: dict[int, PodChoices] = field(default_factory=dict)
    #: lean focused model (:func:`solver.model.focus.lean_groups`): per explicit leaf group
    #: ``(job, group)``, the singleton cells it may take, and per job ``(job, -1)`` those
    #: its anonymous pool may take (``None``: every eligible cell)
    group_cells: dict[tuple[int, int], set[int]] | None = None
    #: lean focused model: the 950 jobs whose explicitly placed super-pod blocks count
    #: their anonymous windows together, per rack, instead of per block and rack (see
    #: :attr:`POOLED_PARENT`)
    pooled_windows: frozenset[int] = frozenset()

    def pools_windows(self, j: int) -> bool:
        """Whether job ``j``'s explicit blocks count their anonymous windows together."""
        return j in self.pooled_windows

    def may_take(self, j: int, gid: int, c: int) -> bool:
        """Whether explicit leaf group ``gid`` of job ``j`` (``gid = -1``: the job's
        anonymous pool) may take nodes of cell ``c`` (besides eligibility): always, unless
        the model is lean and ``c`` is a singleton cell that is neither one of the group's
        (the job's) cached nodes nor one of its current nodes."""
        if self.group_cells is None or not self.cells[c].singleton:
            return True
        allowed = self.group_cells.get((j, gid))
        return allowed is not None and c in allowed


#: The parent id under which a job that pools its windows (:meth:`Structure.pools_windows`)
#: keys its rack counts: ``child_count[(job, POOLED_PARENT, rack)]``, the anonymous windows
#: of all its explicitly placed super-pod blocks in ``rack``.  Windows of different blocks
#: are interchangeable for every rule the model states (a block's windows stay in its
#: super pod; the racks' capacity counts windows, not blocks), so the pooled counts have
#: the same solutions as counts per block; recovery hands each block its windows from the
#: pool of its super pod.
POOLED_PARENT = -1


def _sp_key(sp: int) -> DomainKey:
    return ("sp", sp)


def _rack_key(sp: int, rack: int) -> DomainKey:
    return ("rack", sp, rack)


def _ml_key(tree: int, level: int, path: tuple[int, ...]) -> DomainKey:
    return ("ml", tree, level, *path[level - 1:])


ml_key = _ml_key


def is_node_job(job: JobView) -> bool:
    """Jobs modelled at node level (ordinary, single-task super-pod/950 jobs, and partly
    running jobs: their pending ranks, see :mod:`solver.model.podlevel`)."""
    return not job.rules.grouped or not job.whole_node or job.partly_running


def placed_count(job: JobView) -> int:
    """Ranks an engine places for ``job`` (all but its running ranks)."""
    return int(job.to_place.sum())


def build_structure(
    problem: Problem,
    pinned: dict[int, np.ndarray] | None = None,
    extra_nodes: dict[int, list[int]] | None = None,
    keep: np.ndarray | None = None,
    skip: frozenset[int] = frozenset(),
) -> Structure:
    """Derive cells, domains, job group trees and ordinary candidates from ``problem``.

    Parameters
    ----------
    problem
        The compiled scenario.
    pinned
        Jobs whose greedy answer is taken as fixed (soft jobs whose blocks spill), by job
        index.  Their nodes are removed from the cells.
    extra_nodes
        Additional candidate nodes per node-level job (the warm start's nodes), so that
        the hint is always representable.
    keep
        Optional node mask of a focused model (:mod:`solver.model.focus`): free nodes
        outside it are left out of the model.
    skip
        Jobs left out of the model altogether (they stay unplaced).
    """
    pinned = pinned or {}
    pinned_nodes: set[int] = set()
    for nodes in checked(pinned.values(), 16):
        # a node a pinned job uses, even in part, is no longer completely free
        pinned_nodes.update(int(n) for n in nodes)
    whole = problem.whole_free.copy()
    if keep is not None:
        whole &= keep
    if pinned_nodes:
        whole[np.fromiter(pinned_nodes, dtype=np.int64)] = False
    special: set[int] = set()
    for job in problem.jobs:
        if job.index in pinned or job.index in skip:
            continue
        for r in checked(range(job.tasks), 1024):
            n = int(job.origin[r])
            if n < 0:
                continue
            if job.fault[r] or job.prefer_previous:
                special.add(n)
    # multilevel level paths per node
    paths: dict[int, tuple[int, ...]] = {}
    for n in checked(np.flatnonzero(whole & (problem.node_tree >= 0)).tolist(), 512):
        t = int(problem.node_tree[n])
        view = problem.trees[problem.tree_names[t]]
        if view.member[n]:
            paths[n] = tuple(int(view.level_value[i][n]) for i in range(view.depth))
    cells: list[Cell] = []
    cell_of: dict[int, int] = {}
    by_key: dict[tuple[object, ...], list[int]] = defaultdict(list)
    # split cells only by the domains some pending job can tell apart
    # (pinned jobs too: their fragment score is measured over the same domains)
    rules = [family_rules(f) for f in {job.family for job in problem.jobs}]
    need_pod = any(r.in_super_pod for r in rules)
    need_rack = any(r.in_rack for r in rules)
    need_tree = any(r.in_tree for r in rules)
    order = problem.natural_order
    # image locality: nodes holding different images of the batch's jobs are
    # not interchangeable for the image term
    images = node_image_classes(problem, pinned, skip)
    for n in checked(order[whole[order]].tolist(), 1024):
        tree = int(problem.node_tree[n]) if need_tree and n in paths else -1
        pod = int(problem.super_pod[n]) if need_pod else -1
        rack = int(problem.rack[n]) if need_rack and pod >= 0 else -1
        key: tuple[object, ...] = (
            int(problem.npus[n]), int(problem.health[n]), pod, rack, tree,
            paths.get(n, ()) if need_tree else (),
            int(images[n]) if images is not None else 0,
        )
        if n in special:
            key = (*key, "node", n)
        by_key[key].append(n)
    for key, members in checked(by_key.items(), 64):
        cid = len(cells)
        npus, health, sp, rack_id, cell_tree, path = key[:6]
        assert isinstance(npus, int) and isinstance(health, int)
        assert isinstance(sp, int) and isinstance(rack_id, int) and isinstance(cell_tree, int)
        assert isinstance(path, tuple)
        cells.append(Cell(cid, members, npus, health, sp, rack_id, cell_tree, path,
                          singleton=len(key) > 7))
        for n in members:
            cell_of[n] = cid

    domains: list[Domain] = []
    domain_of_key: dict[DomainKey, int] = {}

    def domain(key: DomainKey, kind: str, level: int, parent: int) -> int:
        found = domain_of_key.get(key)
        if found is not None:
            return found
        did = len(domains)
        domains.append(Domain(did, key, kind, level, parent))
        domain_of_key[key] = did
        if parent >= 0:
            domains[parent].children.append(did)
        return did

    leaf_domain: dict[tuple[int, str, int], int] = {}
    for cell in checked(cells, 64):
        if cell.super_pod >= 0:
            sp = domain(_sp_key(cell.super_pod), "sp", 2, -1)
            domains[sp].cells.append(cell.id)
            leaf_domain[(cell.id, "sp", -1)] = sp
            if cell.rack >= 0:
                rk = domain(_rack_key(cell.super_pod, cell.rack), "rack", 1, sp)
                domains[rk].cells.append(cell.id)
                leaf_domain[(cell.id, "rack", -1)] = rk
        if cell.tree >= 0:
            depth = len(cell.ml_path)
            parent = -1
            ids = {}
            for level in range(depth, 0, -1):
                parent = domain(_ml_key(cell.tree, level, cell.ml_path), "ml", level, parent)
                ids[level] = parent
                domains[parent].cells.append(cell.id)
            leaf_domain[(cell.id, "ml", cell.tree)] = ids[1]

    structure = Structure(cells, cell_of, domains, domain_of_key, leaf_domain, {}, {}, [],
                          special)
    for job in problem.jobs:
        checkpoint()
        if job.index in pinned or job.index in skip:
            continue
        if job.partly_running and job.rules.grouped:
            scope = pod_scope(problem, job)
            if scope is None:  # not modelled: the caller pins it (solver.cpsat.build_model)
                skip = skip | {job.index}
            else:
                structure.pod[job.index] = scope
            continue
        if is_node_job(job):
            continue
        structure.jobs[job.index] = _job_structure(problem, structure, job)
    lean = keep is not None and lean_groups(problem)
    _ordinary_candidates(problem, structure, pinned, extra_nodes or {}, keep, skip, lean)
    if lean:
        structure.group_cells = _group_cells(problem, structure, extra_nodes or {})
        structure.pooled_windows = frozenset(
            j for j, js in structure.jobs.items() if js.kinds == ["sp", "rack"])
    for j, scope in structure.pod.items():
        checkpoint()
        structure.pod_choices[j] = pod_choices(problem, scope, structure.ordinary[j].nodes,
                                               domain_of_key)
    return structure


def _group_cells(problem: Problem, structure: Structure,
                 current: dict[int, list[int]]) -> dict[tuple[int, int], set[int]]:
    """Per leaf group of every modelled whole-node job, the singleton cells it may take in
    a lean model: those of its ranks' cached nodes and of its current nodes (``current``:
    the warm start's nodes per job, so that the warm start stays representable); under
    ``(job, -1)`` the union over the job's groups, which its anonymous pool may take."""
    out: dict[tuple[int, int], set[int]] = {}
    for j, js in structure.jobs.items():
        checkpoint()
        job = problem.jobs[j]
        now = current.get(j)
        pool: set[int] = set()
        for gid in js.by_level[js.leaf_level]:
            cells: set[int] = set()
            for r in js.groups[gid].ranks:
                for n in (int(job.origin[r]), -1 if now is None else int(now[r])):
                    c = structure.cell_of.get(n) if n >= 0 else None
                    if c is not None and structure.cells[c].singleton:
                        cells.add(c)
            out[(j, gid)] = cells
            pool |= cells
        out[(j, -1)] = pool
    return out


def node_image_classes(problem: Problem, pinned: dict[int, np.ndarray] | None = None,
                       skip: frozenset[int] = frozenset()) -> np.ndarray | None:
    """Per node, an id of the set of the modelled jobs' images it holds (image locality);
    None when no modelled job's image is on any node (or the term is off)."""
    masks = []
    seen: set[str] = set()
    for job in problem.jobs:
        if job.index in (pinned or {}) or job.index in skip or job.image in seen:
            continue
        mask = problem.image_mask(job.image)
        if mask is not None:
            seen.add(job.image or "")
            masks.append(mask)
    if not masks:
        return None
    if len(masks) <= 62:
        codes = np.zeros(problem.num_nodes, dtype=np.int64)
        for k, mask in enumerate(masks):
            codes |= mask.astype(np.int64) << k
        return codes
    rows = np.stack(masks, axis=1)
    _uniq, inverse = np.unique(rows, axis=0, return_inverse=True)
    return np.asarray(inverse, dtype=np.int64).reshape(-1)


def ml_domain_at(structure: Structure, cell: Cell, level: int) -> int:
    """The level-``level`` multilevel domain holding ``cell``."""
    return structure.domain_of_key[_ml_key(cell.tree, level, cell.ml_path)]


def _job_structure(problem: Problem, structure: Structure, job: JobView) -> JobStructure:
    cells = structure.cells
    hooks = solver_family(job.family)
    eligible, trees = hooks.job_cells(problem, cells, job)
    group_levels = hooks.group_levels(job)
    kinds = [kind for kind, _ in group_levels]
    sizes = [size for _, size in group_levels]
    levels = len(sizes)
    # capacity per domain for this job, bottom-up
    cap: dict[int, int] = defaultdict(int)
    leaf_kind = kinds[-1]
    for c in eligible:
        if leaf_kind == "ml":
            did = structure.leaf_domain[(c, "ml", cells[c].tree)]
        else:
            did = structure.leaf_domain[(c, leaf_kind, -1)]
        cap[did] += cells[c].size
    candidates: list[list[int]] = [[] for _ in range(levels)]
    # leaf level
    leaf_cands = sorted(d for d, k in cap.items() if k >= sizes[-1])
    candidates[-1] = leaf_cands
    usable = {d: (cap[d] // sizes[-1]) * sizes[-1] for d in leaf_cands}
    max_groups: dict[int, int] = {d: cap[d] // sizes[-1] for d in leaf_cands}
    for li in range(levels - 2, -1, -1):
        upper: dict[int, int] = defaultdict(int)
        for d, k in usable.items():
            parent = _parent_at(structure, d, kinds, li)
            if parent >= 0:
                upper[parent] += k
        cands = sorted(d for d, k in upper.items() if k >= sizes[li])
        candidates[li] = cands
        usable = {d: (upper[d] // sizes[li]) * sizes[li] for d in cands}
        max_groups.update({d: upper[d] // sizes[li] for d in cands})
    # prune lower levels to descendants of upper candidates
    for li in range(1, levels):
        allowed = set(candidates[li - 1])
        candidates[li] = [d for d in candidates[li]
                          if _parent_at(structure, d, kinds, li - 1) in allowed]
    if job.rules.in_tree:
        top = {structure.domains[d].key[1] for d in candidates[0]}
        trees = [t for t in trees if t in top]
    # groups
    groups: list[Group] = []
    by_level: list[list[int]] = []
    for li, size in enumerate(sizes):
        ids = []
        for g in checked(range(job.tasks // size), 1024):
            gid = len(groups)
            parent = -1
            if li > 0:
                per_parent = sizes[li - 1] // size
                parent = by_level[li - 1][g // per_parent]
                groups[parent].children.append(gid)
            groups.append(Group(gid, li, g, range(g * size, (g + 1) * size), parent))
            ids.append(gid)
        by_level.append(ids)
    # preferred domains: domains holding a usable origin / fault node of the group's ranks
    eligible_set = set(eligible)
    cand_sets = [set(c) for c in candidates]
    leaf_ids = by_level[-1]
    # Every group may be explicit in the leaf domain of an avoided node (a fault rank's
    # old node): the anonymous pool never supplies such a node (see avoided_cells), so a
    # group taking it is explicit and its fault return, if any, is counted exactly.
    avoided = avoided_cells(structure, job) & eligible_set
    fault_leaves = {_leaf_of(structure, leaf_kind, cid) for cid in avoided}
    for gid in checked(leaf_ids, 32):
        group = groups[gid]
        marks: set[int] = set(fault_leaves)
        for r in group.ranks:
            n = int(job.origin[r])
            if n < 0 or not (job.fault[r] or job.prefer_previous):
                continue
            cid = structure.cell_of.get(n)
            if cid is None or cid not in eligible_set:
                continue
            marks.add(_leaf_of(structure, leaf_kind, cid))
        chain = sorted(d for d in marks if d in cand_sets[-1])
        group.pref_domains = chain
        # propagate to ancestors
        ancestor = group.parent
        lower = chain
        li = levels - 1
        while ancestor >= 0:
            li -= 1
            ups = {_parent_at(structure, d, kinds, li) for d in lower}
            mine = set(groups[ancestor].pref_domains) | {u for u in ups if u in cand_sets[li]}
            groups[ancestor].pref_domains = sorted(mine)
            lower = sorted(ups)
            ancestor = groups[ancestor].parent
    # a child may only be explicit inside a domain its parent can be explicit in
    for li in range(1, levels):
        for gid in checked(by_level[li], 256):
            group = groups[gid]
            parent_doms = set(groups[group.parent].pref_domains)
            group.pref_domains = [d for d in group.pref_domains
                                  if _parent_at(structure, d, kinds, li - 1) in parent_doms]
    return JobStructure(job.index, sizes, kinds, groups, by_level, candidates, eligible, trees,
                        max_groups=max_groups)


def avoided_cells(structure: Structure, job: JobView) -> set[int]:
    """Cells holding the old node of one of ``job``'s fault ranks (singleton cells).

    The anonymous pool of a whole-node job never takes them: anonymous groups are counted,
    not identified, so the model could not tell whether the group given such a node is
    one whose fault rank would be forced back onto it.
    """
    out: set[int] = set()
    for r in np.flatnonzero(job.fault & (job.origin >= 0)).tolist():
        cid = structure.cell_of.get(int(job.origin[r]))
        if cid is not None:
            out.add(cid)
    return out


def _leaf_of(structure: Structure, leaf_kind: str, cid: int) -> int:
    """The leaf domain of kind ``leaf_kind`` holding cell ``cid``."""
    if leaf_kind == "ml":
        return structure.leaf_domain[(cid, "ml", structure.cells[cid].tree)]
    return structure.leaf_domain[(cid, leaf_kind, -1)]


def _parent_at(structure: Structure, domain: int, kinds: list[str], level_index: int) -> int:
    """The ancestor of ``domain`` at job level ``level_index`` (kinds give the levels)."""
    d = domain
    while d >= 0:
        dom = structure.domains[d]
        want = kinds[level_index]
        if dom.kind == want and (want != "ml" or dom.level == len(kinds) - level_index):
            return d
        d = dom.parent
    return -1


def parent_at(structure: Structure, job: JobStructure, domain: int, level_index: int) -> int:
    """Public form of :func:`_parent_at` for a job structure."""
    return _parent_at(structure, domain, job.kinds, level_index)


def _ordinary_candidates(
    problem: Problem,
    structure: Structure,
    pinned: dict[int, np.ndarray],
    extra_nodes: dict[int, list[int]],
    keep: np.ndarray | None = None,
    skip: frozenset[int] = frozenset(),
    lean: bool = False,
) -> None:
    """Candidate nodes of the node-level jobs (``structure.ordinary``).

    In a lean model (``lean``) a node-level 950 job takes, of the single-node cells
    (other jobs' cached nodes), only its own current and cached nodes: at 65,536 nodes a
    950 step's single-node cells are 900-1,300 cached nodes of its large jobs, and every
    one-rank job of the neighbourhood had a variable pair for each.
    """
    jobs = [job for job in problem.jobs
            if is_node_job(job) and job.index not in pinned and job.index not in skip]
    if not jobs:
        return
    # Partly running whole-node jobs (structure.pod) take whole nodes of a cell from its
    # end, the other node-level jobs from its start: any solution can be relabelled so
    # (nodes of a cell are interchangeable), and neither enlarges the other's candidates
    demand = sum(placed_count(job) for job in jobs if job.index not in structure.pod)
    pod_demand = sum(placed_count(job) for job in jobs if job.index in structure.pod)
    pinned_use = np.zeros(problem.num_nodes, dtype=np.int64)
    for j, nodes in pinned.items():
        np.add.at(pinned_use, problem.jobs[j].placed_nodes(nodes), problem.jobs[j].npu_per_task)
    free = problem.free - pinned_use
    usable = (free > 0) & (problem.health != UNHEALTHY)
    if keep is not None:
        usable &= keep
    reps: set[int] = set()
    pod_reps: set[int] = set()
    # whole-free cells: the first `demand` nodes of each cell (the last `pod_demand`)
    for cell in checked(structure.cells, 256):
        reps.update(cell.nodes[:demand])
        if pod_demand:
            pod_reps.update(cell.nodes[-pod_demand:])
    # partly used nodes: classes of interchangeable nodes
    classes: dict[tuple[int, ...], list[int]] = defaultdict(list)
    key: tuple[int, ...]
    order = problem.natural_order
    images = node_image_classes(problem, pinned, skip)
    for n in checked(order[usable[order]].tolist(), 1024):
        if n in structure.cell_of:
            continue
        key = (int(free[n]), int(problem.npus[n]), int(problem.health[n]),
               int(problem.super_pod[n] >= 0), int(problem.rack[n] >= 0),
               int(images[n]) if images is not None else 0)
        if n in structure.special:
            key = (*key, n)
        classes[key].append(n)
    for members in classes.values():
        reps.update(members[:demand])
    for job in jobs:
        checkpoint()
        mine = []
        pool = (pod_reps if job.index in structure.pod else reps) | set(
            extra_nodes.get(job.index, []))
        own = {int(n) for n in job.origin if n >= 0}
        if lean and job.rules.in_rack:
            own |= set(extra_nodes.get(job.index, []))
            pool = {n for n in pool if n in own or n not in structure.cell_of
                    or not structure.cells[structure.cell_of[n]].singleton}
        pool |= own
        in_super_pod, in_rack = job.rules.in_super_pod, job.rules.in_rack
        for n in checked(sorted(pool, key=lambda x: int(problem.natural_pos[x])), 1024):
            if free[n] < job.npu_per_task or not usable[n]:
                continue
            if in_super_pod and problem.super_pod[n] < 0:
                continue
            if in_rack and problem.rack[n] < 0:
                continue
            scope = structure.pod.get(job.index)
            if scope is not None and not scope.mask[n]:
                continue
            mine.append(n)
        structure.ordinary[job.index] = OrdinaryStructure(job.index, mine)
    structure.ordinary_nodes = sorted({n for o in structure.ordinary.values() for n in o.nodes},
                                      key=lambda x: int(problem.natural_pos[x]))


def subhealthy(cell: Cell) -> bool:
    """Whether the cell's nodes are sub-healthy."""
    return cell.health == SUBHEALTHY
