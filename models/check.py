"""The placement validator: every hard constraint of the contract, independent of engines.

``check(scenario, placement)`` is the specification and the test oracle.  It reads only
the models (the scenario, its compiled arrays and the placement file) and shares no code
with any engine.  Every engine's answer goes through it before it is returned.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from enum import StrEnum

from models.compiled import UNHEALTHY, Problem, compile_scenario
from models.placement import PlacementFile
from models.scenario import DEFAULT_TOPOTREE, TOPOTREE_LABEL, Family, Scenario
from models.validation import UB_MEM_RACKS


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


def check(scenario: Scenario | Problem, placement: PlacementFile) -> list[Violation]:
    """Check a placement against every hard constraint of the contract.

    Parameters
    ----------
    scenario
        The scenario (or its compiled view) the placement answers.
    placement
        The engine's answer.

    Returns
    -------
    list of Violation
        Empty when the placement is valid.
    """
    problem = _as_problem(scenario)
    out: list[Violation] = []
    names = problem.node_index
    seen: set[str] = set()
    for jp in placement.jobs:
        if jp.name not in problem.job_index:
            out.append(Violation(Rule.FORMAT, f"job '{jp.name}' is not in the scenario", jp.name))
        elif jp.name in seen:
            out.append(Violation(Rule.FORMAT, f"job '{jp.name}' appears twice", jp.name))
        seen.add(jp.name)
    for job in problem.jobs:
        if job.name not in seen:
            out.append(
                Violation(Rule.FORMAT, f"job '{job.name}' is missing from the placement", job.name)
            )

    chips: Counter[int] = Counter()
    whole_users: dict[int, list[str]] = defaultdict(list)
    any_users: dict[int, set[str]] = defaultdict(set)
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
        expected = {str(r) for r in range(job.tasks)}
        keys = set(jp.ranks)
        if keys != expected:
            lacking = sorted(expected - keys, key=int)[:5]
            extra = sorted(keys - expected)[:5]
            out.append(
                Violation(
                    Rule.GANG,
                    f"job '{job.name}' must place every rank 0..{job.tasks - 1} exactly once "
                    f"(missing {lacking}, unexpected {extra})",
                    job.name,
                )
            )
            continue
        nodes: list[int] = []
        bad_node = False
        for r in range(job.tasks):
            name = jp.ranks[str(r)]
            n = names.get(name)
            if n is None:
                out.append(
                    Violation(
                        Rule.FORMAT, f"job '{job.name}' rank {r}: node '{name}' does not exist",
                        job.name, name,
                    )
                )
                bad_node = True
                continue
            nodes.append(n)
        if bad_node:
            continue
        for r, n in enumerate(nodes):
            chips[n] += job.npu_per_task
            any_users[n].add(job.name)
            if job.whole_node:
                whole_users[n].append(f"{job.name}/{r}")
            if problem.health[n] == UNHEALTHY:
                out.append(
                    Violation(
                        Rule.UNHEALTHY,
                        f"job '{job.name}' rank {r} is on unhealthy node '{problem.node_names[n]}'",
                        job.name, problem.node_names[n],
                    )
                )
        out.extend(_check_structure(problem, job.index, nodes, jp.blocks))

    for n, used in chips.items():
        if used > problem.free[n]:
            out.append(
                Violation(
                    Rule.CAPACITY,
                    f"node '{problem.node_names[n]}' gets {used} NPUs but has only "
                    f"{problem.free[n]} free (jobs {sorted(any_users[n])})",
                    None, problem.node_names[n],
                )
            )
    for n, users in whole_users.items():
        name = problem.node_names[n]
        if len(users) > 1 or len(any_users[n]) > 1:
            out.append(
                Violation(
                    Rule.WHOLE_NODE,
                    f"node '{name}' hosts a whole-node task and other tasks too: "
                    f"{users} (jobs {sorted(any_users[n])})",
                    None, name,
                )
            )
    return out


def _check_structure(
    problem: Problem, j: int, nodes: list[int], blocks: dict[str, list[str]]
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
        for r, n in enumerate(nodes):
            if problem.npus[n] != job.npu_per_task:
                bad(Rule.WHOLE_NODE,
                    f"rank {r} needs a whole node of {job.npu_per_task} NPUs but "
                    f"'{node_name[n]}' has {problem.npus[n]}", n)
            elif problem.free[n] != problem.npus[n]:
                bad(Rule.WHOLE_NODE,
                    f"rank {r} needs a completely free node but '{node_name[n]}' has only "
                    f"{problem.free[n]} of {problem.npus[n]} NPUs free", n)
        dup = [node_name[n] for n, c in Counter(nodes).items() if c > 1]
        if dup:
            bad(Rule.WHOLE_NODE, f"several ranks share whole nodes {sorted(dup)[:5]}")

    if job.family in (Family.SUPERPOD, Family.RACK):
        size = job.sp_block
        for r, n in enumerate(nodes):
            if problem.super_pod[n] < 0:
                bad(Rule.SUPER_POD, f"rank {r} is on '{node_name[n]}', which is in no super pod", n)
            if job.family is Family.RACK and problem.rack[n] < 0:
                bad(Rule.RACK_WINDOW, f"rank {r} is on '{node_name[n]}', which is in no rack", n)
        if not job.soft:
            for b in range(job.tasks // size):
                members = nodes[b * size:(b + 1) * size]
                pods = {int(problem.super_pod[n]) for n in members}
                if len(pods) > 1:
                    bad(Rule.SUPER_POD,
                        f"block {b} (ranks {b * size}..{(b + 1) * size - 1}) spans super pods "
                        f"{sorted(pods)}")
            if job.family is Family.RACK:
                window = job.tp_block
                for w in range(job.tasks // window):
                    members = nodes[w * window:(w + 1) * window]
                    racks = {int(problem.rack[n]) for n in members}
                    if len(racks) > 1:
                        bad(Rule.RACK_WINDOW,
                            f"rack window {w} (ranks {w * window}..{(w + 1) * window - 1}) spans "
                            f"racks {sorted(racks)}")
        if job.family is Family.RACK and job.ub_memory and job.tasks > 1:
            domains = {int(problem.rack[n]) // UB_MEM_RACKS for n in nodes
                       if problem.rack[n] >= 0}
            if len(domains) > 1:
                bad(Rule.UB_MEMORY,
                    f"a UB-memory job must sit in one UB-memory domain (16 consecutive racks, "
                    f"rack-id // 16) but uses domains {sorted(domains)}")
        out.extend(_check_blocks(job.name, job.tasks, size, nodes, blocks, node_name))
    elif job.family is Family.MULTILEVEL:
        out.extend(_check_multilevel(problem, j, nodes))
        out.extend(_check_blocks(job.name, job.tasks, job.levels[0], nodes, blocks, node_name))
    elif blocks:
        bad(Rule.FORMAT, "an ordinary job has no blocks")
    return out


def _check_blocks(
    job_name: str,
    tasks: int,
    size: int,
    nodes: list[int],
    blocks: dict[str, list[str]],
    node_name: tuple[str, ...],
) -> list[Violation]:
    """``blocks``, when given, must list each block's nodes in rank order."""
    if not blocks:
        return []
    expected = {
        str(b): [node_name[n] for n in nodes[b * size:(b + 1) * size]] for b in range(tasks // size)
    }
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


def _check_multilevel(problem: Problem, j: int, nodes: list[int]) -> list[Violation]:
    job = problem.jobs[j]
    labels_of = problem.scenario.nodes
    out: list[Violation] = []
    trees = {labels_of[n].labels.get(TOPOTREE_LABEL, DEFAULT_TOPOTREE) for n in nodes}
    if len(trees) != 1:
        return [
            Violation(Rule.TOPOTREE,
                      f"job '{job.name}': nodes belong to several topotrees {sorted(trees)}",
                      job.name)
        ]
    tree_name = trees.pop()
    config = problem.scenario.config.resource_level_config.get(tree_name)
    if config is None:
        return [
            Violation(Rule.TOPOTREE,
                      f"job '{job.name}': topotree '{tree_name}' is not in resource-level-config",
                      job.name)
        ]
    depth = len(config)
    if depth < len(job.levels):
        return [
            Violation(Rule.TOPOTREE,
                      f"job '{job.name}': topotree '{tree_name}' has {depth} levels but the "
                      f"affinity-config has {len(job.levels)}", job.name)
        ]
    # Levels above the job's own are trimmed before any label is read (upstream
    # removeRedundantLayers): only the labels of level1..levelK must be present.
    for i in range(1, len(job.levels) + 1):
        label = config[f"level{i}"].label
        for r, n in enumerate(nodes):
            if label not in labels_of[n].labels:
                out.append(
                    Violation(Rule.TOPOTREE,
                              f"job '{job.name}': rank {r} is on '{problem.node_names[n]}', "
                              f"which lacks label '{label}' of tree '{tree_name}'",
                              job.name, problem.node_names[n])
                )
    if out:
        return out
    for i, group in enumerate(job.levels, start=1):
        label = config[f"level{i}"].label
        for g in range(job.tasks // group):
            members = nodes[g * group:(g + 1) * group]
            values = {labels_of[n].labels[label] for n in members}
            if len(values) > 1:
                out.append(
                    Violation(Rule.MULTILEVEL,
                              f"job '{job.name}': level{i} group {g} (ranks {g * group}.."
                              f"{(g + 1) * group - 1}) spans {label} values {sorted(values)}",
                              job.name)
                )
    return out
