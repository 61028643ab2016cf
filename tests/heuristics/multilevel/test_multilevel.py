"""Tests of the multilevel greedy (``heuristics.multilevel``).

Every placed answer goes through the validator (``models.check.check``).  Reference
examples: seed ``002`` (feature), reference §2.6 / E25–E29, RFC seed ``000`` §3.1.6.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from heuristics.base import JobOutcome
from heuristics.greedy import greedy_plan
from heuristics.multilevel import (
    level1_rank,
    place_multilevel,
    ranks_from_level1_groups,
    sort_nodes_by_cached_rank,
)
from heuristics.state import ClusterState
from models.check import check
from models.compiled import Problem, compile_scenario
from models.objective import evaluate
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

NOW = 1_000_000
OWNER = "owner-1"

# --------------------------------------------------------------------------- builders


def node(name: str, *, free: int = 8, health: str = "healthy", npus: int = 8,
         labels: dict[str, str] | None = None, **more: str) -> Node:
    """A node; ``labels`` and keyword labels become Kubernetes labels."""
    return Node(name=name, npus=npus, free=free, health=health,
                labels={**(labels or {}), **more})


def tree(*labels: str, reserve: int = 0) -> dict[str, Any]:
    """A resource-level-config tree: ``labels[0]`` is level1."""
    out: dict[str, Any] = {}
    for i, label in enumerate(labels, start=1):
        out[f"level{i}"] = {"label": label, "reservedNode": reserve} if i == 1 else {
            "label": label}
    return out


def scenario(
    nodes: Sequence[Node],
    trees: dict[str, Any],
    tasks: int,
    affinity: str,
    *,
    cache: dict[int, str] | None = None,
    faults: Sequence[int] = (),
    prefer: bool = True,
    npu: int = 8,
    extra_jobs: Sequence[Job] = (),
) -> Scenario:
    """One multilevel job ``j`` (owner ``OWNER``) on ``nodes``."""
    entries = [CacheEntry(owner_uid=OWNER, rank=r, node=n, updated=NOW)
               for r, n in sorted((cache or {}).items())]
    job = Job(name="j", owner_uid=OWNER, policy="multilevel", tasks=tasks, npu_per_task=npu,
              affinity_config=affinity, fault_ranks=list(faults))
    return Scenario(
        now=NOW,
        config=Config(resource_level_config=trees, prefer_previous_node=prefer),
        nodes=list(nodes),
        affinity_cache=AffinityCacheModel(entries=entries),
        jobs=[job, *extra_jobs],
    )


def assert_valid(problem: Problem, j: int, outcome: JobOutcome) -> None:
    """The outcome is a valid placement of job ``j`` or carries a reason."""
    plan = Plan.empty(problem)
    if outcome.nodes is None:
        assert outcome.reason, "an unplaced job must carry a reason"
        plan.reasons[j] = outcome.reason
    else:
        assert outcome.nodes.shape == (problem.jobs[j].tasks,)
        plan.nodes[j] = outcome.nodes
    placement = to_placement(problem, plan, engine="greedy", status=Status.GREEDY)
    violations = check(problem, placement)
    assert violations == [], [str(v) for v in violations]


def solve(sc: Scenario, j: int = 0) -> tuple[Problem, JobOutcome]:
    """Compile, place job ``j`` on the initial state, validate, and return."""
    problem = compile_scenario(sc)
    outcome = place_multilevel(problem, j, ClusterState.initial(problem))
    assert_valid(problem, j, outcome)
    return problem, outcome


def names(problem: Problem, outcome: JobOutcome) -> list[str]:
    """Node name per rank of a placed outcome."""
    assert outcome.nodes is not None, outcome.reason
    return [problem.node_names[int(n)] for n in outcome.nodes]


def metrics_of(problem: Problem, outcome: JobOutcome) -> Any:
    """Objective metrics of a placed outcome of job 0."""
    assert outcome.nodes is not None, outcome.reason
    return evaluate(problem, {0: [int(n) for n in outcome.nodes]})


def label_of(problem: Problem, name: str, label: str) -> str:
    return problem.scenario.nodes[problem.node_index[name]].labels[label]


def rack_switch_cluster(layout: dict[str, dict[str, int]],
                        **overrides: dict[str, Any]) -> list[Node]:
    """Nodes ``<rack>-n<k>`` per switch → rack → node count, labels ``switch``/``rack``."""
    out = []
    for switch, racks in layout.items():
        for rack, count in racks.items():
            for k in range(count):
                name = f"{rack}-n{k}"
                out.append(node(name, switch=switch, rack=rack, **overrides.get(name, {})))
    return out


# --------------------------------------------------------------------------- seed 002


def test_seed_example_8_pods_level1_4() -> None:
    """Seed 002 example 1: 8 pods, level1=4 → two groups of 4 on one level1 value each."""
    nodes = rack_switch_cluster({"s0": {"r0": 4, "r1": 6}, "s1": {"r2": 5}})
    problem, outcome = solve(scenario(nodes, {"default": tree("rack", "switch")}, 8, "level1=4"))
    got = names(problem, outcome)
    for g in range(2):
        assert len({label_of(problem, n, "rack") for n in got[4 * g:4 * g + 4]}) == 1
    # Strict rule (level1 only, tree with a level2): both groups under one switch.
    assert {label_of(problem, n, "switch") for n in got} == {"s0"}
    # Best fit: r0 (4 free, fragment 0) before r1 (6 free, fragment 2).
    assert got[:4] == ["r0-n0", "r0-n1", "r0-n2", "r0-n3"]


def test_strict_rule_groups_level1_under_one_level2() -> None:
    """§2.6.8: a level1-only job first asks for all its level1 groups in one level2 domain."""
    # Plain best fit over racks (label order r1, r2, r3) would take r1 and r2, which sit in
    # different switches; the strict attempt takes r1 and r3 of switch s0.
    nodes = rack_switch_cluster({"s0": {"r1": 2, "r3": 2}, "s1": {"r2": 2}})
    problem, outcome = solve(scenario(nodes, {"default": tree("rack", "switch")}, 4, "level1=2"))
    assert names(problem, outcome) == ["r1-n0", "r1-n1", "r3-n0", "r3-n1"]
    # Without a level2 in the tree there is no strict attempt: plain best fit.
    problem, outcome = solve(scenario(nodes, {"default": tree("rack")}, 4, "level1=2"))
    assert names(problem, outcome) == ["r1-n0", "r1-n1", "r2-n0", "r2-n1"]


@pytest.mark.parametrize("tasks", [8, 16])
def test_seed_example_level1_2_level2_4(tasks: int) -> None:
    """Seed 002 examples: 8 and 16 pods with level1=2,level2=4."""
    nodes = rack_switch_cluster({
        "s0": {"r00": 3, "r01": 2, "r02": 1},
        "s1": {"r10": 4, "r11": 4},
        "s2": {"r20": 5, "r21": 3, "r22": 2},
    })
    problem, outcome = solve(scenario(nodes, {"default": tree("rack", "switch")}, tasks,
                                      "level1=2,level2=4"))
    got = names(problem, outcome)
    for size, label in ((2, "rack"), (4, "switch")):
        for g in range(tasks // size):
            assert len({label_of(problem, n, label) for n in got[g * size:(g + 1) * size]}) == 1
    # Also through the batch driver.
    plan = greedy_plan(problem)
    assert plan.nodes[0] is not None
    assert check(problem, to_placement(problem, plan, engine="greedy", status=Status.GREEDY)) == []


# --------------------------------------------------------------------------- E25–E28


def _e25() -> Scenario:
    nodes = [node(n, spine=s, switch=w) for s, w, group in (
        ("S0", "W0", ("n00", "n01", "n02")), ("S0", "W1", ("n10", "n11")),
        ("S1", "W2", ("n20", "n21", "n22", "n23"))) for n in group]
    return scenario(nodes, {"default": tree("switch", "spine")}, 4, "level1=2,level2=4")


def _e26(tasks: int) -> Scenario:
    nodes = [node(n, switch=w) for w, group in (("W0", ("a0", "a1", "a2")), ("W1", ("b0", "b1")))
             for n in group]
    return scenario(nodes, {"default": tree("switch", reserve=1)}, tasks, "level1=2")


def _e27(tasks: int) -> Scenario:
    nodes = [node(n, switch=w) for w, group in (("W0", ("a0", "a1", "a2", "a3")),
                                                ("W1", ("b0", "b1", "b2"))) for n in group]
    return scenario(nodes, {"default": tree("switch")}, tasks, "level1=2")


def _e28(*, w1_free: bool, faults: Sequence[int] = ()) -> Scenario:
    nodes = [
        node("a0", switch="W0"), node("a1", switch="W0"), node("a2", switch="W0"),
        node("b0", switch="W1"), node("b1", switch="W1", health="unhealthy"),
        node("b2", switch="W1", free=8 if w1_free else 0),
        node("c0", switch="W2"), node("c1", switch="W2"),
    ]
    return scenario(nodes, {"default": tree("switch")}, 4, "level1=2",
                    cache={0: "a0", 1: "a1", 2: "b0", 3: "b1"}, faults=faults)


@pytest.mark.parametrize(
    ("case", "make", "expected"),
    [
        ("E25 fragment-aware domain choice", _e25, ["n20", "n21", "n22", "n23"]),
        ("E26 reservation and pass 2", lambda: _e26(4), ["a1", "a2", "b0", "b1"]),
        ("E26 2 tasks: reserve stays free", lambda: _e26(2), ["a1", "a2"]),
        ("E27 best fit skips W0", lambda: _e27(2), ["b0", "b1"]),
        ("E27 6 tasks", lambda: _e27(6), ["a0", "a1", "a2", "a3", "b0", "b1"]),
        ("E28 pod-level repair", lambda: _e28(w1_free=True), ["a0", "a1", "b0", "b2"]),
        ("E28 fault job escalates", lambda: _e28(w1_free=False, faults=[3]),
         ["a0", "a1", "c0", "c1"]),
        ("E28 prefer-previous: full schedule instead of failing",
         lambda: _e28(w1_free=False), ["a0", "a1", "c0", "c1"]),
    ],
)
def test_reference_examples(case: str, make: Any, expected: list[str]) -> None:
    problem, outcome = solve(make())
    assert names(problem, outcome) == expected, case


def test_e25_scores() -> None:
    """E25's initial scores: the tree's fragment score is the root's (100)."""
    from heuristics.multilevel.context import Context
    from heuristics.multilevel.run import Run

    problem = compile_scenario(_e25())
    ctx = Context(problem, problem.jobs[0], ClusterState.initial(problem))
    tix = ctx.index(0, 2)
    run = Run(ctx, tix, ctx.req_of((2, 4), 4), 0, np.arange(len(tix.order)), {})
    scores = {(d.depth, d.seq): (d.alloc, d.frag) for ds in run.by_depth.values() for d in ds}
    # depth 1 = spines S0, S1; depth 2 = switches W0, W1, W2 (label order)
    assert run.root.alloc == 2 and run.root.frag == 100
    assert sorted(v for (depth, _), v in scores.items() if depth == 1) == [(1, 0), (1, 10)]
    assert sorted(v for (depth, _), v in scores.items() if depth == 2) == [(1, 0), (1, 1), (2, 0)]


