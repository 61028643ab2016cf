"""The placement validator: every hard constraint of the contract, independent of engines.

``check(scenario, placement)`` is the specification and the test oracle.  It reads only
the models (the scenario, its compiled arrays and the placement file) and shares no code
with any engine.  Every engine's answer goes through it before it is returned.

A partly running job (``running-ranks``) lists only the ranks it places; its running
ranks are fixed on their nodes and count for every structural rule of the job (blocks,
rack windows, UB memory, multilevel groups, topotree, whole nodes not shared), while
capacity, health and "completely free node" are checked for the placed ranks only (the
running ranks' chips are not in ``free``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from models.compiled import UNHEALTHY, Problem, compile_scenario, distinct
from models.limits import listing
from models.placement import PlacementFile
from models.scenario import DEFAULT_TOPOTREE, TOPOTREE_LABEL, Scenario
from models.validation import UB_MEM_RACKS
from models.vnpu import check_vnpu, compile_vnpu


class Rule(StrEnum):
    """The hard-constraint families a violation can break."""

    FORMAT = "format"  # the placement does not describe the scenario's jobs correctly
    GANG = "gang"
    CAPACITY = "capacity"
    UNHEALTHY = "unhealthy"
    WHOLE_NODE = "whole-node"
    SUPER_POD = "super-pod"
    RACK_WINDOW = "rack-window"
    UB_MEMORY = "ub-memory"
    MULTILEVEL = "multilevel"
    TOPOTREE = "topotree"
    VNPU_CHIP = "vnpu-chip"  # chip-level capacity, whole cards, DVPP, unstable chips
    VNPU_TEMPLATE = "vnpu-template"  # one template per node for unfinished slices
    VNPU_REQUEST = "vnpu-request"  # the request against the node's own chip kind
    VNPU_DOWNGRADE = "vnpu-downgrade"  # the 310P AI-CPU downgrade only where upstream takes it
    VNPU_FAMILY = "vnpu-family"  # one handler family (ring-controller.atlas) per job


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken hard constraint."""

    rule: Rule
    message: str
    job: str | None = None
    node: str | None = None

    def __str__(self) -> str:
        return f"[{self.rule}] {self.message}"


def _as_problem(scenario: Scenario | Problem) -> Problem:
    return scenario if isinstance(scenario, Problem) else compile_scenario(scenario)


