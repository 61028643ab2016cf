"""The placement validator: every hard constraint, one satisfying and one violating case."""

from __future__ import annotations

from typing import Any

import pytest

from models.check import Rule, Violation, check
from models.io import scenario_from_data
from tests.models.builders import (
    job,
    placed,
    placement,
    pod_node,
    problem,
    scenario,
    unplaced,
)

TREES = {
    "default": {"level1": {"label": "rack"}, "level2": {"label": "sw"}},
    "small": {"level1": {"label": "rack"}},
}
CONFIG = {"super-pod-size": 16, "resource-level-config": TREES}


_n = pod_node


NODES = [
    _n("p0-r0-a", 0, 0, {"rack": "r0", "sw": "s0"}),
    _n("p0-r0-b", 0, 0, {"rack": "r0", "sw": "s0"}),
    _n("p0-r1-a", 0, 1, {"rack": "r1", "sw": "s0"}),
    _n("p0-r1-b", 0, 1, {"rack": "r1", "sw": "s0"}),
    _n("p1-r16-a", 1, 16, {"rack": "r16", "sw": "s1"}),
    _n("p1-r16-b", 1, 16, {"rack": "r16", "sw": "s1"}),
    _n("loose", None, None, {"rack": "r0", "sw": "s0"}),
    _n("no-rack", 0, None),
    _n("half", 0, 0, {"rack": "r0", "sw": "s0"}, free=4),
    _n("sick", 0, 0, {"rack": "r0", "sw": "s0"}, health="unhealthy"),
    _n("weak", 0, 0, {"rack": "r0", "sw": "s0"}, health="subhealthy"),
    _n("big", 0, 0, {"rack": "r0", "sw": "s0"}, npus=16),
    _n("other-tree", 0, 1, {"rack": "r1", "sw": "s0", "huawei.com/topotree": "other"}),
    _n("small-a", 1, 17, {"rack": "q0", "huawei.com/topotree": "small"}),
    _n("small-b", 1, 17, {"rack": "q0", "huawei.com/topotree": "small"}),
    _n("no-sw", 1, 17, {"rack": "r1"}),
]


def run(jobs: list[dict[str, Any]], *entries: dict[str, Any]) -> list[Violation]:
    """Check a placement of ``entries`` for a scenario of ``jobs`` on :data:`NODES`."""
    return check(problem(scenario(NODES, jobs, CONFIG)), placement(*entries))


def only(violations: list[Violation], rule: Rule, text: str) -> Violation:
    """The violations are all of ``rule`` and one of them contains ``text``."""
    assert violations, "expected a violation"
    assert {v.rule for v in violations} == {rule}, violations
    found = [v for v in violations if text in v.message]
    assert found, (text, [v.message for v in violations])
    return found[0]


# --------------------------------------------------------------------------- gang


def test_gang_satisfied() -> None:
    assert run([job("a", tasks=2, npu=2)], placed("a", ["p0-r0-a", "p0-r0-a"])) == []


def test_gang_missing_rank() -> None:
    v = only(run([job("a", tasks=3, npu=2)], placed("a", ["p0-r0-a", "p0-r0-b"])), Rule.GANG,
             "job 'a' must place every rank 0..2 exactly once (missing ['2'], unexpected [])")
    assert v.job == "a"


def test_gang_unexpected_rank() -> None:
    entry = placed("a", ["p0-r0-a", "p0-r0-b"])
    entry["ranks"]["07"] = "p0-r1-a"
    only(run([job("a", tasks=2, npu=2)], entry), Rule.GANG, "unexpected ['07']")


def test_gang_unplaced_job_lists_ranks() -> None:
    entry = {**unplaced("a"), "ranks": {"0": "p0-r0-a"}}
    only(run([job("a", tasks=2, npu=2)], entry), Rule.GANG,
         "job 'a' is not placed but lists ranks")


def test_gang_unplaced_job_is_fine() -> None:
    assert run([job("a", tasks=2, npu=2)], unplaced("a", "no room")) == []


# --------------------------------------------------------------------------- capacity


def test_capacity_shared_node_fits() -> None:
    jobs = [job("a", npu=4), job("b", npu=4)]
    assert run(jobs, placed("a", ["p0-r0-a"]), placed("b", ["p0-r0-a"])) == []