def test_e26_initial_scores() -> None:
    """E26: W0 alloc 1 frag 0; W1 alloc 0 frag 1; root alloc 0 frag 12."""
    from heuristics.multilevel.context import Context
    from heuristics.multilevel.run import Run

    problem = compile_scenario(_e26(4))
    ctx = Context(problem, problem.jobs[0], ClusterState.initial(problem))
    tix = ctx.index(0, 1)
    run = Run(ctx, tix, ctx.req_of((2,), 4), 0, np.arange(len(tix.order)), {})
    w0, w1 = run.by_depth[1]
    assert (w0.alloc, w0.frag, w1.alloc, w1.frag) == (1, 0, 0, 1)
    assert (run.root.alloc, run.root.frag) == (0, 12)
    assert {problem.node_names[n] for n in w0.reserved | w1.reserved} == {"a0", "b0"}


# --------------------------------------------------------------------------- E29


@pytest.mark.parametrize(
    ("nodes", "cached", "expected"),
    [
        (["node-c", "node-a", "node-b"], None, ["node-a", "node-b", "node-c"]),
        (["node-z", "", "node-m"], None, ["", "node-m", "node-z"]),
        (["c", "a", "b"], ["a", "b", "c"], ["a", "b", "c"]),
        (["node-b", "node-d", "node-c"], ["node-a", "node-b", "node-c"],
         ["node-d", "node-b", "node-c"]),
        # natural order: node-9 before node-10
        (["node-10", "node-9"], None, ["node-9", "node-10"]),
        # a rank gap: node-x keeps position 2, the new node fills the gap at 1
        (["node-x", "node-new", "node-a"], ["node-a", "gone", "node-x"],
         ["node-a", "node-new", "node-x"]),
    ],
)
def test_e29_sort_nodes_by_cached_rank(nodes: list[str], cached: list[str] | None,
                                       expected: list[str]) -> None:
    assert sort_nodes_by_cached_rank(nodes, cached) == expected


