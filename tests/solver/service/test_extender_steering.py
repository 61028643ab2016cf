"""Which super-pod / 950 / multilevel jobs the extender steers with the job-level predicate:
the Ascend plugin's pins inside the planned set (:func:`plugin_pins`, following the
plugin's ``VerifyCachedSuperPods``) against the plan, and the decision made from them."""

from __future__ import annotations

from models.scenario import Family, Job, LevelConfig
from solver.service.extender import ExtenderConfig, ExtenderCore, JobPlan
from solver.service.extender.steering import (
    PluginChoice,
    fault_nodes,
    multilevel_regroup,
    plugin_pins,
    sort_by_cached_rank,
    superpod_fault_choice,
)


def _job(policy: str = "chip8-node8-sp", tasks: int = 4,
         running: dict[int, str] | None = None) -> Job:
    return Job.model_validate({"name": "train/a", "owner-uid": "own-a", "policy": policy,
                               "tasks": tasks, "npu-per-task": 8, "sp-block": 16,
                               "running-ranks": running or {}})


PLAN = {0: "n1", 1: "n2", 2: "n3", 3: "n4"}


def test_the_plugin_keeps_its_cached_selection_only_inside_the_candidates() -> None:
    job = _job()
    assert plugin_pins(job, PLAN, dict(PLAN), True) == (PLAN, "")
    swapped = {0: "n2", 1: "n1", 2: "n3", 3: "n4"}
    assert plugin_pins(job, PLAN, swapped, True) == (swapped, "")
    pins, why = plugin_pins(job, PLAN, {0: "n1", 1: "n2", 2: "n3", 3: "n9"}, True)
    assert pins is None and "n9" in why
    assert plugin_pins(job, PLAN, None, True) == (None, "it has no cached selection of the job")
    assert plugin_pins(job, PLAN, dict(PLAN), False) == (None, "prefer-previous-node is off")
    # multilevel's tryUseCachedSuperPods is not gated by prefer-previous-node
    assert plugin_pins(_job("multilevel"), PLAN, dict(PLAN), False) == (PLAN, "")
    # a cached node still running a task of the job counts as available
    partly = _job(running={0: "n0"})
    pending = {1: "n2", 2: "n3", 3: "n4"}
    assert plugin_pins(partly, pending, {0: "n0", **pending}, True) == (pending, "")


def _decide(cached: dict[int, str] | None, origins: dict[int, str],
            job: Job | None = None, plan: dict[int, str] | None = None) -> JobPlan:
    core = ExtenderCore(ExtenderConfig(predicate_verb=True))
    job = job or _job()
    ranks = dict(plan or PLAN)
    if cached is not None:
        core.selections["own-a"] = cached
    decided = JobPlan(Family.SUPERPOD, "own-a", ranks, frozenset(ranks.values()), True)
    core._confine(decided, job, {("own-a", r): n for r, n in origins.items()}, True)
    return decided


def test_a_cached_selection_equal_to_the_plan_is_pinned() -> None:
    plan = _decide(dict(PLAN), dict(PLAN))
    assert plan.steer and plan.mode == "pin" and not plan.adopted and plan.ranks == PLAN


def test_the_plugins_mapping_is_adopted_when_it_keeps_every_origin_hit() -> None:
    swapped = {0: "n2", 1: "n1", 2: "n3", 3: "n4"}  # ranks 0 and 1 exchanged
    plan = _decide(swapped, {2: "n3", 3: "n4"})
    assert plan.steer and plan.adopted and plan.ranks == swapped and plan.mode == "pin"
    # rank 0's origin is n1: the plugin's mapping would lose it -> left with the reason
    plan = _decide(swapped, {0: "n1", 2: "n3"})
    assert not plan.steer and "keeps 1 of the plan's 2 origin hit(s)" in plan.reason


def test_a_fresh_selection_is_confined_only_without_origin_hits() -> None:
    plan = _decide(None, {})
    assert plan.steer and plan.mode == "confine"
    plan = _decide({0: "n1", 1: "n2", 2: "n3", 3: "gone"}, {0: "n1"})
    assert not plan.steer and "afresh" in plan.reason and "gone" in plan.reason
    assert "1 origin hit(s) would not be kept" in plan.reason
    # a partly running job cannot be selected afresh from its pending ranks' nodes
    partly = _job(running={0: "n0"})
    plan = _decide({0: "n0", 1: "n2", 2: "n3", 3: "gone"}, {}, partly,
                   {1: "n2", 2: "n3", 3: "n4"})
    assert not plan.steer and "partly running" in plan.reason


def _sp_job(tasks: int = 4) -> Job:
    # two nodes per logical super pod (sp-block 16 NPUs of 8-NPU tasks)
    return Job.model_validate({"name": "train/f", "owner-uid": "own-f", "policy": "chip8-node8-sp",
                               "tasks": tasks, "npu-per-task": 8, "sp-block": 16})


