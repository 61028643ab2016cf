"""The objective: every metric on hand-computed examples, and the automatic weights.

The expected numbers follow the definitions of the ``models.objective`` module docstring;
each test spells its arithmetic out.
"""

from __future__ import annotations

from typing import Any

import pytest

from models.check import check
from models.compiled import Problem, compile_scenario
from models.io import load_scenario
from models.objective import COEFFICIENT_LIMIT, Metrics, Weights, evaluate, resolve_weights
from models.placement import PlacementFile
from solver.doors import example_path
from tests.models.builders import (
    NOW,
    entry,
    job,
    node,
    placed,
    placement,
    pod_node,
    problem,
    scenario,
    scenario_examples,
)
from tests.models.builders import unplaced as unplaced_entry


def measure(prob: Problem, *entries: dict[str, Any], weights: Weights | None = None) -> Metrics:
    """Evaluate a placement after making sure it is valid (evaluate assumes that)."""
    names = {e["name"] for e in entries}
    full = list(entries) + [unplaced_entry(j.name) for j in prob.jobs if j.name not in names]
    answer = placement(*full)
    assert check(prob, answer) == []
    return evaluate(prob, answer, weights)


_n = pod_node


# --------------------------------------------------------------------------- placed jobs


def test_placed_jobs_and_priority_levels() -> None:
    prob = problem(scenario([node(f"n{i}") for i in range(3)],
                            [job("a", priority=5), job("b", priority=5), job("c", priority=-1)]))
    weights = resolve_weights(prob)
    base = weights.job_placed[2]
    # dense priority ranks: -1 → 0, 5 → 1: W_place × (1 + rank)
    assert weights.job_placed == (2 * base, 2 * base, base)
    m = measure(prob, placed("a", ["n0"]), placed("c", ["n1"]))
    assert m.placed_jobs == 2
    # two whole nodes used completely by ordinary jobs: no fragment, nothing else
    assert m.objective == 3 * base


def test_priority_levels_can_be_switched_off() -> None:
    prob = problem(scenario([node("n0")], [job("a", priority=5), job("c", priority=-1)]))
    weights = resolve_weights(prob, Weights(priority_levels=False))
    assert weights.job_placed[0] == weights.job_placed[1]


# --------------------------------------------------------------------------- origin hits


def test_origin_hits_candidates_and_fault_returns() -> None:
    nodes = [node("n0"), node("n1"), node("n2")]
    cache = [entry("o", 0, "n0"), entry("o", 1, "n1"), entry("o", 2, "n2"),
             entry("o", 3, "n2"),  # rank 3 does not exist any more: ignored
             entry("old", 0, "n0", updated=NOW - 10**7),  # expired
             entry("u", 0, "n1")]
    jobs = [job("a", owner_uid="o", tasks=3, npu=2, fault_ranks=[2]),
            job("b", owner_uid="old", npu=1),
            job("c", owner_uid="u", npu=1)]  # unplaced: still a candidate
    prob = problem(scenario(nodes, jobs, cache=cache))
    m = measure(prob, placed("a", ["n0", "n2", "n2"]), placed("b", ["n0"]))
    assert m.origin_candidates == 2 + 0 + 1  # a: ranks 0, 1 (rank 2 is a fault rank); c: 1
    assert m.origin_hits == 1  # a rank 0 on n0; rank 1 is on n2, not n1
    assert m.fault_returns == 1  # a rank 2 on its cached node n2
    assert m.per_job_hits == {"a": 1, "b": 0, "c": 0}
    assert m.per_job_candidates == {"a": 2, "b": 0, "c": 1}
    assert m.achievable_origin_hits == 3


def test_hits_are_measured_even_when_the_preference_is_off() -> None:
    data = scenario([node("n0"), node("n1")], [job("a", owner_uid="o", tasks=2, npu=8)],
                    {"prefer-previous-node": False}, cache=[entry("o", 0, "n0")])
    prob = problem(data)
    assert prob.jobs[0].preferred.tolist() == [-1, -1]
    weights = resolve_weights(prob)
    assert weights.origin_hit == 0
    m = measure(prob, placed("a", ["n0", "n1"]))
    assert (m.origin_hits, m.origin_candidates) == (1, 1)
    assert m.objective == weights.job_placed[0]


# --------------------------------------------------------------------------- sub-healthy