_GROUPS = {"0": ["n0", "n1"], "1": ["n2", "n3"]}


@pytest.mark.parametrize(("rank", "expected"), [(0, ("0", 0)), (1, ("0", 1)), (2, ("1", 0)),
                                                 (3, ("1", 1))])
def test_e29_level1_rank(rank: int, expected: tuple[str, int]) -> None:
    assert level1_rank(_GROUPS, rank) == expected


@pytest.mark.parametrize(("groups", "rank"), [(_GROUPS, 4), (_GROUPS, 10), ({}, 0),
                                              ({"invalid": ["n0"]}, 0), (_GROUPS, -1)])
def test_e29_level1_rank_errors(groups: dict[str, list[str]], rank: int) -> None:
    with pytest.raises(ValueError):
        level1_rank(groups, rank)


def test_e29_groups_numeric_order_and_unequal_sizes() -> None:
    groups = {"10": ["x"], "2": ["a", "b", "c"], "bad": ["z"]}
    assert ranks_from_level1_groups(groups) == ["a", "b", "c", "x"]
    assert level1_rank(groups, 3) == ("10", 0)


# --------------------------------------------------------------------------- reservation


def test_reserve_not_used_in_pass_1() -> None:
    """reservedNode=1: a 5-node rack gives a 4-pod group without its reserved node."""
    nodes = rack_switch_cluster({"s0": {"r0": 5}})
    problem, outcome = solve(scenario(nodes, {"default": tree("rack", reserve=1)}, 4,
                                      "level1=4"))
    assert "r0-n0" not in names(problem, outcome)
    assert metrics_of(problem, outcome).reserve_used == 0


def test_reserve_used_when_nothing_else_fits() -> None:
    nodes = rack_switch_cluster({"s0": {"r0": 4, "r1": 3}})
    problem, outcome = solve(scenario(nodes, {"default": tree("rack", reserve=1)}, 4,
                                      "level1=4"))
    assert names(problem, outcome) == ["r0-n0", "r0-n1", "r0-n2", "r0-n3"]


def test_reserve_prefers_other_domain_before_reserve() -> None:
    """Pass 1 takes a rack without touching a reserve; the reserve of r0 stays free."""
    nodes = rack_switch_cluster({"s0": {"r0": 4, "r1": 5}})
    problem, outcome = solve(scenario(nodes, {"default": tree("rack", reserve=1)}, 4,
                                      "level1=4"))
    assert names(problem, outcome) == ["r1-n1", "r1-n2", "r1-n3", "r1-n4"]


