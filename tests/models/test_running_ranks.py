"""Partly running jobs (``running-ranks``): input rules, validator, objective.

Each input rule has a valid and an invalid case; each hard constraint a satisfying and a
violating placement with running ranks counting for the job's structure.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from models.check import Rule, check
from models.io import scenario_from_data
from models.objective import evaluate
from models.placement import Status
from models.plan import Plan, to_placement
from models.validation import InputError
from tests.models.builders import entry, job, placement, pod_node, problem, scenario

TREES = {"default": {"level1": {"label": "rack"}, "level2": {"label": "sw"}}}
CONFIG = {"super-pod-size": 16, "reserve-nodes": 0, "resource-level-config": TREES}


def _nodes() -> list[dict[str, Any]]:
    """Super pod 0: racks 0 and 1 (4 nodes each); super pod 1: rack 8 (4 nodes).

    ``p0-r0-0..2`` run ranks 0..2 of the 850/950 jobs below: no free chips.
    """
    out = []
    for pod, rack in ((0, 0), (0, 1), (1, 8)):
        for i in range(4):
            name = f"p{pod}-r{rack}-{i}"
            busy = pod == 0 and rack == 0 and i < 3
            out.append(pod_node(name, pod, rack, {"rack": f"r{rack}", "sw": f"s{pod}"},
                                free=0 if busy else 8))
    return out


RUNNING = {0: "p0-r0-0", 1: "p0-r0-1", 2: "p0-r0-2"}


def _sp_job(**extra: Any) -> dict[str, Any]:
    data = job("train", "chip8-node8-sp", tasks=4, sp_block=32, owner_uid="u1",
               running_ranks=dict(RUNNING))
    data.update({k.replace("_", "-"): v for k, v in extra.items()})
    return data


def _messages(data: dict[str, Any]) -> list[str]:
    with pytest.raises(InputError) as caught:
        problem(data)
    return caught.value.messages


# --------------------------------------------------------------------------- input rules


def test_partly_running_super_pod_job_is_valid() -> None:
    p = problem(scenario(_nodes(), [_sp_job()], CONFIG))
    view = p.jobs[0]
    assert view.partly_running
    assert view.running.tolist()[:3] == [p.node_index[n] for n in RUNNING.values()]
    assert view.to_place.tolist() == [False, False, False, True]


def test_running_rank_outside_the_job_is_refused() -> None:
    data = scenario(_nodes(), [_sp_job(running_ranks={**RUNNING, 7: "p0-r1-0"})], CONFIG)
    assert any("running ranks 7 do not exist" in m for m in _messages(data))


def test_running_rank_that_is_a_fault_rank_is_refused() -> None:
    data = scenario(_nodes(), [_sp_job(fault_ranks=[2])], CONFIG)
    assert any("both running and fault ranks" in m for m in _messages(data))


def test_a_job_with_every_rank_running_is_refused() -> None:
    nodes = _nodes()
    nodes[3]["free"] = 0
    data = scenario(nodes, [_sp_job(running_ranks={**RUNNING, 3: "p0-r0-3"})], CONFIG)
    assert any("all 4 ranks are running" in m for m in _messages(data))


def test_running_rank_on_an_unknown_node_is_refused() -> None:
    data = scenario(_nodes(), [_sp_job(running_ranks={0: "nowhere", 1: "p0-r0-1"})], CONFIG)
    assert any("field 'running-ranks.0': node 'nowhere' does not exist" in m
               for m in _messages(data))


def test_running_rank_chips_must_be_outside_free() -> None:
    nodes = _nodes()
    nodes[0]["free"] = 8  # the running rank's chips are counted as free too
    data = scenario(nodes, [_sp_job()], CONFIG)
    assert any("node 'p0-r0-0'" in m and "exceeds npus 8" in m for m in _messages(data))


def test_running_ranks_of_a_whole_node_job_do_not_share_a_node() -> None:
    data = scenario(_nodes(), [_sp_job(running_ranks={0: "p0-r0-0", 1: "p0-r0-0"})], CONFIG)
    assert any("several running ranks of a whole-node job share nodes" in m
               for m in _messages(data))


def test_ordinary_running_ranks_may_share_a_node() -> None:
    nodes = [pod_node("a", free=0), pod_node("b")]
    data = scenario(nodes, [job("o", "chip4-node8", tasks=3, npu=4,
                                running_ranks={0: "a", 1: "a"})])
    assert problem(data).jobs[0].partly_running


def test_inference_fields_belong_to_their_families() -> None:
    nodes = [pod_node("a")]
    bad = scenario(nodes, [job("o", inferserviceid="svc"), job("p", app="m", jobID="1")])
    messages = _messages(bad)
    assert any("inferserviceid is only used by super-pod" in m for m in messages)
    assert any("only used by A3 super-pod jobs" in m for m in messages)
    good = scenario(_nodes(), [job("s", "chip8-node8-sp", tasks=1, npu=8, inferserviceid="svc"),
                               job("m", "chip2-node8-sp", tasks=1, npu=8, app="mindie",
                                   jobID="j1", pod_affinity={"app": "mindie"})], CONFIG)
    views = problem(good).jobs
    assert views[0].inferserviceid == "svc"
    assert views[1].mindie and views[1].pod_affinity == (("app", "mindie"),)


def test_sp_fit_belongs_to_the_mindie_path_and_is_idlest_only() -> None:
    mindie = {"app": "mindie", "jobID": "j1"}
    bad = scenario(_nodes(), [job("o", sp_fit="idlest"),
                              job("a", "chip2-node8-sp", tasks=1, npu=8, sp_fit="idlest"),
                              job("v", "chip2-node8-sp", tasks=1, npu=8, sp_fit="busiest",
                                  **mindie)], CONFIG)
    messages = _messages(bad)
    assert sum("sp-fit is only read on the MindIE path" in m for m in messages) == 2
    assert any("'v'" in m and "sp-fit" in m and "idlest" in m for m in messages)
    good = scenario(_nodes(), [job("m", "chip2-node8-sp", tasks=1, npu=8, sp_fit="idlest",
                                   **mindie),
                               job("n", "chip2-node8-sp", tasks=1, npu=8, **mindie)], CONFIG)
    views = problem(good).jobs
    assert views[0].sp_fit_idlest and not views[1].sp_fit_idlest
    dumped = scenario_from_data(good, "<t>").to_dict()
    assert dumped["jobs"][0]["sp-fit"] == "idlest" and "sp-fit" not in dumped["jobs"][1]


def test_pod_level_fields_round_trip_and_are_left_out_at_default() -> None:
    data = scenario(_nodes(), [_sp_job(pod_rescheduling=True, pending_sessions=4)], CONFIG)
    loaded = scenario_from_data(data, "<t>")
    dumped = loaded.to_dict()
    assert dumped["jobs"][0]["running-ranks"] == {"0": "p0-r0-0", "1": "p0-r0-1",
                                                  "2": "p0-r0-2"}
    assert scenario_from_data(dumped, "<t>") == loaded
    assert dumped["jobs"][0]["pending-sessions"] == 4
    assert "process-recover" not in dumped["jobs"][0]
    plain = scenario_from_data(scenario(_nodes(), [job("x")]), "<t>").to_dict()
    assert "running-ranks" not in plain["jobs"][0]


# --------------------------------------------------------------------------- validator


def _check_sp(ranks: dict[str, str], blocks: dict[str, list[str]] | None = None) -> list[Any]:
    p = problem(scenario(_nodes(), [_sp_job()], CONFIG))
    item: dict[str, Any] = {"name": "train", "placed": True, "ranks": ranks}
    if blocks is not None:
        item["blocks"] = blocks
    return check(p, placement(item))


def test_placing_the_pending_rank_in_the_block_super_pod_is_valid() -> None:
    assert _check_sp({"3": "p0-r1-0"}) == []
    assert _check_sp({"3": "p0-r0-3"},
                     {"0": ["p0-r0-0", "p0-r0-1", "p0-r0-2", "p0-r0-3"]}) == []


def test_a_running_rank_is_not_listed() -> None:
    found = _check_sp({"0": "p0-r1-1", "3": "p0-r1-0"})
    assert [v.rule for v in found] == [Rule.GANG]
    assert "no running rank" in found[0].message


def test_the_pending_rank_must_be_listed() -> None:
    p = problem(scenario(_nodes(), [_sp_job()], CONFIG))
    found = check(p, placement({"name": "train", "placed": True, "ranks": {}}))
    assert [v.rule for v in found] == [Rule.GANG]
    assert "missing ['3']" in found[0].message


def test_running_ranks_count_for_the_block() -> None:
    found = _check_sp({"3": "p1-r8-0"})
    assert [v.rule for v in found] == [Rule.SUPER_POD]
    assert "spans super pods [0, 1]" in found[0].message


def test_the_pending_rank_cannot_take_a_running_rank_node() -> None:
    rules = {v.rule for v in _check_sp({"3": "p0-r0-1"})}
    assert Rule.WHOLE_NODE in rules


def test_running_ranks_count_for_rack_windows() -> None:
    data = scenario(_nodes(), [job("r", "chip8-node8-ra64-sp", tasks=4, sp_block=32,
                                   ra_block=32, running_ranks=dict(RUNNING))], CONFIG)
    p = problem(data)
    ok = check(p, placement({"name": "r", "placed": True, "ranks": {"3": "p0-r0-3"}}))
    assert ok == []
    bad = check(p, placement({"name": "r", "placed": True, "ranks": {"3": "p0-r1-0"}}))
    assert [v.rule for v in bad] == [Rule.RACK_WINDOW]


def test_running_ranks_count_for_multilevel_groups() -> None:
    data = scenario(_nodes(), [job("m", "multilevel", tasks=4, npu=8,
                                   affinity_config="level1=4,level2=4",
                                   running_ranks=dict(RUNNING))], CONFIG)
    p = problem(data)
    ok = check(p, placement({"name": "m", "placed": True, "ranks": {"3": "p0-r0-3"}}))
    assert ok == []
    bad = check(p, placement({"name": "m", "placed": True, "ranks": {"3": "p0-r1-0"}}))
    assert {v.rule for v in bad} == {Rule.MULTILEVEL}


def test_ordinary_placed_rank_capacity_excludes_running_chips() -> None:
    nodes = [pod_node("a", free=4), pod_node("b")]
    p = problem(scenario(nodes, [job("o", "chip4-node8", tasks=3, npu=4,
                                     running_ranks={0: "a"})]))
    assert check(p, placement({"name": "o", "placed": True,
                               "ranks": {"1": "a", "2": "b"}})) == []
    bad = check(p, placement({"name": "o", "placed": True, "ranks": {"1": "a", "2": "a"}}))
    assert [v.rule for v in bad] == [Rule.CAPACITY]


def test_an_unhealthy_node_of_a_running_rank_is_not_a_violation() -> None:
    nodes = _nodes()
    nodes[0]["health"] = "unhealthy"
    p = problem(scenario(nodes, [_sp_job()], CONFIG))
    assert check(p, placement({"name": "train", "placed": True,
                               "ranks": {"3": "p0-r0-3"}})) == []


# --------------------------------------------------------------------------- objective


def test_origin_hits_count_placed_ranks_only() -> None:
    cache = [entry("u1", r, n) for r, n in RUNNING.items()] + [entry("u1", 3, "p0-r0-3")]
    p = problem(scenario(_nodes(), [_sp_job()], CONFIG, cache=cache))
    assert p.jobs[0].origin.tolist() == [-1, -1, -1, p.node_index["p0-r0-3"]]
    home = evaluate(p, placement({"name": "train", "placed": True, "ranks": {"3": "p0-r0-3"}}))
    away = evaluate(p, placement({"name": "train", "placed": True, "ranks": {"3": "p0-r1-0"}}))
    assert (home.origin_hits, home.origin_candidates) == (1, 1)
    assert (away.origin_hits, away.origin_candidates) == (0, 1)
    assert home.objective > away.objective


def test_running_chips_are_not_used_twice() -> None:
    nodes = [pod_node("a", free=4), pod_node("b"), pod_node("c", health="subhealthy", free=4)]
    p = problem(scenario(nodes, [job("o", "chip4-node8", tasks=3, npu=4,
                                     running_ranks={0: "c"})]))
    metrics = evaluate(p, placement({"name": "o", "placed": True,
                                     "ranks": {"1": "a", "2": "b"}}))
    # b is left half used (a fragment); a is full; c hosts a running rank only
    assert metrics.fragment_score == 1
    assert metrics.subhealthy_nodes == 0


def test_to_placement_lists_placed_ranks_and_full_blocks() -> None:
    p = problem(scenario(_nodes(), [_sp_job()], CONFIG))
    full = [p.node_index[n] for n in ("p0-r0-0", "p0-r0-1", "p0-r0-2", "p0-r0-3")]
    plan = Plan.empty(p)
    plan.nodes[0] = np.asarray(full, dtype=np.int32)
    out = to_placement(p, plan, engine="t", status=Status.GREEDY)
    assert out.jobs[0].ranks == {"3": "p0-r0-3"}
    assert out.jobs[0].blocks == {"0": ["p0-r0-0", "p0-r0-1", "p0-r0-2", "p0-r0-3"]}
    assert check(p, out) == []
    assert evaluate(p, out).objective == evaluate(p, plan.as_mapping()).objective