def check(scenario: Scenario | Problem, placement: PlacementFile, *,
          include_vnpu: bool = True) -> list[Violation]:
    """Check a placement against every hard constraint of the contract.

    Parameters
    ----------
    scenario
        The scenario (or its compiled view) the placement answers.
    placement
        The engine's answer.
    include_vnpu
        Also require and check the ``vnpu-jobs`` (default).  ``False`` checks the other
        jobs only: what an engine of those families answers (vNPU nodes then count as
        full, so nothing else may use them).

    Returns
    -------
    list of Violation
        Empty when the placement is valid.
    """
    problem = _as_problem(scenario)
    out: list[Violation] = []
    names = problem.node_index
    seen: set[str] = set()
    vnpu = compile_vnpu(problem)
    for jp in placement.jobs:
        if include_vnpu and jp.name in vnpu.job_index and jp.name not in problem.job_index:
            if jp.name in seen:
                out.append(Violation(Rule.FORMAT, f"job '{jp.name}' appears twice", jp.name))
            seen.add(jp.name)
            if not jp.placed and not jp.reason:
                out.append(Violation(Rule.FORMAT, f"job '{jp.name}' is not placed and gives "
                                     "no reason", jp.name))
        elif jp.name not in problem.job_index:
            out.append(Violation(Rule.FORMAT, f"job '{jp.name}' is not in the scenario", jp.name))
        elif jp.name in seen:
            out.append(Violation(Rule.FORMAT, f"job '{jp.name}' appears twice", jp.name))
        seen.add(jp.name)
    vnpu_names = [job.name for job in vnpu.jobs] if include_vnpu else []
    for job_name in [job.name for job in problem.jobs] + vnpu_names:
        if job_name not in seen:
            out.append(
                Violation(Rule.FORMAT, f"job '{job_name}' is missing from the placement", job_name)
            )
    if vnpu_names:
        out.extend(Violation(Rule(v.rule), v.message, v.job, v.node)
                   for v in check_vnpu(problem, placement))

    hosts: list[np.ndarray] = []  # node per placed rank of every well-formed placed job
    host_ranks: list[np.ndarray] = []  # the rank of each entry of ``hosts``
    owners: list[int] = []  # the job index of each entry of ``hosts``
    for jp in placement.jobs:
        j = problem.job_index.get(jp.name)
        if j is None:
            continue
        job = problem.jobs[j]
        if not jp.placed:
            if jp.ranks:
                out.append(Violation(Rule.GANG,
                                     f"job '{job.name}' is not placed but lists ranks", job.name))
            if not jp.reason:
                out.append(
                    Violation(
                        Rule.FORMAT, f"job '{job.name}' is not placed and gives no reason", job.name
                    )
                )
            continue
        to_place = job.to_place
        running = job.running if job.partly_running else None
        rank_names = _rank_names(jp.ranks, job.tasks, running, problem.node_names)
        if rank_names is None:
            expected = {str(r) for r in range(job.tasks) if to_place[r]}
            keys = set(jp.ranks)
            lacking = sorted(expected - keys, key=int)[:5]
            extra = sorted(keys - expected)[:5]
            text = (f"job '{job.name}' must place every rank 0..{job.tasks - 1} exactly once "
                    f"(missing {lacking}, unexpected {extra})")
            if running is not None:
                text = (f"job '{job.name}' must place every rank that is not running exactly "
                        f"once, and no running rank (missing {lacking}, unexpected {extra})")
            out.append(Violation(Rule.GANG, text, job.name))
            continue
        found = [names.get(name) for name in rank_names]
        if None in found:
            for r, (name, n) in enumerate(zip(rank_names, found, strict=True)):
                if n is None:
                    out.append(
                        Violation(
                            Rule.FORMAT,
                            f"job '{job.name}' rank {r}: node '{name}' does not exist",
                            job.name, name,
                        )
                    )
            continue
        nodes = np.asarray(found, dtype=np.int64)
        for r in np.flatnonzero((problem.health[nodes] == UNHEALTHY) & to_place).tolist():
            n = int(nodes[r])
            out.append(
                Violation(
                    Rule.UNHEALTHY,
                    f"job '{job.name}' rank {r} is on unhealthy node '{problem.node_names[n]}'",
                    job.name, problem.node_names[n],
                )
            )
        hosts.append(nodes[to_place])
        host_ranks.append(np.flatnonzero(to_place))
        owners.append(j)
        out.extend(_check_structure(problem, job.index, nodes, rank_names, jp.blocks))
    if hosts:
        out.extend(_check_sharing(problem, hosts, host_ranks, owners))
    return out


def _rank_names(ranks: dict[str, str], tasks: int, running: np.ndarray | None,
                node_names: tuple[str, ...]) -> list[str] | None:
    """Node name per rank ``0..tasks-1``, or ``None`` unless the keys are exactly the
    ranks to place (every rank, or those not in ``running``: those keep their node)."""
    if running is None:
        if len(ranks) != tasks:
            return None
        try:
            return [ranks[str(r)] for r in range(tasks)]
        except KeyError:
            return None
    if len(ranks) != int((running < 0).sum()):
        return None
    out = []
    for r in range(tasks):
        n = int(running[r])
        if n >= 0:
            out.append(node_names[n])
        else:
            name = ranks.get(str(r))
            if name is None:
                return None
            out.append(name)
    return out


def _check_sharing(
    problem: Problem, hosts: list[np.ndarray], host_ranks: list[np.ndarray],
    owners: list[int],
) -> list[Violation]:
    """Capacity of every node, and whole-node tasks alone on theirs, over all placed jobs.

    Violations come in the order in which their node first appears (placement order).
    """
    out: list[Violation] = []
    jobs = problem.jobs
    nodes = np.concatenate(hosts)
    owner = np.concatenate([np.full(len(h), j, dtype=np.int64)
                            for h, j in zip(hosts, owners, strict=True)])
    rank = np.concatenate(host_ranks)
    npu = np.asarray([jobs[j].npu_per_task for j in range(len(jobs))], dtype=np.int64)[owner]
    whole = np.asarray([jobs[j].whole_node for j in range(len(jobs))], dtype=bool)[owner]
    size = problem.num_nodes
    chips = np.zeros(size, dtype=np.int64)
    np.add.at(chips, nodes, npu)
    first = np.full(size, len(nodes), dtype=np.int64)
    np.minimum.at(first, nodes, np.arange(len(nodes)))

    def users(n: int) -> list[str]:
        return sorted({jobs[j].name for j in owner[nodes == n].tolist()})

    over = np.flatnonzero(chips > problem.free)
    for n in over[np.argsort(first[over], kind="stable")].tolist():
        out.append(
            Violation(
                Rule.CAPACITY,
                f"node '{problem.node_names[n]}' gets {int(chips[n])} NPUs but has only "
                f"{problem.free[n]} free (jobs {listing(users(n))})",
                None, problem.node_names[n],
            )
        )
    if whole.any():
        tasks = np.bincount(nodes, minlength=size)
        whole_tasks = np.bincount(nodes[whole], minlength=size)
        first_whole = np.full(size, len(nodes), dtype=np.int64)
        np.minimum.at(first_whole, nodes[whole], np.flatnonzero(whole))
        shared = np.flatnonzero((whole_tasks > 0) & (tasks > 1))
        for n in shared[np.argsort(first_whole[shared], kind="stable")].tolist():
            name = problem.node_names[n]
            here = np.flatnonzero((nodes == n) & whole).tolist()
            listed = [f"{jobs[int(owner[p])].name}/{int(rank[p])}" for p in here]
            out.append(
                Violation(
                    Rule.WHOLE_NODE,
                    f"node '{name}' hosts a whole-node task and other tasks too: "
                    f"{listing(listed)} (jobs {listing(users(n))})",
                    None, name,
                )
            )
    return out