def test_reserve_with_two_reserved_nodes_and_insufficient_domain() -> None:
    """reservedNode=2: a 1-node rack lacks a sufficient reserve; pass 2 may still use it."""
    nodes = rack_switch_cluster({"s0": {"r0": 1, "r1": 3}})
    problem, outcome = solve(scenario(nodes, {"default": tree("rack", reserve=2)}, 1,
                                      "level1=1"))
    assert names(problem, outcome) == ["r1-n2"]
    problem, outcome = solve(scenario(nodes, {"default": tree("rack", reserve=2)}, 4,
                                      "level1=1"))
    assert sorted(names(problem, outcome)) == ["r0-n0", "r1-n0", "r1-n1", "r1-n2"]


def test_repair_keeps_the_reserve_while_the_domain_has_other_nodes() -> None:
    """A lost node is replaced by a non-reserved free node of its rack (pass 1)."""
    nodes = rack_switch_cluster({"s0": {"r0": 6}}, **{"r0-n3": {"health": "unhealthy"}})
    sc = scenario(nodes, {"default": tree("rack", reserve=1)}, 4, "level1=4",
                  cache={0: "r0-n1", 1: "r0-n2", 2: "r0-n3", 3: "r0-n4"})
    problem, outcome = solve(sc)
    assert names(problem, outcome) == ["r0-n1", "r0-n2", "r0-n5", "r0-n4"]


def test_repair_uses_the_reserve_when_the_domain_has_nothing_else() -> None:
    """Seed 002: the reserve exists for fault rescheduling (pass 2 of the repair)."""
    nodes = rack_switch_cluster({"s0": {"r0": 5}}, **{"r0-n3": {"health": "unhealthy"}})
    sc = scenario(nodes, {"default": tree("rack", reserve=1)}, 4, "level1=4",
                  cache={0: "r0-n1", 1: "r0-n2", 2: "r0-n3", 3: "r0-n4"})
    problem, outcome = solve(sc)
    assert names(problem, outcome) == ["r0-n1", "r0-n2", "r0-n0", "r0-n4"]


# --------------------------------------------------------------------------- RFC cases


def _two_switch_cluster() -> list[Node]:
    return rack_switch_cluster({
        "s0": {"r00": 4, "r01": 4, "r02": 3},
        "s1": {"r10": 2, "r11": 2, "r12": 2, "r13": 2},
        "s2": {"r20": 4, "r21": 4},
    })


def test_evicted_job_returns_every_rank_to_its_position() -> None:
    nodes = _two_switch_cluster()
    trees = {"default": tree("rack", "switch")}
    fresh = solve(scenario(nodes, trees, 8, "level1=2,level2=4"))
    # An old layout elsewhere, with positions scrambled inside the groups.
    old = ["r11-n1", "r11-n0", "r13-n0", "r13-n1", "r21-n3", "r21-n0", "r20-n2", "r20-n1"]
    assert names(*fresh) != old
    problem, outcome = solve(scenario(nodes, trees, 8, "level1=2,level2=4",
                                      cache=dict(enumerate(old))))
    assert names(problem, outcome) == old
    metrics = metrics_of(problem, outcome)
    assert metrics.origin_hits == 8
    # With the preference off the cache is ignored.
    off = solve(scenario(nodes, trees, 8, "level1=2,level2=4", cache=dict(enumerate(old)),
                         prefer=False))
    assert names(*off) == names(*fresh)


def test_subtree_with_origins_first_despite_worse_fragment() -> None:
    """RFC §3.1.6: the switch holding origins is traversed first (frag 10 vs 0)."""
    nodes = rack_switch_cluster(
        {"sB": {"b0": 2, "b1": 2, "b2": 2}, "sC": {"c0": 2, "c1": 2}},
        **{"b1-n1": {"free": 0}},
    )
    trees = {"default": tree("rack", "switch")}
    cache = {0: "b0-n0", 1: "b0-n1", 2: "b1-n0", 3: "b1-n1"}
    # Without the cache the best fit is sC (fragment 0 < sB's 10).
    assert names(*solve(scenario(nodes, trees, 4, "level1=2,level2=4"))) == [
        "c0-n0", "c0-n1", "c1-n0", "c1-n1"]
    # Rank 3's node is busy and b1 has no spare: the in-group repair fails; the full
    # ScheduleWithPreference goes back to sB and keeps ranks 0 and 1 in place.
    problem, outcome = solve(scenario(nodes, trees, 4, "level1=2,level2=4", cache=cache))
    assert names(problem, outcome) == ["b0-n0", "b0-n1", "b2-n0", "b2-n1"]