SP = {"a1": 0, "a2": 0, "a3": 0, "b1": 1, "b2": 1, "b3": 1}
ORIGINAL = {0: "a1", 1: "a2", 2: "b1", 3: "b2"}


def test_the_superpod_fault_path_keeps_healthy_ranks_and_takes_the_one_node_left() -> None:
    # b2 failed: logical super pod 0 is kept whole, 1 keeps b1 at rank 2 and takes b3
    choice = superpod_fault_choice(_sp_job(), {0: "a1", 1: "a2", 2: "b1", 3: "b3"},
                                   ORIGINAL, {"b2"}, SP)
    assert choice == PluginChoice(pins={0: "a1", 1: "a2", 2: "b1", 3: "b3"})
    # the plan swaps ranks 2 and 3: the plugin keeps b1 at rank 2 (the plan's mapping differs)
    choice = superpod_fault_choice(_sp_job(), {0: "a1", 1: "a2", 2: "b3", 3: "b1"},
                                   ORIGINAL, {"b2"}, SP)
    assert choice.pins == {0: "a1", 1: "a2", 2: "b1", 3: "b3"}


def test_the_superpod_fault_path_names_what_go_map_order_decides() -> None:
    # both nodes of logical super pod 1 failed: the two replacements in map order
    choice = superpod_fault_choice(_sp_job(), {0: "a1", 1: "a2", 2: "b3", 3: "a3"},
                                   ORIGINAL, {"b1", "b2"}, {**SP, "a3": 1})
    assert choice.pins == {0: "a1", 1: "a2"} and choice.loose == {2, 3} and not choice.why
    # the plan moves logical super pod 1 to physical super pod 0: a fresh selection
    choice = superpod_fault_choice(_sp_job(), {0: "a1", 1: "a2", 2: "a3", 3: "c1"},
                                   ORIGINAL, {"b1", "b2"}, {**SP, "c1": 0})
    assert "leaves its physical super pod 1" in choice.why and not choice.pins
    # a healthy node of the job left out of the plan: the plugin waits (isDelayingJob)
    choice = superpod_fault_choice(_sp_job(), {0: "a3", 1: "a2", 2: "b1", 3: "b3"},
                                   ORIGINAL, {"b2"}, SP)
    assert "isDelayingJob" in choice.why and "a1" in choice.why


def test_a_fault_job_needs_the_fault_scheduling_label() -> None:
    cached = {0: "a1", 1: "b2"}
    assert fault_nodes(cached, {"b2"}, "grace") == {"b2"}
    assert fault_nodes(cached, {"b2"}, "force") == {"b2"}
    assert fault_nodes(cached, {"b2"}, "off") == set()
    assert fault_nodes(cached, {"b2"}, None) == set()
    assert fault_nodes(None, {"b2"}, "grace") == set()


def test_the_multilevel_history_order_sorts_by_bytes_and_keeps_cached_ranks() -> None:
    cached = {0: "n1", 1: "n2", 2: "n3", 3: "n4"}
    # n2 failed: n1 keeps rank 0, the new node takes rank 1; group 2-3 kept
    assert sort_by_cached_rank({0: "n1", 1: "n7", 2: "n3", 3: "n4"}, cached, 2) == \
        {0: "n1", 1: "n7", 2: "n3", 3: "n4"}
    # both of group 0 new: name order in bytes, n10 before n9
    assert sort_by_cached_rank({0: "n9", 1: "n10", 2: "n4", 3: "n3"}, cached, 2) == \
        {0: "n10", 1: "n9", 2: "n3", 3: "n4"}


def test_the_multilevel_history_keeps_groups_only_inside_their_units() -> None:
    levels = {"default": {"level1": LevelConfig(label="rack"),
                          "level2": LevelConfig(label="switch")}}
    labels = {"a1": {"rack": "A", "switch": "S"}, "a2": {"rack": "A", "switch": "S"},
              "a3": {"rack": "A", "switch": "S"}, "b1": {"rack": "B", "switch": "S"},
              "b2": {"rack": "B", "switch": "S"}, "c1": {"rack": "C", "switch": "T"},
              "c2": {"rack": "C", "switch": "T"}}
    cached = {0: "a1", 1: "a2"}
    # a2 failed: its replacement inside rack A keeps the group; one in rack B does not
    assert multilevel_regroup({0: "a1", 1: "a3"}, cached, 2, labels, levels) == ""
    why = multilevel_regroup({0: "a1", 1: "b1"}, cached, 2, labels, levels)
    assert "b1" in why and "level-1 unit (rack)" in why
    # both failed: the group moves inside its switch, not to another one
    assert multilevel_regroup({0: "b1", 1: "b2"}, cached, 2, labels, levels) == ""
    assert "level-2 unit (switch)" in multilevel_regroup({0: "c1", 1: "c2"}, cached, 2,
                                                          labels, levels)