def test_subhealthy_nodes_count_distinct_nodes() -> None:
    nodes = [node("s0", health="subhealthy"), node("s1", health="subhealthy"), node("h")]
    prob = problem(scenario(nodes, [job("a", tasks=3, npu=2), job("b", npu=2)]))
    m = measure(prob, placed("a", ["s0", "s0", "h"]), placed("b", ["s1"]))
    assert m.subhealthy_nodes == 2


# --------------------------------------------------------------------------- reserve


def test_reserve_used_super_pods() -> None:
    """A3/850: per super pod max(0, U − max(0, W − reserve)), W = whole free usable nodes."""
    nodes = ([_n(f"p0-{i}", 0) for i in range(5)]
             + [_n("p0-half", 0, free=4), _n("p0-sick", 0, health="unhealthy")]
             + [_n(f"p1-{i}", 1) for i in range(2)] + [_n(f"p2-{i}", 2) for i in range(3)])
    jobs = [job("a", policy="chip8-node8-sp", tasks=4, npu=8, sp_block=32),
            job("b", policy="chip8-node8-sp", tasks=2, npu=8, sp_block=16),
            job("c", npu=8)]  # ordinary jobs never count
    prob = problem(scenario(nodes, jobs, {"super-pod-size": 8, "reserve-nodes": 2}))
    m = measure(prob, placed("a", [f"p0-{i}" for i in range(4)]),
                placed("b", ["p1-0", "p1-1"]), placed("c", ["p2-0"]))
    # pod 0: W = 5 (half used and unhealthy excluded), U = 4: 4 − (5 − 2) = 1
    # pod 1: W = 2, U = 2: 2 − max(0, 0) = 2;   pod 2: no super-pod job
    assert m.reserve_used == 3
    no_reserve = problem(scenario(nodes, jobs, {"super-pod-size": 8, "reserve-nodes": 0}))
    assert measure(no_reserve, placed("a", [f"p0-{i}" for i in range(4)]),
                   placed("b", ["p1-0", "p1-1"])).reserve_used == 0


def test_reserve_used_multilevel() -> None:
    """Multilevel: per level1 domain with the tree's level1 reservedNode."""
    labels = {"r0": {"rack": "r0"}, "r1": {"rack": "r1"}}
    nodes = ([_n(f"a{i}", labels=labels["r0"]) for i in range(3)]
             + [_n(f"b{i}", labels=labels["r1"]) for i in range(2)])
    config = {"resource-level-config": {"default": {"level1": {"label": "rack",
                                                               "reservedNode": 1}}}}
    prob = problem(scenario(nodes, [job("m", policy="multilevel", tasks=4, npu=8,
                                        affinity_config="level1=2")], config))
    m = measure(prob, placed("m", ["a0", "a1", "b0", "b1"]))
    # r0: W = 3, U = 2: 2 − (3 − 1) = 0;  r1: W = 2, U = 2: 2 − (2 − 1) = 1
    assert m.reserve_used == 1


# --------------------------------------------------------------------------- fragment


def test_fragment_ordinary_counts_partly_used_hosting_nodes() -> None:
    nodes = [node("n0"), node("n1"), node("half", free=4), node("n3")]
    jobs = [job("a", tasks=2, npu=3), job("b", npu=8), job("c", npu=4), job("d", npu=2)]
    prob = problem(scenario(nodes, jobs))
    m = measure(prob, placed("a", ["n0", "n0"]), placed("b", ["n1"]), placed("c", ["half"]),
                placed("d", ["n0"]))
    # a: n0 ends with 8 − 6 − 2 = 0 free → 0;  b: n1 full → 0;  c: half ends 0 → 0;
    # d: n0 → 0.  Now without d: n0 ends with 2 of 8 free → a scores 1
    assert m.per_job_fragment == {"a": 0, "b": 0, "c": 0, "d": 0}
    m2 = measure(prob, placed("a", ["n0", "n3"]), placed("c", ["n0"]))
    # a: n0 left 8 − 3 − 4 = 1 (partly used), n3 left 5 (partly used) → 2;  c: n0 → 1
    assert m2.per_job_fragment == {"a": 2, "c": 1}
    assert m2.fragment_score == 3