def test_rank_gap_does_not_slide_higher_ranks_down() -> None:
    """RFC §3.1.11 position pre-allocation: rank 3 keeps position 3 when rank 2 has no entry.

    The new node ``a-n4`` sorts after ``a-n3``: a sorting approach would slide ``a-n3``
    down to rank 2.
    """
    nodes = rack_switch_cluster(
        {"s0": {"a": 5, "b": 4, "c": 4}},
        **{"a-n2": {"free": 0}, "b-n3": {"free": 0}},
    )
    trees = {"default": tree("rack")}
    # Group 1 (ranks 4..7) lost b-n3 and rack b has no spare: full schedule with preference.
    cache = {0: "a-n0", 1: "a-n1", 3: "a-n3", 4: "b-n0", 5: "b-n1", 6: "b-n2", 7: "b-n3"}
    problem, outcome = solve(scenario(nodes, trees, 8, "level1=4", cache=cache))
    got = names(problem, outcome)
    assert got[:4] == ["a-n0", "a-n1", "a-n4", "a-n3"]
    assert {label_of(problem, n, "rack") for n in got[4:]} == {"c"}
    # Repair path with the same gap: the pinned ranks stay, rank 2 gets the new node.
    cache = {0: "a-n0", 1: "a-n1", 3: "a-n3"}
    problem, outcome = solve(scenario(nodes, trees, 4, "level1=4", cache=cache))
    assert names(problem, outcome) == ["a-n0", "a-n1", "a-n4", "a-n3"]


def test_lost_node_repaired_inside_its_level1_group() -> None:
    nodes = _two_switch_cluster()
    old = ["r00-n0", "r00-n1", "r01-n0", "r01-n1", "r20-n0", "r20-n1", "r21-n0", "r21-n1"]
    lost: dict[str, dict[str, Any]] = {"r21-n1": {"health": "unhealthy"}}
    nodes = [node(n.name, labels=n.labels, **lost.get(n.name, {})) for n in nodes]
    problem, outcome = solve(scenario(nodes, {"default": tree("rack", "switch")}, 8,
                                      "level1=2,level2=4", cache=dict(enumerate(old))))
    got = names(problem, outcome)
    assert got[:7] == old[:7]
    assert label_of(problem, got[7], "rack") == "r21" and got[7] != "r21-n1"


def test_group_that_cannot_be_repaired_gets_a_full_reschedule() -> None:
    """Upstream fails this session (maxEscalation 0); the RFC reschedules fully."""
    nodes = rack_switch_cluster({"s0": {"r0": 2, "r1": 2}, "s1": {"r2": 2, "r3": 2}},
                                **{"r1-n1": {"free": 0}})
    cache = {0: "r0-n0", 1: "r0-n1", 2: "r1-n0", 3: "r1-n1"}
    problem, outcome = solve(scenario(nodes, {"default": tree("rack", "switch")}, 4,
                                      "level1=2,level2=4", cache=cache))
    assert names(problem, outcome) == ["r2-n0", "r2-n1", "r3-n0", "r3-n1"]


def test_fault_rank_does_not_return_to_its_node() -> None:
    nodes = rack_switch_cluster({"s0": {"r0": 5}})
    cache = {0: "r0-n0", 1: "r0-n1", 2: "r0-n2", 3: "r0-n3"}
    problem, outcome = solve(scenario(nodes, {"default": tree("rack")}, 4, "level1=4",
                                      cache=cache, faults=[2]))
    got = names(problem, outcome)
    assert got == ["r0-n0", "r0-n1", "r0-n4", "r0-n3"]
    metrics = metrics_of(problem, outcome)
    assert (metrics.fault_returns, metrics.origin_hits) == (0, 3)


def test_fault_rank_swapped_off_its_node_when_it_is_the_only_spare() -> None:
    nodes = rack_switch_cluster({"s0": {"r0": 4}})
    cache = {0: "r0-n0", 1: "r0-n1", 2: "r0-n2", 3: "r0-n3"}
    problem, outcome = solve(scenario(nodes, {"default": tree("rack")}, 4, "level1=4",
                                      cache=cache, faults=[1]))
    got = names(problem, outcome)
    assert got[1] != "r0-n1"
    assert metrics_of(problem, outcome).fault_returns == 0


def test_preferred_level1_group_keeps_its_group_index() -> None:
    """Pre-allocation at the group level: a group arriving second still gets its old index.

    Rack r4 (group 2) lost a node without spare, so the job is scheduled afresh with
    preference.  r1 (fragment 0) is traversed before r3 (fragment 1), yet r3's nodes keep
    ranks 0-1 and r1's ranks 2-3.
    """
    nodes = rack_switch_cluster({"s0": {"r1": 2, "r3": 3, "r4": 2, "r5": 2}},
                                **{"r4-n1": {"free": 0}})
    cache = {0: "r3-n0", 1: "r3-n1", 2: "r1-n0", 3: "r1-n1", 4: "r4-n0", 5: "r4-n1"}
    problem, outcome = solve(scenario(nodes, {"default": tree("rack")}, 6, "level1=2",
                                      cache=cache))
    assert names(problem, outcome) == ["r3-n0", "r3-n1", "r1-n0", "r1-n1", "r5-n0", "r5-n1"]


def test_in_group_repair_keeps_other_ranks() -> None:
    nodes = rack_switch_cluster({"s0": {"r0": 2, "r1": 3, "r2": 2}}, **{"r1-n1": {"free": 0}})
    cache = {0: "r1-n0", 1: "r1-n1", 2: "r2-n0", 3: "r2-n1"}
    problem, outcome = solve(scenario(nodes, {"default": tree("rack")}, 4, "level1=2",
                                      cache=cache))
    assert names(problem, outcome) == ["r1-n0", "r1-n2", "r2-n0", "r2-n1"]


