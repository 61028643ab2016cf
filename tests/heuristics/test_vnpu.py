"""Greedy vNPU placement: upstream's score and chip choice, the downgrade, the one-template
rule and the RFC bonus; every answer passes the validator."""

from __future__ import annotations

from typing import Any

from heuristics.vnpu import greedy_vnpu
from models.check import check
from models.compiled import Problem
from models.objective import evaluate
from models.placement import PlacementFile
from models.vnpu import VnpuPlan, vnpu_job_placements
from tests.models.builders import entry, problem
from tests.models.test_vnpu import doc, vjob, vnode_row


def answer(prob: Problem) -> tuple[VnpuPlan, PlacementFile]:
    plan = greedy_vnpu(prob)
    placement = PlacementFile.model_construct(engine="greedy", jobs=vnpu_job_placements(
        prob, plan))
    assert check(prob, placement) == []
    return plan, placement


def where(prob: Problem, plan: VnpuPlan, j: int = 0) -> list[str]:
    nodes = plan.nodes[j]
    assert nodes is not None, plan.reasons[j]
    return [prob.node_names[n] for n in nodes]


def chip_rows(*free: tuple[int, int]) -> list[dict[str, Any]]:
    return [{"id": i, "free-cores": c, "free-cpus": p, "segmented": (c, p) != (8, 7)}
            for i, (c, p) in enumerate(free)]


def test_least_free_node_first() -> None:
    """``orderVNodesByFreeResource``: the node with the fewest idle AI cores gets the score."""
    busy = vnode_row("v1", npus=2, chips=chip_rows((8, 7), (3, 3)))
    idle = vnode_row("v2", npus=2)
    prob = problem(doc([idle, busy], [vjob("a", cores=1)]))
    plan, _ = answer(prob)
    assert where(prob, plan) == ["v1"]
    assert plan.chips[0] == [(1,)]  # the chip with less free resource
    assert plan.downgraded[0] == []


def test_ties_in_natural_order() -> None:
    prob = problem(doc([vnode_row("v10"), vnode_row("v9")], [vjob("a", cores=1)]))
    plan, _ = answer(prob)
    assert where(prob, plan) == ["v9"]


def test_downgrade_loses_to_a_node_where_the_full_slice_fits() -> None:
    """``ScoreBestNPUNodes`` with a downgrade remembered: the first non-downgraded node in
    the sorted order gets 16, the downgraded nodes before it 8."""
    tight = vnode_row("v1", npus=1, chips=chip_rows((2, 1)))  # (2,2) only downgraded
    roomy = vnode_row("v2", npus=1)
    prob = problem(doc([tight, roomy], [vjob("a", cores=2, vnpu_level="high")]))
    plan, _ = answer(prob)
    assert where(prob, plan) == ["v2"] and plan.downgraded[0] == []
    alone = problem(doc([vnode_row("v1", npus=1, chips=chip_rows((2, 1)))],
                        [vjob("a", cores=2, vnpu_level="high")]))
    plan, placement = answer(alone)
    assert where(alone, plan) == ["v1"] and plan.downgraded[0] == [0]
    assert placement.jobs[0].downgraded == ["0"]


def test_no_downgrade_off_310p() -> None:
    prob = problem(doc([vnode_row("v1", kind="910B3", npus=1,
                                  chips=[{"id": 0, "free-cores": 5, "free-cpus": 0,
                                          "segmented": True}])], [vjob("a", cores=5)]))
    plan = greedy_vnpu(prob)
    assert plan.nodes[0] is None
    assert "resource not enough" in (plan.reasons[0] or "")