def test_fragment_super_pod() -> None:
    """Σ over super pods of (left mod spBlock), left = eligible nodes no rank uses."""
    nodes = ([_n(f"p0-{i}", 0) for i in range(5)]
             + [_n(f"p1-{i}", 1) for i in range(3)]
             + [_n("p1-sick", 1, health="unhealthy"), _n("p1-weak", 1, health="subhealthy"),
                _n("p1-half", 1, free=4), _n("p1-big", 1, npus=16), _n("loose")])
    jobs = [job("a", policy="chip8-node8-sp", tasks=2, npu=8, sp_block=16),
            job("o", npu=1)]
    prob = problem(scenario(nodes, jobs, {"super-pod-size": 16}))
    m = measure(prob, placed("a", ["p0-0", "p0-1"]), placed("o", ["p1-0"]))
    # eligible: p0 × 5, p1-0..2 and p1-weak (sub-healthy still counts) = 4 in pod 1
    # left: pod 0: 5 − 2 = 3 → 3 mod 2 = 1;  pod 1: 4 − 1 (o uses p1-0) = 3 → 1
    assert m.per_job_fragment["a"] == 2
    # the ordinary job o leaves p1-0 with 7 of 8 free → 1
    assert m.per_job_fragment["o"] == 1
    assert m.fragment_score == 3


def test_fragment_super_pod_block_of_one_is_zero() -> None:
    prob = problem(scenario([_n("p0-0", 0), _n("p0-1", 0), _n("p0-2", 0)],
                            [job("a", policy="chip8-node8-sp", tasks=2, npu=8, sp_block=8)]))
    assert measure(prob, placed("a", ["p0-0", "p0-1"])).fragment_score == 0


def test_fragment_rack() -> None:
    """950: per pod ((Σ_k ⌊left_k/T⌋) mod W) × T + 10 × Σ_k (left_k mod T)."""
    nodes = ([_n(f"r0-{i}", 0, 0) for i in range(4)] + [_n(f"r1-{i}", 0, 1) for i in range(3)]
             + [_n("r2-0", 0, 2), _n("r2-sick", 0, 2, health="unhealthy")]
             + [_n(f"r16-{i}", 1, 16) for i in range(2)] + [_n("no-rack", 1)])
    jobs = [job("a", policy="chip8-node8-ra64-sp", tasks=4, npu=8, sp_block=32, ra_block=16)]
    prob = problem(scenario(nodes, jobs, {"super-pod-size": 16}))
    m = measure(prob, placed("a", ["r0-0", "r0-1", "r1-0", "r1-1"]))
    # T = 2, W = 4 / 2 = 2.  left: rack 0: 2, rack 1: 1, rack 2: 1 (sick excluded);
    # pod 0: (1 + 0 + 0) mod 2 = 1 → 1 × 2 = 2;  10 × (0 + 1 + 1) = 20  → 22
    # pod 1: rack 16: 2 → (1 mod 2) × 2 = 2;  10 × 0  → 2   (no-rack is not eligible)
    assert m.fragment_score == 24


def _ml_node(name: str, rack: str, spine: str, zone: str, **extra: Any) -> dict[str, Any]:
    return _n(name, labels={"rack": rack, "spine": spine, "zone": zone}, **extra)


ML_CONFIG = {"resource-level-config": {"default": {
    "level1": {"label": "rack"}, "level2": {"label": "spine"}, "level3": {"label": "zone"}}}}


def test_fragment_multilevel_e25() -> None:
    """E25's tree (switch = level1, spine = level2), job 4 tasks level1=2, level2=4.

    Initially W0 scores 1, W1 0, W2 0, S0 = 0 + 10 × 1 = 10, S1 = 0 (upstream's root, 100,
    is above the job's top level and not part of the definition)."""
    nodes = ([_ml_node(f"n0{i}", "W0", "S0", "z") for i in range(3)]
             + [_ml_node(f"n1{i}", "W1", "S0", "z") for i in range(2)]
             + [_ml_node(f"n2{i}", "W2", "S1", "z") for i in range(4)])
    prob = problem(scenario(nodes, [job("m", policy="multilevel", tasks=4, npu=8,
                                        affinity_config="level1=2,level2=4")], ML_CONFIG))
    # upstream's choice (all in S1/W2): W0 keeps 3 → frag 1; S0 = 10; S1 left 0 → 0
    assert measure(prob, placed("m", ["n20", "n21", "n22", "n23"])).fragment_score == 10
    # the alternative in S0: W0 left 1 → frag 1 (alloc 0), W1 left 0; S0: sub 0 → 10 × 1;
    # S1: W2 left 4 → alloc 2, frag 0; sub 2 mod 2 = 0 → 0
    assert measure(prob, placed("m", ["n00", "n01", "n10", "n11"])).fragment_score == 10