@pytest.mark.parametrize(("faults", "expected"), [
    # Fault job: escalation re-schedules group 1 alone under the root (best fit: rack c).
    ([3], ["a-n0", "a-n1", "c-n0", "c-n1"]),
    # No fault rank (maxEscalation 0): the in-group repair fails and the full schedule runs;
    # its strict-rule attempt keeps both groups under one switch (s0).
    ([], ["a-n0", "a-n1", "x-n0", "x-n1"]),
])
def test_fault_job_escalates_other_jobs_reschedule_fully(faults: list[int],
                                                         expected: list[str]) -> None:
    nodes = rack_switch_cluster({"s0": {"a": 2, "x": 3}, "s1": {"b": 2, "c": 2}},
                                **{"b-n1": {"health": "unhealthy"}})
    cache = {0: "a-n0", 1: "a-n1", 2: "b-n0", 3: "b-n1"}
    problem, outcome = solve(scenario(nodes, {"default": tree("rack", "switch")}, 4,
                                      "level1=2", cache=cache, faults=faults))
    assert names(problem, outcome) == expected


def test_stale_cache_breaking_the_grouping_keeps_the_consistent_part() -> None:
    """Ranks 0 and 1 were cached in different racks (an older affinity-config)."""
    nodes = rack_switch_cluster({"s0": {"r0": 3, "r1": 3}})
    cache = {0: "r0-n0", 1: "r1-n0", 2: "r1-n1", 3: "r1-n2"}
    problem, outcome = solve(scenario(nodes, {"default": tree("rack")}, 4, "level1=2",
                                      cache=cache))
    got = names(problem, outcome)
    # Group 0 keeps rank 0 (tie: smallest rank) and repairs rank 1 in rack r0.
    assert got[0] == "r0-n0" and got[1].startswith("r0-")
    assert got[2:] == ["r1-n1", "r1-n2"]


# --------------------------------------------------------------------------- trees, reasons


def test_missing_label_invalidates_the_tree_with_a_named_reason() -> None:
    nodes = [node("n0", rack="r0"), node("n1", rack="r0"), node("n2")]
    problem, outcome = solve(scenario(nodes, {"default": tree("rack")}, 2, "level1=2"))
    assert outcome.nodes is None
    assert "node 'n2' lacks label 'rack'" in (outcome.reason or "")
    # A busy node without the label does not matter.
    nodes[2] = node("n2", free=0)
    problem, outcome = solve(scenario(nodes, {"default": tree("rack")}, 2, "level1=2"))
    assert names(problem, outcome) == ["n0", "n1"]


def test_missing_label_of_a_trimmed_level_keeps_the_node_in_the_tree() -> None:
    """Upstream trims the levels above the job's (``removeRedundantLayers``)
    before it reads any label, so a node lacking only a trimmed level's label stays a leaf.

    ``n2`` lacks ``switch`` (level2); the job uses level1 only and needs all three nodes.
    """
    nodes = [node("n0", rack="r0", switch="s0"), node("n1", rack="r0", switch="s0"),
             node("n2", rack="r0")]
    problem, outcome = solve(scenario(nodes, {"default": tree("rack", "switch")}, 3,
                                      "level1=3"))
    assert names(problem, outcome) == ["n0", "n1", "n2"]
    plan = greedy_plan(problem)
    assert check(problem, to_placement(problem, plan, engine="greedy",
                                       status=Status.GREEDY)) == []


def test_missing_label_of_a_used_level_invalidates_the_tree() -> None:
    """The pair's other half: the same node lacking ``switch`` invalidates the
    tree for a job that uses level2, and the reason names the node and the label."""
    nodes = [node("n0", rack="r0", switch="s0"), node("n1", rack="r0", switch="s0"),
             node("n2", rack="r0"), node("n3", rack="r1", switch="s0")]
    problem, outcome = solve(scenario(nodes, {"default": tree("rack", "switch")}, 2,
                                      "level1=1,level2=2"))
    assert outcome.nodes is None
    assert "node 'n2' lacks label 'switch'" in (outcome.reason or "")
    plan = greedy_plan(problem)
    assert plan.nodes[0] is None and "lacks label 'switch'" in (plan.reasons[0] or "")


def test_other_topotree_and_trimmed_levels() -> None:
    """Topotree label default; a 3-level tree serves a level1-only job (levels trimmed)."""
    nodes = [node(f"x{i}", labels={"huawei.com/topotree": "t2", "rack": "r0", "row": "w0",
                                   "hall": "h0"}) for i in range(2)]
    nodes += [node(f"d{i}", rack="r9") for i in range(2)]
    trees = {"t2": tree("rack", "row", "hall"), "default": tree("rack")}
    problem, outcome = solve(scenario(nodes, trees, 2, "level1=2"))
    # Only t2 has a level2, so the strict attempt succeeds there first.
    assert names(problem, outcome) == ["x0", "x1"]
    # With origins on "default" the plain schedule has more hits and wins (the strict rule
    # is not a hard constraint).
    problem, outcome = solve(scenario(nodes, trees, 2, "level1=2",
                                      cache={0: "d1", 1: "d0"}))
    assert names(problem, outcome) == ["d1", "d0"]