def test_capacity_across_jobs() -> None:
    jobs = [job("a", npu=4), job("b", npu=5)]
    v = only(run(jobs, placed("a", ["p0-r0-a"]), placed("b", ["p0-r0-a"])), Rule.CAPACITY,
             "node 'p0-r0-a' gets 9 NPUs but has only 8 free (jobs 'a', 'b')")
    assert v.node == "p0-r0-a" and v.job is None


def test_capacity_within_one_job() -> None:
    only(run([job("a", tasks=3, npu=3)], placed("a", ["p0-r0-a"] * 3)), Rule.CAPACITY,
         "node 'p0-r0-a' gets 9 NPUs but has only 8 free (jobs 'a')")


def test_capacity_of_a_partly_used_node() -> None:
    assert run([job("a", npu=4)], placed("a", ["half"])) == []
    only(run([job("a", npu=5)], placed("a", ["half"])), Rule.CAPACITY,
         "node 'half' gets 5 NPUs but has only 4 free")


# --------------------------------------------------------------------------- unhealthy


def test_unhealthy_node_takes_nothing() -> None:
    v = only(run([job("a", npu=1)], placed("a", ["sick"])), Rule.UNHEALTHY,
             "job 'a' rank 0 is on unhealthy node 'sick'")
    assert v.node == "sick"


def test_subhealthy_node_is_allowed() -> None:
    assert run([job("a", npu=1)], placed("a", ["weak"])) == []


# --------------------------------------------------------------------------- whole node

SP2: dict[str, Any] = {"policy": "chip8-node8-sp", "tasks": 2, "npu": 8, "sp_block": 16}


def test_whole_node_satisfied() -> None:
    assert run([job("a", **SP2)], placed("a", ["p0-r0-a", "p0-r0-b"])) == []


def test_whole_node_needs_a_completely_free_node() -> None:
    violations = run([job("a", **SP2)], placed("a", ["p0-r0-a", "half"]))
    assert {v.rule for v in violations} == {Rule.WHOLE_NODE, Rule.CAPACITY}
    v = only([v for v in violations if v.rule is Rule.WHOLE_NODE], Rule.WHOLE_NODE,
             "job 'a': rank 1 needs a completely free node but 'half' has only 4 of 8 NPUs free")
    assert v.node == "half" and v.job == "a"


def test_whole_node_needs_the_node_size() -> None:
    only(run([job("a", **SP2)], placed("a", ["p0-r0-a", "big"])), Rule.WHOLE_NODE,
         "job 'a': rank 1 needs a whole node of 8 NPUs but 'big' has 16")


def test_whole_node_ranks_do_not_share() -> None:
    violations = run([job("a", **SP2)], placed("a", ["big", "big"]))
    texts = [v.message for v in violations if v.rule is Rule.WHOLE_NODE]
    assert "job 'a': several ranks share whole nodes 'big'" in texts
    assert any("node 'big' hosts a whole-node task and other tasks too: 'a/0', 'a/1'" in t
               for t in texts)


def test_whole_node_is_not_shared_with_other_jobs() -> None:
    jobs = [job("a", **SP2), job("b", npu=1)]
    violations = run(jobs, placed("a", ["p0-r0-a", "p0-r0-b"]), placed("b", ["p0-r0-b"]))
    assert {v.rule for v in violations} == {Rule.WHOLE_NODE, Rule.CAPACITY}
    whole = [v for v in violations if v.rule is Rule.WHOLE_NODE]
    assert whole[0].message == ("node 'p0-r0-b' hosts a whole-node task and other tasks too: "
                                "'a/1' (jobs 'a', 'b')")


def test_single_task_super_pod_job_is_not_whole_node() -> None:
    assert run([job("a", policy="chip8-node8-sp", npu=4)], placed("a", ["half"])) == []


# --------------------------------------------------------------------------- super-pod blocks

SP4: dict[str, Any] = {"policy": "chip8-node8-sp", "tasks": 4, "npu": 8, "sp_block": 16}


def test_super_pod_blocks_satisfied() -> None:
    nodes = ["p0-r0-a", "p0-r1-b", "p1-r16-a", "p1-r16-b"]
    assert run([job("a", **SP4)], placed("a", nodes)) == []