def test_one_template_rule_sends_the_rank_elsewhere() -> None:
    held = vnode_row("v1", npus=2, chips=chip_rows((8, 7), (7, 6)),
                     unfinished_templates=["vir01"])
    other = vnode_row("v2", npus=2)
    prob = problem(doc([held, other], [vjob("a", cores=2), vjob("b", cores=1)]))
    plan, _ = answer(prob)
    assert where(prob, plan, 0) == ["v2"]  # vir02_1c may not join vir01 on v1
    assert where(prob, plan, 1) == ["v1"]  # vir01 may (and v1 has less free)
    only = problem(doc([vnode_row("v1", npus=2, unfinished_templates=["vir01"])],
                       [vjob("a", cores=2)]))
    refused = greedy_vnpu(only)
    assert refused.nodes[0] is None and "not rewrite" in (refused.reasons[0] or "")


def test_whole_card_takes_untouched_chips() -> None:
    row = vnode_row("v1", npus=3, chips=chip_rows((8, 7), (4, 4), (8, 7)))
    prob = problem(doc([row], [vjob("a", cores=16)]))
    plan, _ = answer(prob)
    assert plan.chips[0] == [(0, 2)]
    full = problem(doc([row], [vjob("a", cores=24)]))
    assert greedy_vnpu(full).nodes[0] is None


def test_rfc_bonus_returns_ranks_home() -> None:
    nodes = [vnode_row(f"v{i}", npus=1) for i in range(1, 4)]
    data = doc(nodes, [vjob("a", tasks=2, cores=4, owner_uid="u")],
               cache=[entry("u", 0, "v3"), entry("u", 1, "v2")])
    prob = problem(data)
    plan, placement = answer(prob)
    assert where(prob, plan) == ["v3", "v2"]
    assert evaluate(prob, placement).origin_hits == 2
    data["config"] = {"prefer-previous-node": False}
    off = problem(data)
    plan, _ = answer(off)
    assert where(off, plan) == ["v1", "v1"]  # upstream's own score: least free node


def test_gang_all_or_nothing_and_queue_order() -> None:
    prob = problem(doc([vnode_row("v1", npus=1)],
                       [vjob("small", tasks=1, cores=4), vjob("big", tasks=3, cores=4,
                                                               priority=5)]))
    plan, _ = answer(prob)
    assert plan.nodes[1] is None and "task 2 of job 'big'" in (plan.reasons[1] or "")
    assert where(prob, plan, 0) == ["v1"]  # the failed gang took nothing


def test_dvpp_slices_spread() -> None:
    prob = problem(doc([vnode_row("v1", npus=2)],
                       [vjob("a", tasks=2, cores=4, vnpu_dvpp="yes")]))
    plan, _ = answer(prob)
    assert sorted(plan.chips[0]) == [(0,), (1,)]


def test_no_downgrade_next_to_the_same_jobs_full_slices() -> None:
    """Three vir02 slices leave the tighter node's chip 2 cores and 1 AI CPU: the fourth's
    full slice does not fit there and its downgrade (vir02_1c) would be a second
    unfinished template, so that node refuses it and the roomier one takes it in full."""
    prob = problem(doc([vnode_row("a", npus=1), vnode_row("b", npus=2)],
                       [vjob("j", tasks=4, cores=2, vnpu_level="high")]))
    plan, _ = answer(prob)
    assert where(prob, plan) == ["a", "a", "a", "b"] and plan.downgraded[0] == []


def test_a_gang_larger_than_the_room_is_refused_at_once() -> None:
    """Eight vir01 tasks on one 310P chip of 7 AI CPUs: at most 7 fit, so the job is
    refused without trying its ranks; eight fit on two chips."""
    prob = problem(doc([vnode_row("v1", npus=1)], [vjob("a", tasks=8, cores=1)]))
    plan = greedy_vnpu(prob)
    assert plan.nodes[0] is None
    assert "hold at most 7 of its 8 tasks" in (plan.reasons[0] or "")
    roomy = problem(doc([vnode_row("v1", npus=2)], [vjob("a", tasks=8, cores=1)]))
    assert where(roomy, answer(roomy)[0]) == ["v1"] * 8