def test_fragment_multilevel_three_levels() -> None:
    """a = (1, 2, 4): level1 domains score left mod 1 = 0 and hold ``left`` groups."""
    nodes = ([_ml_node(f"r0-{i}", "R0", "S0", "Z0") for i in range(3)]
             + [_ml_node("r1-0", "R1", "S0", "Z0"), _ml_node("r2-0", "R2", "S1", "Z0")]
             + [_ml_node(f"r3-{i}", "R3", "S2", "Z1") for i in range(2)]
             + [_ml_node("r2-half", "R2", "S1", "Z0", free=4),
                _ml_node("r3-sick", "R3", "S2", "Z1", health="unhealthy"),
                _n("r3-nolabels", labels={"rack": "R3"}),
                _ml_node("r3-big", "R3", "S2", "Z1", npus=16)])
    prob = problem(scenario(nodes, [job("m", policy="multilevel", tasks=4, npu=8,
                                        affinity_config="level1=1,level2=2,level3=4")],
                            ML_CONFIG))
    m = measure(prob, placed("m", ["r0-0", "r0-1", "r0-2", "r1-0"]))
    # left: R0 0, R1 0, R2 1, R3 2 (half, sick, unlabelled and 16-NPU nodes not eligible)
    # level2 (m = 2, a1 = 1): S0: sub 0 → 0;  S1: sub 1 → (1 mod 2) × 1 = 1, alloc 0;
    #                         S2: sub 2 → 0, alloc 1
    # level3 (m = 2, a2 = 2): Z0: sub 0 → 0 × 2 + 10 × (0 + 1) = 10;
    #                         Z1: sub 1 → (1 mod 2) × 2 + 10 × 0 = 2
    assert m.fragment_score == 12


def test_fragment_multilevel_reserved_leaves_count_as_free() -> None:
    nodes = [_ml_node(f"a{i}", "R0", "S0", "Z0") for i in range(5)]
    config = {"resource-level-config": {"default": {"level1": {"label": "rack",
                                                               "reservedNode": 2}}}}
    prob = problem(scenario(nodes, [job("m", policy="multilevel", tasks=2, npu=8,
                                        affinity_config="level1=2")], config))
    # left 3 of R0 (reserved ones included) → 3 mod 2 = 1
    assert measure(prob, placed("m", ["a0", "a1"])).fragment_score == 1


def test_fragment_is_summed_over_placed_jobs() -> None:
    nodes = [_n(f"p0-{i}", 0) for i in range(5)]
    jobs = [job("a", policy="chip8-node8-sp", tasks=2, npu=8, sp_block=16),
            job("b", policy="chip8-node8-sp", tasks=3, npu=8, sp_block=24)]
    prob = problem(scenario(nodes, jobs, {"super-pod-size": 8}))
    m = measure(prob, placed("a", ["p0-0", "p0-1"]))
    assert m.fragment_score == 3 % 2  # b is not placed: only a's hierarchy counts
    m = measure(prob, placed("a", ["p0-0", "p0-1"]), placed("b", ["p0-2", "p0-3", "p0-4"]))
    assert m.per_job_fragment == {"a": 0, "b": 0}


# --------------------------------------------------------------------------- affinity spill


def test_affinity_spill_super_pod_soft() -> None:
    nodes = [_n(f"p0-{i}", 0) for i in range(3)] + [_n(f"p1-{i}", 1) for i in range(3)]
    jobs = [job("a", policy="chip8-node8-sp", tasks=4, npu=8, sp_block=16,
                super_pod_affinity="soft")]
    prob = problem(scenario(nodes, jobs, {"super-pod-size": 8}))
    # block 0 = {p0, p1} → 1 node outside its most used pod; block 1 in pod 0 → 0
    assert measure(prob, placed("a", ["p0-0", "p1-0", "p0-1", "p0-2"])).affinity_spill == 1
    assert measure(prob, placed("a", ["p0-0", "p0-1", "p1-0", "p1-1"])).affinity_spill == 0