def test_super_pod_block_spans_super_pods() -> None:
    nodes = ["p0-r0-a", "p1-r16-a", "p0-r1-b", "p1-r16-b"]
    violations = run([job("a", **SP4)], placed("a", nodes))
    only(violations, Rule.SUPER_POD, "job 'a': block 0 (ranks 0..1) spans super pods [0, 1]")
    assert len(violations) == 2  # block 1 too


def test_super_pod_node_in_no_super_pod() -> None:
    v = only(run([job("a", **SP2)], placed("a", ["loose", "p0-r0-a"])), Rule.SUPER_POD,
             "job 'a': rank 0 is on 'loose', which is in no super pod")
    assert v.node == "loose"


def test_single_task_super_pod_job_needs_a_super_pod() -> None:
    only(run([job("a", policy="chip8-node8-sp", npu=4)], placed("a", ["loose"])),
         Rule.SUPER_POD, "rank 0 is on 'loose', which is in no super pod")


def test_soft_super_pod_block_may_span() -> None:
    nodes = ["p0-r0-a", "p1-r16-a", "p0-r1-b", "p1-r16-b"]
    assert run([job("a", **SP4, super_pod_affinity="soft")], placed("a", nodes)) == []
    # ... but never onto a node in no super pod
    only(run([job("a", **SP2, super_pod_affinity="soft")], placed("a", ["loose", "p0-r0-a"])),
         Rule.SUPER_POD, "which is in no super pod")


# --------------------------------------------------------------------------- rack windows

RACK4: dict[str, Any] = {"policy": "chip8-node8-ra64-sp", "tasks": 4, "npu": 8, "sp_block": 32,
                         "ra_block": 16}


def test_rack_windows_satisfied() -> None:
    nodes = ["p0-r1-a", "p0-r1-b", "p0-r0-b", "p0-r0-a"]
    assert run([job("a", **RACK4)], placed("a", nodes)) == []


def test_rack_window_spans_racks() -> None:
    nodes = ["p0-r0-a", "p0-r1-a", "p0-r0-b", "p0-r1-b"]
    violations = run([job("a", **RACK4)], placed("a", nodes))
    only(violations, Rule.RACK_WINDOW, "job 'a': rack window 0 (ranks 0..1) spans racks [0, 1]")
    assert len(violations) == 2


def test_rack_node_in_no_rack() -> None:
    nodes = ["no-rack", "p0-r0-a", "p0-r1-a", "p0-r1-b"]
    violations = run([job("a", **RACK4)], placed("a", nodes))
    only(violations, Rule.RACK_WINDOW, "rank 0 is on 'no-rack', which is in no rack")


def test_rack_job_block_spans_super_pods() -> None:
    nodes = ["p0-r0-a", "p0-r0-b", "p1-r16-a", "p1-r16-b"]
    only(run([job("a", **RACK4)], placed("a", nodes)), Rule.SUPER_POD,
         "block 0 (ranks 0..3) spans super pods [0, 1]")


def test_soft_rack_window_may_span() -> None:
    nodes = ["p0-r0-a", "p0-r1-a", "p0-r0-b", "p1-r16-b"]
    assert run([job("a", **RACK4, super_pod_affinity="soft")], placed("a", nodes)) == []


# --------------------------------------------------------------------------- UB memory

UB: dict[str, Any] = {"policy": "chip8-node8-ra64-sp", "tasks": 2, "npu": 8, "sp_block": 8,
                      "ub_memory": True}


def test_ub_memory_one_domain() -> None:
    # two blocks of one node in different super pods, but racks 0 and 1: domain 0
    assert run([job("a", **UB)], placed("a", ["p0-r0-a", "p0-r1-a"])) == []


def test_ub_memory_two_domains() -> None:
    only(run([job("a", **UB)], placed("a", ["p0-r0-a", "p1-r16-a"])), Rule.UB_MEMORY,
         "job 'a': a UB-memory job must sit in one UB-memory domain (16 consecutive racks, "
         "rack-id // 16) but uses domains 0, 1")


def test_ub_memory_also_binds_soft_jobs() -> None:
    soft = run([job("a", **UB, super_pod_affinity="soft")], placed("a", ["p0-r0-a", "p1-r16-a"]))
    only(soft, Rule.UB_MEMORY, "uses domains 0, 1")


