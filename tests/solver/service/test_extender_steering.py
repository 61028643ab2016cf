"""Which super-pod / 950 / multilevel jobs the extender steers with the job-level predicate:
the Ascend plugin's pins inside the planned set (:func:`plugin_pins`, following the
plugin's ``VerifyCachedSuperPods``) against the plan, and the decision made from them."""

from __future__ import annotations

from models.scenario import Family, Job
from solver.service.extender import ExtenderConfig, ExtenderCore, JobPlan
from solver.service.extender.steering import plugin_pins


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