def test_affinity_spill_rack_soft() -> None:
    nodes = ([_n(f"r0-{i}", 0, 0) for i in range(3)] + [_n(f"r1-{i}", 0, 1) for i in range(2)]
             + [_n("r16-0", 1, 16)])
    jobs = [job("a", policy="chip8-node8-ra64-sp", tasks=4, npu=8, sp_block=32, ra_block=16,
                super_pod_affinity="soft")]
    prob = problem(scenario(nodes, jobs, {"super-pod-size": 8}))
    # block 0 pods [0, 0, 0, 1] → 1;  window 0 racks [0, 1] → 1;  window 1 racks [0, 16] → 1
    m = measure(prob, placed("a", ["r0-0", "r1-0", "r0-1", "r16-0"]))
    assert m.affinity_spill == 3


def test_hard_jobs_never_spill() -> None:
    nodes = [_n(f"p0-{i}", 0) for i in range(4)]
    prob = problem(scenario(nodes, [job("a", policy="chip8-node8-sp", tasks=4, npu=8,
                                        sp_block=16)], {"super-pod-size": 8}))
    assert measure(prob, placed("a", [f"p0-{i}" for i in range(4)])).affinity_spill == 0


# --------------------------------------------------------------------------- achievable bound


def test_achievable_hits_ordinary_capacity() -> None:
    nodes = [node("n0"), node("sick", health="unhealthy"), node("half", free=3)]
    cache = [entry("o", r, n) for r, n in enumerate(["n0", "n0", "n0", "sick", "half", "n0"])]
    prob = problem(scenario(nodes, [job("a", owner_uid="o", tasks=6, npu=4, fault_ranks=[5])],
                            cache=cache))
    m = measure(prob)
    # candidates: ranks 0..4 (rank 5 faulted) = 5.  n0 holds 8 // 4 = 2 of its 3 ranks;
    # sick is unusable; half has 3 < 4 free → 0
    assert (m.origin_candidates, m.achievable_origin_hits) == (5, 2)


def test_achievable_hits_whole_node_families() -> None:
    nodes = ([_n("p0-0", 0, 0), _n("p0-1", 0, 0), _n("p0-half", 0, 0, free=4),
              _n("p0-big", 0, 0, npus=16), _n("loose"), _n("p0-norack", 0)])
    cache = [entry("sp", r, n) for r, n in
             enumerate(["p0-0", "p0-0", "p0-1", "p0-half", "p0-big", "loose"])]
    cache += [entry("ra", r, n) for r, n in enumerate(["p0-0", "p0-norack"])]
    jobs = [job("s", policy="chip8-node8-sp", owner_uid="sp", tasks=6, npu=8, sp_block=16),
            job("r", policy="chip8-node8-ra64-sp", owner_uid="ra", tasks=2, npu=8)]
    prob = problem(scenario(nodes, jobs, {"super-pod-size": 8}, cache=cache))
    m = measure(prob)
    # s: p0-0 counts once for two ranks, p0-1 → 2 (half: not whole free; big: 16 NPUs;
    # loose: no super pod).  r: p0-0 → 1 (p0-norack is in no rack)
    assert m.achievable_origin_hits == 3
    assert m.origin_candidates == 8


def test_achievable_hits_multilevel_needs_tree_membership() -> None:
    """a0 is a full member of the default tree; b0 lacks labels; c0 names tree x."""
    nodes = [_ml_node("a0", "R0", "S0", "Z0"), _n("b0", labels={"rack": "R0"}),
             _n("c0", labels={"rack": "R0", "spine": "S0", "zone": "Z0",
                              "huawei.com/topotree": "x"})]
    cache = [entry("o", 0, "a0"), entry("o", 1, "b0"), entry("o", 2, "c0")]
    prob = problem(scenario(nodes, [job("m", policy="multilevel", owner_uid="o", tasks=3,
                                        npu=8, affinity_config="level1=1")], ML_CONFIG,
                            cache=cache))
    assert measure(prob).achievable_origin_hits == 1


# --------------------------------------------------------------------------- weights