def test_equal_trees_tie_break_by_natural_name() -> None:
    nodes = [node(f"x{i}", labels={"huawei.com/topotree": "tree-10", "rack": "r0"})
             for i in range(2)]
    nodes += [node(f"y{i}", labels={"huawei.com/topotree": "tree-9", "rack": "r0"})
              for i in range(2)]
    trees = {"tree-10": tree("rack"), "tree-9": tree("rack")}
    problem, outcome = solve(scenario(nodes, trees, 2, "level1=2"))
    assert names(problem, outcome) == ["y0", "y1"]


def test_tree_too_shallow_and_not_enough_nodes_reasons() -> None:
    nodes = rack_switch_cluster({"s0": {"r0": 3}})
    _, outcome = solve(scenario(nodes, {"default": tree("rack")}, 4, "level1=2,level2=4"))
    assert outcome.nodes is None and "has 1 levels but the affinity-config needs 2" in (
        outcome.reason or "")
    _, outcome = solve(scenario(nodes, {"default": tree("rack")}, 4, "level1=2"))
    assert outcome.nodes is None and "not enough node (3 usable, 4 needed)" in (
        outcome.reason or "")
    nodes = rack_switch_cluster({"s0": {"r0": 3, "r1": 3}})
    _, outcome = solve(scenario(nodes, {"default": tree("rack")}, 4, "level1=4"))
    assert outcome.nodes is None and "failed to schedule tasks" in (outcome.reason or "")
    assert "'j'" in (outcome.reason or "")


def test_wrong_node_size_and_busy_nodes_are_not_candidates() -> None:
    nodes = [node("n0", rack="r0"), node("n1", rack="r0", npus=16, free=16),
             node("n2", rack="r0", free=4), node("n3", rack="r0")]
    problem, outcome = solve(scenario(nodes, {"default": tree("rack")}, 2, "level1=2"))
    assert names(problem, outcome) == ["n0", "n3"]


def test_healthy_nodes_before_subhealthy_ones() -> None:
    nodes = rack_switch_cluster({"s0": {"r0": 4}}, **{"r0-n0": {"health": "subhealthy"}})
    problem, outcome = solve(scenario(nodes, {"default": tree("rack")}, 2, "level1=2"))
    assert names(problem, outcome) == ["r0-n1", "r0-n2"]


def test_state_is_respected_and_not_mutated() -> None:
    nodes = rack_switch_cluster({"s0": {"r0": 2, "r1": 2}})
    problem = compile_scenario(scenario(nodes, {"default": tree("rack")}, 2, "level1=2"))
    state = ClusterState.initial(problem)
    state.free[problem.node_index["r0-n0"]] = 0
    before = state.free.copy()
    outcome = place_multilevel(problem, 0, state)
    assert (state.free == before).all()
    assert names(problem, outcome) == ["r1-n0", "r1-n1"]


def test_greedy_plan_runs_jobs_one_after_another() -> None:
    nodes = rack_switch_cluster({"s0": {"r0": 4, "r1": 4}})
    other = Job(name="k", policy="multilevel", tasks=4, npu_per_task=8,
                affinity_config="level1=4")
    problem = compile_scenario(scenario(nodes, {"default": tree("rack")}, 4, "level1=4",
                                        extra_jobs=[other]))
    plan = greedy_plan(problem)
    assert plan.placed_count() == 2
    assert check(problem, to_placement(problem, plan, engine="greedy", status=Status.GREEDY)) == []


# --------------------------------------------------------------------------- hypothesis


@st.composite
def random_scenarios(draw: st.DrawFn) -> Scenario:
    """Random trees (2–4 levels, uneven fan-out), affinity-configs, caches and faults."""
    depth = draw(st.integers(2, 4))
    labels = [f"l{i}" for i in range(1, depth + 1)]
    paths: list[list[str]] = []

    def grow(level: int, path: list[str]) -> None:
        if level == 0:
            paths.extend([path] * draw(st.integers(1, 5)))
            return
        for k in range(draw(st.integers(1, 3))):
            grow(level - 1, [*path, f"v{level}-{k}"])

    grow(depth, [])
    nodes = []
    for i, path in enumerate(paths):
        lab = {labels[depth - 1 - lv]: path[lv] for lv in range(depth)}
        if draw(st.integers(0, 30)) == 0:
            del lab[draw(st.sampled_from(labels))]
        if draw(st.integers(0, 15)) == 0:
            lab["huawei.com/topotree"] = "other"
        nodes.append(node(
            f"node-{i}",
            free=draw(st.sampled_from([8, 8, 8, 8, 8, 0, 4])),
            health=draw(st.sampled_from(["healthy"] * 8 + ["subhealthy", "unhealthy"])),
            labels=lab,
        ))
    trees = {"default": tree(*labels, reserve=draw(st.sampled_from([0, 0, 1, 2])))}
    if draw(st.booleans()):
        trees["other"] = tree(*labels)
    k = draw(st.integers(1, min(depth + 1, 3)))
    values = [draw(st.sampled_from([1, 2, 2, 3, 4]))]
    for _ in range(k - 1):
        values.append(values[-1] * draw(st.sampled_from([1, 2, 3])))
    tasks = values[-1] * draw(st.sampled_from([1, 1, 2, 3]))
    affinity = ",".join(f"level{i}={v}" for i, v in enumerate(values, start=1))
    cache: dict[int, str] = {}
    if draw(st.booleans()):
        for r in range(tasks):
            if draw(st.integers(0, 4)) > 0:
                cache[r] = nodes[draw(st.integers(0, len(nodes) - 1))].name
    faults = draw(st.lists(st.integers(0, tasks - 1), max_size=2, unique=True))
    return scenario(nodes, trees, tasks, affinity, cache=cache, faults=faults,
                    prefer=draw(st.integers(0, 5)) > 0)