# --------------------------------------------------------------------------- multilevel

ML4: dict[str, Any] = {"policy": "multilevel", "tasks": 4, "npu": 8,
                       "affinity_config": "level1=2,level2=4"}


def test_multilevel_satisfied() -> None:
    nodes = ["p0-r1-a", "p0-r1-b", "p0-r0-b", "p0-r0-a"]
    assert run([job("a", **ML4)], placed("a", nodes)) == []


def test_multilevel_level1_group_spans_racks() -> None:
    nodes = ["p0-r0-a", "p0-r1-a", "p0-r0-b", "p0-r1-b"]
    violations = run([job("a", **ML4)], placed("a", nodes))
    only(violations, Rule.MULTILEVEL,
         "job 'a': level1 group 0 (ranks 0..1) spans rack values ['r0', 'r1']")
    assert len(violations) == 2


def test_multilevel_level2_group_spans_switches() -> None:
    nodes = ["p0-r0-a", "p0-r0-b", "p1-r16-a", "p1-r16-b"]
    only(run([job("a", **ML4)], placed("a", nodes)), Rule.MULTILEVEL,
         "job 'a': level2 group 0 (ranks 0..3) spans sw values ['s0', 's1']")


def test_multilevel_whole_node() -> None:
    nodes = ["p0-r0-a", "half", "p0-r1-a", "p0-r1-b"]
    violations = run([job("a", **ML4)], placed("a", nodes))
    assert Rule.WHOLE_NODE in {v.rule for v in violations}


# --------------------------------------------------------------------------- topotree


def test_topotree_several_trees() -> None:
    nodes = ["p0-r1-a", "other-tree", "p0-r0-a", "p0-r0-b"]
    only(run([job("a", **ML4)], placed("a", nodes)), Rule.TOPOTREE,
         "job 'a': nodes belong to several topotrees 'default', 'other'")


def test_topotree_not_configured() -> None:
    only(run([job("a", policy="multilevel", npu=8, affinity_config="level1=1")],
             placed("a", ["other-tree"])), Rule.TOPOTREE,
         "job 'a': topotree 'other' is not in resource-level-config")


def test_topotree_too_shallow() -> None:
    only(run([job("a", policy="multilevel", tasks=2, npu=8, affinity_config="level1=1,level2=2")],
             placed("a", ["small-a", "small-b"])), Rule.TOPOTREE,
         "job 'a': topotree 'small' has 1 levels but the affinity-config has 2")


def test_topotree_shallow_job_on_small_tree_is_fine() -> None:
    assert run([job("a", policy="multilevel", tasks=2, npu=8, affinity_config="level1=2")],
               placed("a", ["small-a", "small-b"])) == []


def test_topotree_missing_label() -> None:
    """A node lacking the label of a level the job uses (here level2 'sw')."""
    v = only(run([job("a", policy="multilevel", tasks=2, npu=8,
                      affinity_config="level1=1,level2=2")],
                 placed("a", ["p0-r1-a", "no-sw"])), Rule.TOPOTREE,
             "job 'a': rank 1 is on 'no-sw', which lacks label 'sw' of tree 'default'")
    assert v.node == "no-sw"


def test_topotree_label_beyond_the_job_levels_is_not_required() -> None:
    """Levels above the job's are trimmed before labels are read (removeRedundantLayers)."""
    assert run([job("a", policy="multilevel", tasks=2, npu=8, affinity_config="level1=1")],
               placed("a", ["p0-r1-a", "no-sw"])) == []


# --------------------------------------------------------------------------- blocks / format


def test_blocks_consistent_with_ranks() -> None:
    nodes = ["p0-r0-a", "p0-r0-b", "p1-r16-a", "p1-r16-b"]
    blocks = {"0": nodes[:2], "1": nodes[2:]}
    assert run([job("a", **SP4)], placed("a", nodes, blocks=blocks)) == []
    ml_blocks = {"0": ["p0-r1-a", "p0-r1-b"], "1": ["p0-r0-b", "p0-r0-a"]}
    assert run([job("a", **ML4)],
               placed("a", ["p0-r1-a", "p0-r1-b", "p0-r0-b", "p0-r0-a"], blocks=ml_blocks)) == []