def test_automatic_weights_by_hand() -> None:
    """Two nodes (one sub-healthy), one job of two 1-NPU ranks cached on both nodes.

    Bounds of the lower terms: fault 0, spill 0, sub-healthy 1 node (× 4), reserve 0,
    fragment min(2 tasks, 2 nodes) = 2 (× 1)  → lower = 6, W_hit = 7,
    W_place = 7 × 2 candidates + 6 + 1 = 21."""
    nodes = [node("n0"), node("n1", health="subhealthy")]
    prob = problem(scenario(nodes, [job("a", owner_uid="o", tasks=2, npu=1)],
                            cache=[entry("o", 0, "n0"), entry("o", 1, "n1")]))
    weights = resolve_weights(prob)
    assert (weights.origin_hit, weights.job_placed) == (7, (21,))
    assert (weights.subhealthy, weights.fragment, weights.fault_return, weights.reserve,
            weights.affinity_spill) == (4, 1, 64, 2, 16)
    m = measure(prob, placed("a", ["n0", "n1"]))
    # 2 hits, 1 sub-healthy node, both nodes partly used (fragment 2)
    assert (m.origin_hits, m.subhealthy_nodes, m.fragment_score) == (2, 1, 2)
    assert m.objective == 21 + 2 * 7 - 4 - 2


def test_objective_is_the_weighted_sum() -> None:
    nodes = [node("n0"), node("s", health="subhealthy")]
    prob = problem(scenario(nodes, [job("a", owner_uid="o", tasks=2, npu=4, fault_ranks=[1])],
                            cache=[entry("o", 0, "s"), entry("o", 1, "s")]))
    w = resolve_weights(prob)
    m = measure(prob, placed("a", ["s", "s"]))
    assert (m.origin_hits, m.fault_returns, m.subhealthy_nodes, m.fragment_score) == (1, 1, 1, 0)
    assert m.objective == (w.job_placed[0] + w.origin_hit - w.fault_return - w.subhealthy)
    explicit = Weights(placed=1000, origin_hit=100, fault_return=10, subhealthy=1)
    m2 = measure(prob, placed("a", ["s", "s"]), weights=explicit)
    assert m2.objective == 1000 + 100 - 10 - 1


def test_one_more_hit_beats_any_lower_terms() -> None:
    """A hit on a sub-healthy origin, with a fault return and fragment, beats no hit."""
    nodes = [node("h0"), node("h1"), node("s", health="subhealthy")]
    prob = problem(scenario(nodes, [job("a", owner_uid="o", tasks=2, npu=4, fault_ranks=[1])],
                            cache=[entry("o", 0, "s"), entry("o", 1, "s")]))
    with_hit = measure(prob, placed("a", ["s", "s"]))
    without = measure(prob, placed("a", ["h0", "h0"]))
    assert with_hit.origin_hits == without.origin_hits + 1
    assert (with_hit.fault_returns, with_hit.subhealthy_nodes) == (1, 1)
    assert (without.fault_returns, without.subhealthy_nodes, without.fragment_score) == (0, 0, 0)
    assert with_hit.objective > without.objective
    # split over two nodes: more fragment (h0, s both half used) and still one hit
    split = measure(prob, placed("a", ["s", "h0"]))
    assert split.origin_hits == 1 and split.fragment_score == 2
    assert split.objective > without.objective


def test_a_placed_job_beats_every_hit() -> None:
    """Hitting the origin of a leaves no room for b: placing both must win."""
    nodes = [node("n0"), node("n1", free=4)]
    jobs = [job("a", owner_uid="o", npu=4), job("b", npu=8)]
    prob = problem(scenario(nodes, jobs, cache=[entry("o", 0, "n0")]))
    hit_only = measure(prob, placed("a", ["n0"]))
    both = measure(prob, placed("a", ["n1"]), placed("b", ["n0"]))
    assert (hit_only.placed_jobs, hit_only.origin_hits) == (1, 1)
    assert (both.placed_jobs, both.origin_hits) == (2, 0)
    assert both.objective > hit_only.objective


def _many(count: int, **extra: Any) -> list[dict[str, Any]]:
    return [node(f"n{i}", **extra) for i in range(count)]


def test_weights_drop_the_fragment_weight_first_at_the_limit() -> None:
    nodes = _many(200)
    jobs = [job("a", owner_uid="o", tasks=200, npu=1), job("b", npu=1, priority=1)]
    prob = problem(scenario(nodes, jobs, cache=[entry("o", r, f"n{r}") for r in range(200)]))
    weights = resolve_weights(prob, Weights(fragment=20_000))
    assert weights.fragment == 0
    assert weights.notes == ("fragment weight set to 0 to keep the objective below 2^31",)
    # no other lower term is possible here: W_hit = 1, W_place = 200 + 0 + 1 = 201
    assert weights.origin_hit == 1
    assert weights.job_placed == (201, 402)