@given(random_scenarios())
def test_random_scenarios_valid_or_reason_and_deterministic(sc: Scenario) -> None:
    problem, outcome = solve(sc)
    again = place_multilevel(problem, 0, ClusterState.initial(problem))
    assert outcome.reason == again.reason
    if outcome.nodes is None:
        assert again.nodes is None
        assert "'j'" in (outcome.reason or "")
    else:
        assert again.nodes is not None and (outcome.nodes == again.nodes).all()
        job = problem.jobs[0]
        origins = [int(job.origin[r]) for r in np.flatnonzero(job.fault)]
        if job.tasks > 1 and len(set(origins)) == len(origins):
            for r in np.flatnonzero(job.fault).tolist():
                assert outcome.nodes[r] != job.origin[r] or job.origin[r] < 0
    # A usable node lacking the label of a level the job uses (level1..levelK; the levels
    # above are trimmed first) invalidates its only tree, and the reason says so.
    whole = problem.whole_free & (problem.npus == 8)
    default = problem.trees["default"]
    named = whole & (problem.node_tree == problem.tree_names.index("default"))
    used = np.ones(problem.num_nodes, dtype=bool)
    deep_enough = default.depth >= len(problem.jobs[0].levels)
    for i in range(min(default.depth, len(problem.jobs[0].levels))):
        used &= default.level_value[i] >= 0
    if deep_enough and (named & ~used).any() and "other" not in problem.trees:
        assert outcome.nodes is None and "lacks label" in (outcome.reason or "")
    plan = greedy_plan(problem)
    assert check(problem, to_placement(problem, plan, engine="greedy", status=Status.GREEDY)) == []


@given(random_scenarios())
def test_random_full_cache_of_a_valid_layout_is_reused(sc: Scenario) -> None:
    """Any valid layout written to the cache comes back rank for rank."""
    bare = sc.model_copy(update={
        "affinity_cache": AffinityCacheModel(),
        "config": sc.config.model_copy(update={"prefer_previous_node": True}),
        "jobs": [sc.jobs[0].model_copy(update={"fault_ranks": []})],
    })
    problem, outcome = solve(bare)
    if outcome.nodes is None:
        return
    layout = names(problem, outcome)
    # Reverse every level1 group so that the cache differs from what a fresh run gives.
    a1 = problem.jobs[0].levels[0]
    old = [n for g in range(0, len(layout), a1) for n in reversed(layout[g:g + a1])]
    cached = bare.model_copy(update={"affinity_cache": AffinityCacheModel(entries=[
        CacheEntry(owner_uid=OWNER, rank=r, node=n, updated=NOW) for r, n in enumerate(old)])})
    problem, outcome = solve(cached)
    assert names(problem, outcome) == old


# --------------------------------------------------------------------------- repair paths


@given(
    healths=st.lists(st.sampled_from(["healthy", "healthy", "subhealthy"]), min_size=1,
                     max_size=7),
    reserve=st.integers(0, 3),
    prefs=st.lists(st.integers(0, 6), max_size=4, unique=True),
    faults=st.lists(st.integers(0, 6), max_size=2, unique=True),
)
def test_single_pod_repair_picks_what_a_scheduling_run_picks(
    healths: list[str], reserve: int, prefs: list[int], faults: list[int]
) -> None:
    """``repair_pod`` (the single-pod repair shortcut) equals a full :class:`Run`."""
    from heuristics.multilevel.context import Context
    from heuristics.multilevel.history import repair_pod
    from heuristics.multilevel.run import Run

    count = len(healths)
    nodes = [node(f"n{i}", health=h, switch="W0") for i, h in enumerate(healths)]
    fault_ranks = [r for r in faults if r < count]
    cache = {r: f"n{r}" for r in fault_ranks}
    sc = scenario(nodes, {"default": tree("switch", reserve=reserve)}, count, "level1=1",
                  cache=cache, faults=fault_ranks)
    problem = compile_scenario(sc)
    ctx = Context(problem, problem.jobs[0], ClusterState.initial(problem))
    tix = ctx.index(0, 1)
    idx = np.arange(len(tix.order))
    pref = {int(tix.order[p]): rank for rank, p in enumerate(prefs) if p < count}
    req = ctx.req_of((1,), 1)
    run = Run(ctx, tix, req, len(req) - 2, idx, pref)
    expected = None
    if run.run():
        out = [-1] * ctx.tasks
        ctx.write(run, 0, out)
        expected = out[:1]
    assert repair_pod(ctx, tix, tix.order[idx], pref) == expected