def test_blocks_inconsistent_with_ranks() -> None:
    nodes = ["p0-r0-a", "p0-r0-b", "p1-r16-a", "p1-r16-b"]
    blocks = {"0": nodes[:2], "1": [nodes[3], nodes[2]]}
    only(run([job("a", **SP4)], placed("a", nodes, blocks=blocks)), Rule.FORMAT,
         "job 'a': 'blocks' does not match 'ranks' (block b must list the nodes of ranks "
         "b*2..b*2+1 in order); first differing blocks: ['1']")
    only(run([job("a", **SP4)], placed("a", nodes, blocks={"0": nodes[:2]})), Rule.FORMAT,
         "first differing blocks: ['1']")


def test_ordinary_job_has_no_blocks() -> None:
    only(run([job("a", npu=1)], placed("a", ["p0-r0-a"], blocks={"0": ["p0-r0-a"]})),
         Rule.FORMAT, "job 'a': an ordinary job has no blocks")


def test_missing_job() -> None:
    v = only(run([job("a"), job("b")], placed("a", ["p0-r0-a"])), Rule.FORMAT,
             "job 'b' is missing from the placement")
    assert v.job == "b"


def test_unknown_job() -> None:
    only(run([job("a")], placed("a", ["p0-r0-a"]), placed("zzz", ["p0-r0-b"])), Rule.FORMAT,
         "job 'zzz' is not in the scenario")


def test_job_listed_twice() -> None:
    violations = run([job("a", npu=1)], placed("a", ["p0-r0-a"]), placed("a", ["p0-r0-b"]))
    only(violations, Rule.FORMAT, "job 'a' appears twice")


def test_unplaced_job_without_reason() -> None:
    entry = {"name": "a", "placed": False, "reason": None, "ranks": {}}
    only(run([job("a")], entry), Rule.FORMAT, "job 'a' is not placed and gives no reason")


def test_unknown_node() -> None:
    v = only(run([job("a", tasks=2, npu=1)], placed("a", ["p0-r0-a", "ghost"])), Rule.FORMAT,
             "job 'a' rank 1: node 'ghost' does not exist")
    assert v.node == "ghost" and v.job == "a"


# --------------------------------------------------------------------------- general


def test_check_accepts_a_scenario_as_well() -> None:
    data = scenario(NODES, [job("a", npu=8)], CONFIG)
    violations = check(scenario_from_data(data, "<test>"), placement(placed("a", ["sick"])))
    assert [v.rule for v in violations] == [Rule.UNHEALTHY]
    assert str(violations[0]) == "[unhealthy] job 'a' rank 0 is on unhealthy node 'sick'"


def test_every_violation_of_a_bad_placement_is_reported() -> None:
    jobs = [job("a", **SP4), job("b", npu=8), job("c", **ML4)]
    violations = run(
        jobs,
        placed("a", ["p0-r0-a", "p1-r16-a", "loose", "p1-r16-b"]),
        placed("b", ["sick"]),
        placed("c", ["p0-r0-a", "p0-r1-a", "p0-r0-b", "p0-r1-b"]),
    )
    assert {v.rule for v in violations} >= {Rule.SUPER_POD, Rule.UNHEALTHY, Rule.MULTILEVEL,
                                            Rule.CAPACITY, Rule.WHOLE_NODE}


@pytest.mark.parametrize("rule", list(Rule))
def test_every_rule_has_a_test(rule: Rule) -> None:
    """Guard: a new rule must get a satisfying and a violating test in this module (the
    vNPU rules: in ``test_vnpu.py``)."""
    covered = {Rule.FORMAT, Rule.GANG, Rule.CAPACITY, Rule.UNHEALTHY, Rule.WHOLE_NODE,
               Rule.SUPER_POD, Rule.RACK_WINDOW, Rule.UB_MEMORY, Rule.MULTILEVEL, Rule.TOPOTREE,
               Rule.VNPU_CHIP, Rule.VNPU_TEMPLATE, Rule.VNPU_REQUEST, Rule.VNPU_DOWNGRADE,
               Rule.VNPU_FAMILY}
    assert rule in covered