def test_weights_drop_priority_levels_next() -> None:
    nodes = _many(200, health="subhealthy")
    jobs = [job("a", owner_uid="o", tasks=200, npu=1, priority=0),
            job("b", npu=1, priority=1), job("c", npu=1, priority=2)]
    prob = problem(scenario(nodes, jobs, cache=[entry("o", r, f"n{r}") for r in range(200)]))
    explicit = Weights(subhealthy=10_000, fragment=0)
    weights = resolve_weights(prob, explicit)
    assert weights.notes == (
        "priority levels no longer multiply the placement weight (2^31 limit)",)
    assert len(set(weights.job_placed)) == 1
    # lower = 10,000 × 200 sub-healthy nodes; W_hit = lower + 1
    assert weights.origin_hit == 2_000_001
    total = sum(weights.job_placed) + weights.origin_hit * 200 + 2_000_000
    assert total <= COEFFICIENT_LIMIT
    # with priority levels the same weights would be above the limit
    assert 6 * weights.job_placed[0] + weights.origin_hit * 200 > COEFFICIENT_LIMIT


def test_weights_drop_the_lower_terms_last() -> None:
    nodes = _many(200, health="subhealthy")
    jobs = [job("a", owner_uid="o", tasks=200, npu=1), job("b", npu=1)]
    prob = problem(scenario(nodes, jobs, cache=[entry("o", r, f"n{r}") for r in range(200)]))
    weights = resolve_weights(prob, Weights(subhealthy=30_000))
    assert weights.notes[-1].startswith("fault returns, spill, sub-healthy and reserve no "
                                        "longer count")
    assert (weights.subhealthy, weights.fault_return, weights.reserve) == (0, 0, 0)
    # placed jobs still outweigh every hit
    assert min(weights.job_placed) > weights.origin_hit * 200


def test_weights_refuse_explicit_weights_that_are_too_large() -> None:
    nodes = _many(200, health="subhealthy")
    jobs = [job("a", owner_uid="o", tasks=200, npu=1), job("b", npu=1)]
    prob = problem(scenario(nodes, jobs, cache=[entry("o", r, f"n{r}") for r in range(200)]))
    with pytest.raises(ValueError, match="above 2\\^31; pass explicit weights"):
        resolve_weights(prob, Weights(placed=2**30, origin_hit=2**22))


def test_default_weights_of_the_examples_stay_below_the_limit() -> None:
    for name in scenario_examples():
        prob = compile_scenario(load_scenario(example_path(name)))
        weights = resolve_weights(prob)
        candidates = sum(int(((j.origin >= 0) & ~j.fault).sum()) for j in prob.jobs)
        assert weights.notes == ()
        assert sum(weights.job_placed) + weights.origin_hit * candidates < COEFFICIENT_LIMIT
        # lexicographic: one placed job outweighs every hit
        assert min(weights.job_placed) > weights.origin_hit * candidates


# --------------------------------------------------------------------------- misc


def test_evaluate_mapping_equals_placement_file() -> None:
    nodes = [_n(f"p0-{i}", 0) for i in range(4)]
    prob = problem(scenario(nodes, [job("a", policy="chip8-node8-sp", tasks=2, npu=8,
                                        sp_block=16, owner_uid="o")], {"super-pod-size": 8},
                            cache=[entry("o", 0, "p0-1")]))
    from_file = measure(prob, placed("a", ["p0-1", "p0-2"]))
    from_mapping = evaluate(prob, {0: [1, 2]})
    assert from_file == from_mapping


def test_metrics_model_uses_contract_names() -> None:
    prob = problem(scenario([node("n0")], [job("a")]))
    data = measure(prob, placed("a", ["n0"])).to_model().model_dump(by_alias=True)
    assert set(data) == {"placed-jobs", "origin-hits", "origin-candidates", "fault-returns",
                         "subhealthy-nodes", "reserve-used", "fragment-score", "affinity-spill",
                         "achievable-origin-hits", "objective"}
    assert PlacementFile.model_validate({"metrics": data}).metrics is not None
