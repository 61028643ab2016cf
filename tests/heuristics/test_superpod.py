"""Tests of the super-pod greedy strategy (A3 / 850): upstream examples, RFC cases, properties."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import models
from heuristics.base import JobOutcome
from heuristics.greedy import greedy_plan
from heuristics.state import ClusterState
from heuristics.superpod import (
    classify_super_pods,
    place_superpod,
    select_super_pod_for_job,
    superpod_candidates,
)
from models.check import check
from models.compiled import Problem, compile_scenario
from models.placement import Status
from models.plan import Plan, to_placement
from models.scenario import (
    AffinityCacheModel,
    CacheEntry,
    Config,
    Job,
    Node,
    Scenario,
)

NOW = 1_764_400_000
OWNER = "owner-1"
EXAMPLE_850 = Path(models.__file__).parent / "examples" / "superpod-850.yaml"

# (policy, NPUs per node) of the three super-pod policies.
A3_X16 = ("chip2-node16-sp", 16)
A3_X8 = ("chip2-node8-sp", 8)
SP850 = ("chip8-node8-sp", 8)


# ----------------------------------------------------------------------------- helpers


def nd(name: str, sp: int | None, *, npus: int = 8, free: int | None = None,
       health: str = "healthy") -> Node:
    """A node (all chips free unless ``free`` says otherwise)."""
    return Node(name=name, npus=npus, free=npus if free is None else free, health=health,
                super_pod_id=sp)


def sp_job(policy: tuple[str, int], tasks: int, sp_nodes: int, *, name: str = "job",
           soft: bool = False, fault: Sequence[int] = (), owner: str | None = OWNER,
           npu_per_task: int | None = None) -> Job:
    """A super-pod job of ``tasks`` whole-node ranks in blocks of ``sp_nodes`` nodes."""
    pol, npus = policy
    npt = npus if npu_per_task is None else npu_per_task
    sp_block = sp_nodes * npus if tasks > 1 else npt
    return Job(name=name, owner_uid=owner, policy=pol, tasks=tasks, npu_per_task=npt,
               sp_block=sp_block, super_pod_affinity="soft" if soft else "hard",
               fault_ranks=list(fault))


def scenario(nodes: list[Node], jobs: list[Job], *, size: int | None = None,
             reserve: int | None = None, cache: dict[int, str] | None = None,
             prefer: bool = True, owner: str = OWNER) -> Problem:
    """Compile a scenario; ``cache`` maps rank → node for ``owner``."""
    entries = [CacheEntry(owner_uid=owner, rank=r, node=n, updated=NOW)
               for r, n in (cache or {}).items()]
    sc = Scenario(now=NOW,
                  config=Config(super_pod_size=size, reserve_nodes=reserve,
                                prefer_previous_node=prefer),
                  nodes=nodes, affinity_cache=AffinityCacheModel(entries=entries), jobs=jobs)
    return compile_scenario(sc)


def run(problem: Problem, j: int = 0) -> JobOutcome:
    """Place job ``j`` on the initial state; check validity when placed."""
    outcome = place_superpod(problem, j, ClusterState.initial(problem))
    if outcome.nodes is not None:
        assert_valid(problem, {j: outcome.nodes})
    else:
        assert outcome.reason
    return outcome


def assert_valid(problem: Problem, placed: dict[int, np.ndarray]) -> None:
    """The validator accepts ``placed`` (other jobs unplaced)."""
    plan = Plan.empty(problem)
    for j in range(len(problem.jobs)):
        if j in placed:
            plan.nodes[j] = placed[j]
        else:
            plan.reasons[j] = "not placed in this test"
    violations = check(problem, to_placement(problem, plan, engine="greedy",
                                             status=Status.GREEDY))
    assert violations == [], [str(v) for v in violations]


def names(problem: Problem, nodes: np.ndarray | None) -> list[str]:
    assert nodes is not None
    return [problem.node_names[int(n)] for n in nodes]


def pods_used(problem: Problem, nodes: np.ndarray | None) -> set[int]:
    assert nodes is not None
    return {int(problem.super_pod[int(n)]) for n in nodes}


def block_pods(problem: Problem, nodes: np.ndarray | None, sp: int) -> list[int]:
    """The super pod of each block (asserting each block sits in one)."""
    assert nodes is not None
    out = []
    for b in range(len(nodes) // sp):
        pods = {int(problem.super_pod[int(n)]) for n in nodes[b * sp:(b + 1) * sp]}
        assert len(pods) == 1
        out.append(pods.pop())
    return out


def via_greedy(problem: Problem, j: int = 0) -> np.ndarray | None:
    plan = greedy_plan(problem)
    placed = {k: v for k, v in enumerate(plan.nodes) if v is not None}
    assert_valid(problem, placed)
    return plan.nodes[j]


# ------------------------------------------------------------ E1–E8 (upstream tests)


def e_cluster(npus: int, candidates: Sequence[int]) -> list[Node]:
    """Upstream's 30 nodes node0..node29, SuperPodID = index/10; others are busy."""
    chosen = set(candidates)
    return [nd(f"node{i}", i // 10, npus=npus, free=npus if i in chosen else 0)
            for i in range(30)]


E_CASES = [
    # id, candidates, tasks, spBlock, reserve, upstream-checked pods, exact answer
    ("E2", [0, 1, 2, 3, 10, 11, 12, 13, 14, 20, 21, 22, 23, 24, 25], 4, 2, 2, {0, 1},
     ["node0", "node1", "node10", "node11"]),
    ("E3", [10, 11, 12, 13, 14, 20, 21, 22, 23, 24, 25], 4, 2, 2, {2},
     ["node20", "node21", "node22", "node23"]),
    ("E4", [*range(10, 15), *range(20, 28)], 4, 2, 2, {1, 2},
     ["node10", "node11", "node20", "node21"]),
    ("E5", [0, 1, 2, *range(10, 15), *range(20, 28)], 4, 2, 2, {1, 2},
     ["node10", "node11", "node20", "node21"]),
    ("E6", [0, 1, 2, *range(10, 15)], 4, 2, 2, {0, 1},
     ["node10", "node11", "node0", "node1"]),
    ("E7", [*range(0, 5), *range(10, 15)], 4, 2, 2, {0, 1},
     ["node0", "node1", "node10", "node11"]),
    ("E8", [0, 10, 11, 12], 1, 1, 4, {1}, ["node10"]),
]


@pytest.mark.parametrize("policy", [A3_X16, A3_X8], ids=["x16", "x8"])
@pytest.mark.parametrize(("case", "cands", "tasks", "sp", "reserve", "pods", "answer"),
                         E_CASES, ids=[c[0] for c in E_CASES])
def test_upstream_examples_e2_e8(policy: tuple[str, int], case: str, cands: list[int],
                                 tasks: int, sp: int, reserve: int, pods: set[int],
                                 answer: list[str]) -> None:
    problem = scenario(e_cluster(policy[1], cands), [sp_job(policy, tasks, sp)],
                       size=10, reserve=reserve)
    outcome = run(problem)
    assert pods_used(problem, outcome.nodes) == pods  # what upstream's test checks
    assert names(problem, outcome.nodes) == answer  # our deterministic answer
    assert names(problem, via_greedy(problem)) == answer


@pytest.mark.parametrize("policy", [A3_X16, A3_X8], ids=["x16", "x8"])
def test_e1_capacity_error_text(policy: tuple[str, int]) -> None:
    problem = scenario(e_cluster(policy[1], [0, 1]), [sp_job(policy, 4, 2)], size=10,
                       reserve=2)
    mask = superpod_candidates(problem, problem.jobs[0], ClusterState.initial(problem))
    # Upstream's test calls selectSuperPodForJob directly.
    outcome = select_super_pod_for_job(problem, 0, mask)
    assert outcome.nodes is None
    assert outcome.reason == ("select super pod failed, required 2, total 1, node top: "
                              "super-pod-id: 0, node count: 2 detail: [node0 node1], ")
    # The full path stops earlier, at the "not enough node" check (§2.2 step 5).
    assert run(problem).reason == "not enough node, npuTaskNum: 4, nodes: 2"
    plan = greedy_plan(problem)
    assert plan.nodes[0] is None and plan.reasons[0] == "not enough node, npuTaskNum: 4, nodes: 2"


def test_850_capacity_error_text() -> None:
    nodes = [nd(f"a{i}", 0) for i in range(3)] + [nd("b0", 1)]
    problem = scenario(nodes, [sp_job(SP850, 4, 2)], size=10, reserve=2)
    outcome = run(problem)
    assert outcome.reason == "select super pod failed, required vitural-super-pod 2, total 1"
    # A3 names the node top.
    problem = scenario(nodes, [sp_job(A3_X8, 4, 2)], size=10, reserve=2)
    assert run(problem).reason == (
        "select super pod failed, required 2, total 1, node top: "
        "super-pod-id: 0, node count: 3 detail: [a0 a1 a2], "
        "super-pod-id: 1, node count: 1 detail: [b0], ")


# ------------------------------------------------------------------ E9, E10


E9_SIZES = {"A": 47, "B": 16, "C": 31, "D": 31, "E": 15}


@pytest.mark.parametrize(("k", "expected"), [(1, "B"), (2, "BC"), (3, "BCC"), (4, "BCCD")])
def test_e9_classification_example(k: int, expected: str) -> None:
    letters = list(E9_SIZES)
    nodes = [nd(f"{letter}-{i}", s, npus=8)
             for s, letter in enumerate(letters) for i in range(E9_SIZES[letter])]
    problem = scenario(nodes, [sp_job(SP850, 14 * k, 14)], size=48, reserve=2)
    outcome = run(problem)
    got = "".join(letters[s] for s in block_pods(problem, outcome.nodes, 14))
    assert got == expected  # E9 leaves C/D random for K=2; we take the lower ID (C)
    # Exact nodes: blocks take the first free nodes of their super pod in name order.
    used: dict[str, int] = {}
    want = []
    for letter in expected:
        start = used.get(letter, 0)
        want += [f"{letter}-{i}" for i in range(start, start + 14)]
        used[letter] = start + 14
    assert names(problem, outcome.nodes) == want


def test_e9_table() -> None:
    letters = list(E9_SIZES)
    nodes = [nd(f"{letter}-{i}", s) for s, letter in enumerate(letters)
             for i in range(E9_SIZES[letter])]
    problem = scenario(nodes, [sp_job(A3_X8, 14, 14)], size=48, reserve=2)
    mask = superpod_candidates(problem, problem.jobs[0], ClusterState.initial(problem))
    table, count = classify_super_pods(problem, 0, mask)
    assert count == 9
    cells = {(r, c): cell for r, row in enumerate(table) for c, cell in enumerate(row) if cell}
    assert cells == {(3, 3): [0], (0, 1): [1], (1, 2): [2, 3], (13, 0): [4]}


def test_e10_chip8node8sp_classify() -> None:
    nodes = [nd("0", 0), nd("1", 1), nd("2", 1), nd("3", 0)]
    problem = scenario(nodes, [sp_job(SP850, 4, 1)], size=2)  # reserve unset → 0
    assert problem.reserve_nodes == 0
    mask = superpod_candidates(problem, problem.jobs[0], ClusterState.initial(problem))
    table, count = classify_super_pods(problem, 0, mask)
    assert count == 4
    assert table[0][2] == [0, 1]
    assert sum(len(cell) for row in table for cell in row) == 2
    assert names(problem, run(problem).nodes) == ["0", "3", "1", "2"]


# --------------------------------------------------------------------- E34, E35


@pytest.mark.parametrize("policy", [A3_X16, A3_X8, SP850], ids=["x16", "x8", "850"])
def test_e34_soft_short_blocks(policy: tuple[str, int]) -> None:
    npus = policy[1]
    nodes = [nd(f"a{i}", 0, npus=npus) for i in range(5)] + [
        nd(f"b{i}", 1, npus=npus) for i in range(3)]
    problem = scenario(nodes, [sp_job(policy, 8, 4, soft=True)], size=10, reserve=2)
    outcome = run(problem)
    # {"0": a0..a3, "1": [a4], "2": b0..b2}; cumulative ranks 0-3, 4, 5-7.
    assert names(problem, outcome.nodes) == ["a0", "a1", "a2", "a3", "a4", "b0", "b1", "b2"]
    assert names(problem, via_greedy(problem)) == names(problem, outcome.nodes)
    # The same job hard: countVSuperPod = 1 < 2.
    hard = scenario(nodes, [sp_job(policy, 8, 4)], size=10, reserve=2)
    reason = run(hard).reason
    assert reason is not None and reason.startswith("select super pod failed, required")


@pytest.mark.parametrize(("sp", "reserve", "size", "pods", "tasks", "answer"), [
    (1, 2, None, [3], 3, ["p0-0", "p0-1", "p0-2"]),
    (4, 8, None, [12], 12, [f"p0-{i}" for i in range(12)]),
    (2, 2, 10, [5, 5], 8, ["p0-0", "p0-1", "p1-0", "p1-1", "p0-2", "p0-3", "p1-2", "p1-3"]),
], ids=["sp1-reserve2", "sp4-reserve8", "two-pods"])
def test_e35_hard_job_completed_by_passes_3_and_4(
        sp: int, reserve: int, size: int | None, pods: list[int], tasks: int,
        answer: list[str]) -> None:
    nodes = [nd(f"p{s}-{i}", s) for s, n in enumerate(pods) for i in range(n)]
    problem = scenario(nodes, [sp_job(SP850, tasks, sp)], size=size, reserve=reserve)
    outcome = run(problem)
    assert names(problem, outcome.nodes) == answer
    assert names(problem, via_greedy(problem)) == answer


# ------------------------------------------------------------------- RFC cases


def three_pods(n: int = 8, npus: int = 8) -> list[Node]:
    return [nd(f"sp{s}-n{i}", s, npus=npus) for s in range(3) for i in range(n)]


def test_fully_evicted_job_returns_every_rank() -> None:
    # The job ran on sp2 (blocks 0, 1) and sp0 (block 2), ranks shuffled inside blocks.
    cache = {0: "sp2-n5", 1: "sp2-n1", 2: "sp2-n7", 3: "sp2-n0",
             4: "sp2-n3", 5: "sp2-n2", 6: "sp2-n6", 7: "sp2-n4",
             8: "sp0-n6", 9: "sp0-n4", 10: "sp0-n2", 11: "sp0-n0"}
    for policy in (SP850, A3_X8, A3_X16):
        problem = scenario(three_pods(npus=policy[1]), [sp_job(policy, 12, 4)], reserve=2,
                           cache=cache)
        outcome = run(problem)
        assert names(problem, outcome.nodes) == [cache[r] for r in range(12)]
        # Without the preference the classification picks other nodes.
        off = scenario(three_pods(npus=policy[1]), [sp_job(policy, 12, 4)], reserve=2,
                       cache=cache, prefer=False)
        assert names(off, run(off).nodes) != [cache[r] for r in range(12)]


def test_partial_eviction_bundled_example() -> None:
    from models.io import load_scenario

    problem = compile_scenario(load_scenario(EXAMPLE_850))
    plan = greedy_plan(problem)
    assert_valid(problem, {j: v for j, v in enumerate(plan.nodes) if v is not None})
    train = names(problem, plan.nodes[0])
    # Ranks 5, 10, 11 lost their nodes to other tenants; rank 6 is a fault rank.  Every
    # other rank returns; the gaps take free healthy nodes of the same super pod that no
    # other rank wants (sp0-node-6 is the fault rank's old node, sp0-node-9 sub-healthy,
    # sp1-node-4..7 are block 3's origins).
    assert train == ["sp0-node-0", "sp0-node-1", "sp0-node-2", "sp0-node-3",
                     "sp0-node-4", "sp0-node-8", "sp0-node-10", "sp0-node-7",
                     "sp1-node-0", "sp1-node-1", "sp1-node-8", "sp1-node-9",
                     "sp1-node-4", "sp1-node-5", "sp1-node-6", "sp1-node-7"]
    assert names(problem, plan.nodes[1]) == ["sp2-node-0", "sp2-node-1", "sp2-node-2",
                                             "sp2-node-3"]


def test_partial_eviction_gap_filled_in_same_super_pod() -> None:
    cache = {r: f"sp1-n{r}" for r in range(4)}
    nodes = three_pods()
    nodes[8 + 2] = nd("sp1-n2", 1, free=0)  # another tenant took rank 2's node
    problem = scenario(nodes, [sp_job(SP850, 4, 4)], reserve=2, cache=cache)
    got = names(problem, run(problem).nodes)
    assert got == ["sp1-n0", "sp1-n1", "sp1-n4", "sp1-n3"]


def test_origin_super_pod_lacks_capacity_degrades_to_normal_passes() -> None:
    cache = {r: f"sp1-n{r}" for r in range(4)}
    nodes = three_pods()
    for i in range(3, 8):  # sp1 keeps only 3 free nodes < spBlock 4
        nodes[8 + i] = nd(f"sp1-n{i}", 1, free=0)
    nodes[16] = nd("sp2-n0", 2, free=0)  # sp2: 7 free → e=5 → [1][1]; sp0: 8 → [2][1]
    problem = scenario(nodes, [sp_job(SP850, 4, 4)], reserve=2, cache=cache)
    outcome = run(problem)
    # Normal pass 1 (r=1, c=1) → sp2, first free nodes in name order.
    assert names(problem, outcome.nodes) == ["sp2-n1", "sp2-n2", "sp2-n3", "sp2-n4"]
    nocache = scenario(nodes, [sp_job(SP850, 4, 4)], reserve=2)
    assert names(nocache, run(nocache).nodes) == names(problem, outcome.nodes)


def test_origin_node_subhealthy() -> None:
    cache = {r: f"sp0-n{r}" for r in range(4)}
    nodes = three_pods()
    nodes[1] = nd("sp0-n1", 0, health="subhealthy")
    problem = scenario(nodes, [sp_job(SP850, 4, 4)], reserve=2, cache=cache)
    # RFC §3.1.9: a sub-healthy preferred node → a regular (healthy) node.
    assert names(problem, run(problem).nodes) == ["sp0-n0", "sp0-n4", "sp0-n2", "sp0-n3"]
    # When the block must take the sub-healthy node anyway, its own rank gets it.
    for i in range(4, 8):
        nodes[i] = nd(f"sp0-n{i}", 0, free=0)
    problem = scenario(nodes, [sp_job(SP850, 4, 4)], reserve=0, cache=cache)
    assert names(problem, run(problem).nodes) == ["sp0-n0", "sp0-n1", "sp0-n2", "sp0-n3"]


def test_fault_rank_avoids_its_old_node() -> None:
    cache = {r: f"sp0-n{r}" for r in range(4)}
    problem = scenario(three_pods(), [sp_job(SP850, 4, 4, fault=[2])], reserve=2,
                       cache=cache)
    got = names(problem, run(problem).nodes)
    assert got == ["sp0-n0", "sp0-n1", "sp0-n4", "sp0-n3"]
    # The fault rank is the first rank: the origin super pod comes from rank 1.
    problem = scenario(three_pods(), [sp_job(SP850, 4, 4, fault=[0])], reserve=2,
                       cache=cache)
    assert names(problem, run(problem).nodes) == ["sp0-n4", "sp0-n1", "sp0-n2", "sp0-n3"]


def test_fault_rank_takes_its_old_node_only_when_nothing_else_fits() -> None:
    cache = {0: "sp0-n0", 1: "sp0-n1"}
    nodes = [nd("sp0-n0", 0), nd("sp0-n1", 0), nd("sp0-n2", 0, free=0)]
    problem = scenario(nodes, [sp_job(SP850, 2, 2, fault=[1])], size=4, reserve=0,
                       cache=cache)
    # Only the two origins are free: rank 0 keeps its hit (a hit outweighs a fault
    # return), so the fault rank has nothing else.
    assert names(problem, run(problem).nodes) == ["sp0-n0", "sp0-n1"]
    # Two fault ranks swap their old nodes.
    both = scenario(nodes, [sp_job(SP850, 2, 2, fault=[0, 1])], size=4, reserve=0,
                    cache=cache)
    assert names(both, run(both).nodes) == ["sp0-n1", "sp0-n0"]
    single = scenario(nodes[:1], [sp_job(SP850, 1, 1, fault=[0])], size=4, reserve=0,
                      cache={0: "sp0-n0"})
    assert names(single, run(single).nodes) == ["sp0-n0"]  # the only candidate
    two = scenario(nodes[:2], [sp_job(SP850, 1, 1, fault=[0])], size=4, reserve=0,
                   cache={0: "sp0-n0"})
    assert names(two, run(two).nodes) == ["sp0-n1"]


def test_other_blocks_origins_are_taken_last() -> None:
    # Blocks 0 and 1 both came from sp0; rank 1's node is gone.  Block 0's gap must not
    # take a node block 1 wants, even though it comes first in name order.
    cache = {0: "sp0-n4", 1: "sp0-n5", 2: "sp0-n0", 3: "sp0-n1"}
    nodes = [nd(f"sp0-n{i}", 0) for i in range(6)]
    nodes[5] = nd("sp0-n5", 0, free=0)
    problem = scenario(nodes, [sp_job(SP850, 4, 2)], size=8, reserve=0, cache=cache)
    assert names(problem, run(problem).nodes) == ["sp0-n4", "sp0-n2", "sp0-n0", "sp0-n1"]


def test_origins_preferred_inside_super_pod_chosen_by_normal_passes() -> None:
    # Block 0's first rank has no cache entry and rank 1's origin super pod is full, so
    # level 1 skips the block; the normal passes pick sp1, where rank 0 still returns.
    cache = {0: "sp1-n6", 1: "sp2-n0"}
    nodes = three_pods()
    for i in range(8):
        nodes[16 + i] = nd(f"sp2-n{i}", 2, free=0)
    for i in range(8):
        nodes[i] = nd(f"sp0-n{i}", 0, free=0)
    problem = scenario(nodes, [sp_job(SP850, 2, 2)], reserve=2, cache=cache)
    assert names(problem, run(problem).nodes) == ["sp1-n6", "sp1-n0"]


def test_prefer_previous_off_ignores_the_cache() -> None:
    cache = {r: f"sp2-n{r}" for r in range(4)}
    off = scenario(three_pods(), [sp_job(SP850, 4, 4)], reserve=2, cache=cache, prefer=False)
    plain = scenario(three_pods(), [sp_job(SP850, 4, 4)], reserve=2)
    assert names(off, run(off).nodes) == names(plain, run(plain).nodes)


def test_reserve_respected_in_passes_1_and_2() -> None:
    # sp0: 6 free, sp1: 7 free, reserve 3, spBlock 2, K=3: passes 1–2 suffice
    # (floor(3/2) + floor(4/2) = 3) and leave 3 free nodes in each super pod.
    nodes = [nd(f"a{i}", 0) for i in range(6)] + [nd(f"b{i}", 1) for i in range(7)]
    problem = scenario(nodes, [sp_job(SP850, 6, 2)], size=10, reserve=3)
    outcome = run(problem)
    assert outcome.nodes is not None
    used = np.bincount(problem.super_pod[outcome.nodes], minlength=2)
    assert used.tolist() == [2, 4]
    # Pass 1: cell [0][2] (b: e=4) before [1][1] (a: e=3).
    assert names(problem, outcome.nodes) == ["b0", "b1", "b2", "b3", "a0", "a1"]
    # One more block: only pass 3 may use a reserve.
    problem = scenario(nodes, [sp_job(SP850, 8, 2)], size=10, reserve=3)
    used = np.bincount(problem.super_pod[run(problem).nodes], minlength=2)
    assert used.tolist() == [4, 4]


def test_soft_builds_short_blocks_only_when_needed() -> None:
    # Upstream's pass 4 would visit a0's leftover single node first and build a short
    # block although b still holds a whole block; we carve whole blocks first.
    nodes = [nd(f"a{i}", 0) for i in range(7)] + [nd(f"b{i}", 1) for i in range(6)]
    problem = scenario(nodes, [sp_job(SP850, 12, 2, soft=True)], size=10, reserve=3)
    outcome = run(problem)
    assert block_pods(problem, outcome.nodes, 2) == [0, 0, 1, 1, 0, 1]
    hard = scenario(nodes, [sp_job(SP850, 12, 2)], size=10, reserve=3)
    assert names(hard, run(hard).nodes) == names(problem, outcome.nodes)
    # Not enough whole blocks: soft builds short ones, hard fails.
    nodes = [nd(f"a{i}", 0) for i in range(3)] + [nd(f"b{i}", 1) for i in range(3)]
    soft = scenario(nodes, [sp_job(SP850, 6, 3, soft=True)], size=10, reserve=0)
    assert names(soft, run(soft).nodes) == ["a0", "a1", "a2", "b0", "b1", "b2"]
    soft4 = scenario(nodes, [sp_job(SP850, 4, 4, soft=True)], size=10, reserve=0)
    got = run(soft4).nodes
    assert got is not None and len(pods_used(soft4, got)) == 2
    assert run(scenario(nodes, [sp_job(SP850, 4, 4)], size=10, reserve=0)).nodes is None


def test_soft_pieces_keep_level1_block_at_its_ranks() -> None:
    # Block 1 returns to sp1 at level 1; block 0 has no cache and no super pod with 3
    # nodes left, so it is built from pieces — and block 1 keeps ranks 3..5.
    cache = {3: "b0", 4: "b1", 5: "b2"}
    nodes = [nd("a0", 0), nd("a1", 0), nd("b0", 1), nd("b1", 1), nd("b2", 1), nd("b3", 1)]
    problem = scenario(nodes, [sp_job(SP850, 6, 3, soft=True)], size=8, reserve=0,
                       cache=cache)
    got = names(problem, run(problem).nodes)
    assert got[3:] == ["b0", "b1", "b2"]
    assert sorted(got[:3]) == ["a0", "a1", "b3"]


def test_single_task_least_idle_and_subhealthy_dropped() -> None:
    nodes = [nd("n0", 0, free=8), nd("n1", 0, free=4, health="subhealthy"),
             nd("n2", 1, free=4), nd("n3", 1, free=2), nd("n4", None, free=2)]
    job = sp_job(SP850, 1, 1, npu_per_task=4)
    problem = scenario(nodes, [job], size=8, reserve=0)
    # n3 and n4 are too small or in no super pod; least idle = 4: n1 (sub-healthy), n2.
    assert names(problem, run(problem).nodes) == ["n2"]
    only_sub = scenario(nodes[:2], [job], size=8, reserve=0)
    assert names(only_sub, run(only_sub).nodes) == ["n1"]
    a3 = scenario([nd("m0", 0, npus=16, free=16), nd("m1", 0, npus=16, free=6)],
                  [sp_job(A3_X16, 1, 1, npu_per_task=2)], size=8, reserve=0)
    assert names(a3, run(a3).nodes) == ["m1"]


def test_distributed_needs_whole_free_nodes_of_the_right_size() -> None:
    nodes = [nd("a0", 0, npus=16), nd("a1", 0, npus=8), nd("a2", 0, npus=8, free=7),
             nd("a3", 0, npus=8, health="unhealthy"), nd("a4", None, npus=8),
             nd("a5", 0, npus=8)]
    problem = scenario(nodes, [sp_job(A3_X8, 2, 2)], size=8, reserve=0)
    assert names(problem, run(problem).nodes) == ["a1", "a5"]
    problem = scenario(nodes, [sp_job(A3_X8, 4, 2)], size=8, reserve=0)
    assert run(problem).reason == "not enough node, npuTaskNum: 4, nodes: 2"


def test_oversized_super_pod() -> None:
    nodes = [nd(f"a{i}", 0) for i in range(12)]
    for policy in (A3_X8, SP850):
        problem = scenario(nodes, [sp_job(policy, 4, 2)], size=12, reserve=2)
        # A super pod bigger than super-pod-size (input validation forbids it; build it).
        small = dataclasses.replace(problem, super_pod_size=4)
        outcome = place_superpod(small, 0, ClusterState.initial(small))
        if policy is SP850:
            assert outcome.reason == "super-pod-size is smaller than superPod's node size"
        else:  # A3: no panic, the column is clamped
            assert outcome.nodes is not None
            assert names(small, outcome.nodes) == ["a0", "a1", "a2", "a3"]
            assert_valid(problem, {0: outcome.nodes})


def test_state_is_not_mutated_and_later_jobs_see_earlier_ones() -> None:
    nodes = [nd(f"a{i}", 0) for i in range(6)] + [nd(f"b{i}", 1) for i in range(6)]
    jobs = [sp_job(SP850, 4, 2, name="j0", owner=None), sp_job(A3_X8, 4, 2, name="j1",
                                                                 owner=None)]
    problem = scenario(nodes, jobs, size=8, reserve=2)
    state = ClusterState.initial(problem)
    before = state.free.copy()
    first = place_superpod(problem, 0, state)
    assert np.array_equal(state.free, before)
    plan = greedy_plan(problem)
    assert first.nodes is not None and plan.nodes[0] is not None
    assert np.array_equal(plan.nodes[0], first.nodes)
    assert plan.nodes[1] is not None
    assert not set(plan.nodes[0].tolist()) & set(plan.nodes[1].tolist())
    assert_valid(problem, {0: plan.nodes[0], 1: plan.nodes[1]})


def test_solve_facade_greedy() -> None:
    from models.io import load_scenario
    from solver.facade import solve

    scenario_ = load_scenario(EXAMPLE_850)
    result = solve(scenario_, engine="greedy")
    assert result.engine == "greedy"
    assert check(compile_scenario(scenario_), result.placement) == []
    placed = {jp.name: jp for jp in result.placement.jobs}
    assert placed["train-a"].placed and placed["eval-b"].placed
    assert result.metrics.origin_hits == 12


def test_rejects_other_families() -> None:
    nodes = [nd("a0", 0)]
    problem = compile_scenario(Scenario(now=NOW, nodes=nodes, jobs=[
        Job(name="o", policy="chip8-node8", tasks=1, npu_per_task=8)]))
    with pytest.raises(ValueError, match="not a super-pod job"):
        place_superpod(problem, 0, ClusterState.initial(problem))


# ------------------------------------------------------------------------ properties


@st.composite
def clusters(draw: st.DrawFn) -> Problem:
    policy = draw(st.sampled_from([A3_X16, A3_X8, SP850]))
    npus = policy[1]
    pod_sizes = draw(st.lists(st.integers(0, 9), min_size=1, max_size=4))
    nodes: list[Node] = []
    for s, size in enumerate(pod_sizes):
        for i in range(size):
            free = draw(st.sampled_from([npus, npus, npus, 0, npus // 2]))
            health = draw(st.sampled_from(["healthy"] * 5 + ["subhealthy", "unhealthy"]))
            other = draw(st.integers(0, 9)) == 0  # a node of the wrong size
            nodes.append(nd(f"sp{s}-n{i}", s, npus=16 if other and npus == 8 else npus,
                            free=free, health=health))
    for i in range(draw(st.integers(0, 2))):
        nodes.append(nd(f"loose-{i}", None, npus=npus))
    if not nodes:
        nodes.append(nd("sp0-n0", 0, npus=npus))
    biggest = max([*pod_sizes, 1])
    size = biggest + draw(st.integers(0, 4))
    reserve = draw(st.one_of(st.none(), st.integers(0, 4)))
    jobs = []
    cache: dict[int, str] = {}
    for k in range(draw(st.integers(1, 2))):
        single = draw(st.integers(0, 5)) == 0
        if single:
            npt = draw(st.sampled_from([1, 2, npus] if policy is not SP850 else [1, 3, 8]))
            job = sp_job(policy, 1, 1, name=f"j{k}", npu_per_task=npt,
                         owner=OWNER if k == 0 else f"o{k}")
            tasks = 1
        else:
            sp = draw(st.integers(1, min(4, size)))
            kb = draw(st.integers(1, 4))
            tasks = sp * kb
            job = sp_job(policy, tasks, sp, name=f"j{k}", soft=draw(st.booleans()),
                         owner=OWNER if k == 0 else f"o{k}")
        if k == 0:
            names_all = [n.name for n in nodes]
            ranks = draw(st.lists(st.integers(0, tasks - 1), unique=True, max_size=tasks))
            for r in ranks:
                cache[r] = draw(st.sampled_from(names_all))
            fault = draw(st.lists(st.integers(0, tasks - 1), unique=True, max_size=2))
            job = job.model_copy(update={"fault_ranks": fault})
        jobs.append(job)
    return scenario(nodes, jobs, size=size, reserve=reserve, cache=cache,
                    prefer=draw(st.booleans()))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_random_clusters(problem: Problem) -> None:
    state = ClusterState.initial(problem)
    for j, job in enumerate(problem.jobs):
        outcome = place_superpod(problem, j, state)
        again = place_superpod(problem, j, state)
        assert (outcome.nodes is None) == (again.nodes is None)
        assert outcome.reason == again.reason
        if outcome.nodes is not None:
            assert again.nodes is not None and np.array_equal(outcome.nodes, again.nodes)
            assert_valid(problem, {j: outcome.nodes})
        else:
            assert outcome.reason
        # Completeness: placed exactly when upstream's capacity checks pass.
        mask = superpod_candidates(problem, job, state)
        per_pod = np.bincount(problem.super_pod[mask], minlength=1)
        enough = mask.sum() >= job.tasks
        whole = int((per_pod // job.sp_block).sum()) >= job.tasks // job.sp_block
        assert (outcome.nodes is not None) == (enough and (job.soft or whole))
        if outcome.nodes is None:
            continue
        sp = job.sp_block
        if whole:  # soft jobs build short blocks only when needed
            block_pods(problem, outcome.nodes, sp)
        uses_cache = job.prefer_previous and (job.origin >= 0).any()
        spare = np.maximum(per_pod - problem.reserve_nodes, 0)
        if not uses_cache and int((spare // sp).sum()) >= job.tasks // sp:
            used = np.bincount(problem.super_pod[outcome.nodes], minlength=len(per_pod))
            assert (used <= spare).all()  # passes 1–2 keep the reserve
    plan = greedy_plan(problem)
    assert_valid(problem, {j: v for j, v in enumerate(plan.nodes) if v is not None})
    again_plan = greedy_plan(problem)
    assert [None if v is None else v.tolist() for v in plan.nodes] == [
        None if v is None else v.tolist() for v in again_plan.nodes]


@st.composite
def evicted_jobs(draw: st.DrawFn) -> tuple[Problem, Problem]:
    policy = draw(st.sampled_from([A3_X16, A3_X8, SP850]))
    npus = policy[1]
    pod_sizes = draw(st.lists(st.integers(0, 10), min_size=1, max_size=4))
    nodes = [nd(f"sp{s}-n{i}", s, npus=npus) for s, n in enumerate(pod_sizes)
             for i in range(n)]
    if not nodes:
        nodes = [nd("sp0-n0", 0, npus=npus)]
    size = max([*pod_sizes, 1]) + draw(st.integers(0, 3))
    reserve = draw(st.integers(0, 3))
    sp = draw(st.integers(1, min(4, size)))
    tasks = sp * draw(st.integers(1, 4))
    fault = draw(st.lists(st.integers(0, tasks - 1), unique=True, max_size=2))
    first = scenario(nodes, [sp_job(policy, tasks, sp)], size=size, reserve=reserve)
    outcome = place_superpod(first, 0, ClusterState.initial(first))
    if outcome.nodes is None:
        return first, first
    cache = {r: first.node_names[int(n)] for r, n in enumerate(outcome.nodes)}
    # Shuffle ranks inside each block so that return is not just name order.
    perm = draw(st.permutations(range(tasks)))
    same_block = all(p // sp == r // sp for r, p in enumerate(perm))
    if same_block:
        cache = {r: cache[p] for r, p in enumerate(perm)}
    second = scenario(nodes, [sp_job(policy, tasks, sp, fault=fault)], size=size,
                      reserve=reserve, cache=cache)
    return first, second


@settings(max_examples=200, deadline=None)
@given(evicted_jobs())
def test_fully_evicted_random_jobs_return(pair: tuple[Problem, Problem]) -> None:
    first, second = pair
    if first is second:
        return
    outcome = run(second)
    assert outcome.nodes is not None
    job = second.jobs[0]
    back = outcome.nodes == job.origin
    assert back[~job.fault].all()  # every non-fault rank returns
    used = set(outcome.nodes.tolist())
    mask = superpod_candidates(second, job, ClusterState.initial(second))
    for r in np.flatnonzero(job.fault & back).tolist():
        # A fault rank returns only when its super pod has no other node left to give.
        pod = second.super_pod[job.origin[r]]
        unused = [n for n in np.flatnonzero(mask & (second.super_pod == pod)).tolist()
                  if n not in used]
        assert unused == []