def _check_structure(
    problem: Problem, j: int, nodes: np.ndarray, rank_names: list[str],
    blocks: dict[str, list[str]],
) -> list[Violation]:
    job = problem.jobs[j]
    out: list[Violation] = []
    node_name = problem.node_names

    def bad(rule: Rule, text: str, node: int | None = None) -> None:
        out.append(
            Violation(rule, f"job '{job.name}': {text}", job.name,
                      node_name[node] if node is not None else None)
        )

    if job.whole_node:
        npus, free = problem.npus[nodes], problem.free[nodes]
        wrong_size = npus != job.npu_per_task
        # a running rank's chips are not in ``free``: only placed ranks need a free node
        for r in np.flatnonzero((wrong_size | (free != npus)) & job.to_place).tolist():
            n = int(nodes[r])
            if wrong_size[r]:
                bad(Rule.WHOLE_NODE,
                    f"rank {r} needs a whole node of {job.npu_per_task} NPUs but "
                    f"'{node_name[n]}' has {problem.npus[n]}", n)
            else:
                bad(Rule.WHOLE_NODE,
                    f"rank {r} needs a completely free node but '{node_name[n]}' has only "
                    f"{problem.free[n]} of {problem.npus[n]} NPUs free", n)
        used, counts = np.unique(nodes, return_counts=True)
        dup = [node_name[n] for n in used[counts > 1].tolist()]
        if dup:
            bad(Rule.WHOLE_NODE, f"several ranks share whole nodes {listing(sorted(dup)[:5])}")

    if job.rules.in_super_pod:
        size = job.sp_block
        pods = problem.super_pod[nodes]
        racks = problem.rack[nodes]
        no_rack = (racks < 0) if job.rules.in_rack else np.zeros(len(nodes), dtype=bool)
        for r in np.flatnonzero((pods < 0) | no_rack).tolist():
            n = int(nodes[r])
            if pods[r] < 0:
                bad(Rule.SUPER_POD, f"rank {r} is on '{node_name[n]}', which is in no super pod", n)
            if no_rack[r]:
                bad(Rule.RACK_WINDOW, f"rank {r} is on '{node_name[n]}', which is in no rack", n)
        if not job.soft:
            for b, values in _split_groups(pods, size):
                bad(Rule.SUPER_POD,
                    f"block {b} (ranks {b * size}..{(b + 1) * size - 1}) spans super pods "
                    f"{values}")
            if job.rules.in_rack:
                window = job.tp_block
                for w, values in _split_groups(racks, window):
                    bad(Rule.RACK_WINDOW,
                        f"rack window {w} (ranks {w * window}..{(w + 1) * window - 1}) spans "
                        f"racks {values}")
        if job.rules.in_rack and job.ub_memory and job.tasks > 1:
            domains = distinct(racks[racks >= 0] // UB_MEM_RACKS).tolist()
            if len(domains) > 1:
                bad(Rule.UB_MEMORY,
                    f"a UB-memory job must sit in one UB-memory domain (16 consecutive racks, "
                    f"rack-id // 16) but uses domains {listing(domains)}")
        out.extend(_check_blocks(job.name, job.tasks, size, rank_names, blocks))
    elif job.rules.in_tree:
        out.extend(_check_multilevel(problem, j, nodes))
        out.extend(_check_blocks(job.name, job.tasks, job.levels[0], rank_names, blocks))
    elif blocks:
        bad(Rule.FORMAT, "an ordinary job has no blocks")
    return out


def running_rank_violations(problem: Problem, j: int) -> list[Violation]:
    """Hard rules of partly running job ``j`` that its running ranks alone already break.

    The running ranks never move (``running-ranks``), so a job whose running ranks sit in
    two super pods of one block, two racks of one rack window, two UB-memory domains, two
    domains of one multilevel group, on a node outside the job's super pods, racks or
    topotree, can never be completed: every engine leaves it pending with this reason
    (``heuristics.podlevel``) and places the other jobs.  The rules are those of
    :func:`check`, read for the running ranks only.

    Returns
    -------
    list of Violation
        Empty when the running ranks keep every structural rule of the job (and for a job
        that is not partly running).
    """
    job = problem.jobs[j]
    if not job.partly_running or not job.rules.grouped:
        return []
    running = job.running.astype(np.int64)
    held = running >= 0
    nodes = np.where(held, running, 0)
    node_name = problem.node_names
    out: list[Violation] = []

    def bad(rule: Rule, text: str, node: int | None = None) -> None:
        out.append(Violation(rule, f"job '{job.name}': {text}", job.name,
                             node_name[node] if node is not None else None))

    if job.rules.in_super_pod:
        pods = problem.super_pod[nodes]
        racks = problem.rack[nodes]
        for r in np.flatnonzero(held & (pods < 0)).tolist():
            bad(Rule.SUPER_POD, f"running rank {r} is on '{node_name[running[r]]}', which is "
                "in no super pod", int(running[r]))
        if job.rules.in_rack:
            for r in np.flatnonzero(held & (racks < 0)).tolist():
                bad(Rule.RACK_WINDOW, f"running rank {r} is on '{node_name[running[r]]}', "
                    "which is in no rack", int(running[r]))
        if not job.soft:
            size = job.sp_block
            for b, values in _split_held_groups(pods, held, size):
                bad(Rule.SUPER_POD, f"the running ranks of block {b} (ranks {b * size}.."
                    f"{(b + 1) * size - 1}) sit in super pods {values}")
            if job.rules.in_rack:
                size = job.tp_block
                for w, values in _split_held_groups(racks, held, size):
                    bad(Rule.RACK_WINDOW, f"the running ranks of rack window {w} (ranks "
                        f"{w * size}..{(w + 1) * size - 1}) sit in racks {values}")
        if job.rules.in_rack and job.ub_memory:
            kept = racks[held]
            domains = distinct(kept[kept >= 0] // UB_MEM_RACKS).tolist()
            if len(domains) > 1:
                bad(Rule.UB_MEMORY, "the running ranks of a UB-memory job sit in UB-memory "
                    f"domains {listing(domains)}")
    elif job.rules.in_tree:
        on = running[held]
        trees = distinct(problem.node_tree[on]).tolist()
        if len(trees) != 1 or trees[0] < 0:
            shown = sorted({node_name[n] for n in on.tolist()})[:5]
            bad(Rule.TOPOTREE, f"the running ranks are not in one configured topotree "
                f"(nodes {listing(shown)})")
            return out
        tree_name = problem.tree_names[int(trees[0])]
        view = problem.trees[tree_name]
        if view.depth < len(job.levels):
            bad(Rule.TOPOTREE, f"topotree '{tree_name}' of the running ranks has {view.depth} "
                f"levels but the affinity-config has {len(job.levels)}")
            return out
        for i, size in enumerate(job.levels):
            level = view.level_value[i][nodes]
            lacking = np.flatnonzero(held & (level < 0)).tolist()
            for r in lacking:
                bad(Rule.TOPOTREE, f"running rank {r} is on '{node_name[running[r]]}', which "
                    f"lacks label '{view.labels[i]}' of tree '{tree_name}'", int(running[r]))
            if lacking:
                continue
            for g, split in _split_held_groups(level, held, size):
                shown = sorted(view.level_values[i][v] for v in split)
                bad(Rule.MULTILEVEL, f"the running ranks of level{i + 1} group {g} (ranks "
                    f"{g * size}..{(g + 1) * size - 1}) span {view.labels[i]} values {shown}")
    return out


def running_rank_reason(problem: Problem, j: int) -> str | None:
    """Why partly running job ``j`` cannot be completed around its running ranks
    (:func:`running_rank_violations`, the first one named), or ``None``."""
    broken = running_rank_violations(problem, j)
    if not broken:
        return None
    more = f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
    return (f"running ranks already break a hard rule, the job cannot be completed around "
            f"them until they are rescheduled: {broken[0]}{more}")


def _split_held_groups(values: np.ndarray, held: np.ndarray,
                       size: int) -> list[tuple[int, list[int]]]:
    """Consecutive groups of ``size`` ranks whose ``held`` ranks' ``values`` differ:
    (group, sorted values of the held ranks)."""
    groups = len(values) // size
    rows = values[:groups * size].astype(np.int64).reshape(groups, size)
    mask = held[:groups * size].reshape(groups, size)
    big = np.iinfo(np.int64).max
    low = np.where(mask, rows, big).min(axis=1)
    high = np.where(mask, rows, -big).max(axis=1)
    return [(g, distinct(rows[g][mask[g]]).tolist())
            for g in np.flatnonzero(mask.any(axis=1) & (low < high)).tolist()]


def _split_groups(values: np.ndarray, size: int) -> list[tuple[int, list[int]]]:
    """Consecutive groups of ``size`` ranks whose ``values`` differ: (group, sorted values)."""
    groups = len(values) // size
    rows = values[:groups * size].reshape(groups, size)
    split = np.flatnonzero((rows != rows[:, :1]).any(axis=1)).tolist()
    return [(g, sorted(set(rows[g].tolist()))) for g in split]


def _check_blocks(
    job_name: str,
    tasks: int,
    size: int,
    rank_names: list[str],
    blocks: dict[str, list[str]],
) -> list[Violation]:
    """``blocks``, when given, must list each block's nodes in rank order."""
    if not blocks:
        return []
    count = tasks // size
    expected = {str(b): rank_names[b * size:(b + 1) * size] for b in range(count)}
    if blocks != expected:
        wrong = sorted(set(blocks) ^ set(expected)) or sorted(
            k for k in expected if blocks.get(k) != expected[k]
        )
        return [
            Violation(
                Rule.FORMAT,
                f"job '{job_name}': 'blocks' does not match 'ranks' (block b must list the "
                f"nodes of ranks b*{size}..b*{size}+{size - 1} in order); first differing "
                f"blocks: {wrong[:5]}",
                job_name,
            )
        ]
    return []


def _check_multilevel(problem: Problem, j: int, nodes: np.ndarray) -> list[Violation]:
    job = problem.jobs[j]
    out: list[Violation] = []
    t = int(problem.node_tree[nodes[0]])
    if t < 0 or not (problem.node_tree[nodes] == t).all():
        labels_of = problem.scenario.nodes
        trees = {labels_of[n].labels.get(TOPOTREE_LABEL, DEFAULT_TOPOTREE)
                 for n in nodes.tolist()}
        if len(trees) != 1:
            return [
                Violation(Rule.TOPOTREE,
                          f"job '{job.name}': nodes belong to several topotrees "
                          f"{listing(sorted(trees))}",
                          job.name)
            ]
        return [
            Violation(Rule.TOPOTREE,
                      f"job '{job.name}': topotree '{trees.pop()}' is not in "
                      "resource-level-config", job.name)
        ]
    tree_name = problem.tree_names[t]
    view = problem.trees[tree_name]
    if view.depth < len(job.levels):
        return [
            Violation(Rule.TOPOTREE,
                      f"job '{job.name}': topotree '{tree_name}' has {view.depth} levels but the "
                      f"affinity-config has {len(job.levels)}", job.name)
        ]
    # Levels above the job's own are trimmed before any label is read (upstream
    # removeRedundantLayers): only the labels of level1..levelK must be present.
    values = [view.level_value[i][nodes] for i in range(len(job.levels))]
    for i, label in enumerate(view.labels[:len(job.levels)]):
        for r in np.flatnonzero(values[i] < 0).tolist():
            out.append(
                Violation(Rule.TOPOTREE,
                          f"job '{job.name}': rank {r} is on '{problem.node_names[nodes[r]]}', "
                          f"which lacks label '{label}' of tree '{tree_name}'",
                          job.name, problem.node_names[nodes[r]])
            )
    if out:
        return out
    for i, group in enumerate(job.levels):
        label = view.labels[i]
        for g, split in _split_groups(values[i], group):
            shown = sorted(view.level_values[i][v] for v in split)
            out.append(
                Violation(Rule.MULTILEVEL,
                          f"job '{job.name}': level{i + 1} group {g} (ranks {g * group}.."
                          f"{(g + 1) * group - 1}) spans {label} values {shown}",
                          job.name)
            )
    return out
