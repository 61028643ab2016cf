"""``simulate`` with pod-level rescheduling: a fault pod is deleted alone, the
job is repaired around its running pods, and a repair that cannot be placed escalates
across sessions (reference §4.4)."""

from __future__ import annotations

from typing import Any

import pytest

from models.compiled import compile_scenario
from models.scenario import Scenario
from solver.simulate import SimulationReport, simulate


def _sp_scenario(**flags: Any) -> Scenario:
    """850: super pod 0 = n0..n7, super pod 1 = n8..n15 (n12..n15 taken by others).
    ``t`` runs blocks 0 (n0..n3) and 1 (n8..n11)."""
    busy = {f"n{i}" for i in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15)}
    return Scenario.model_validate({
        "now": 1000,
        "config": {"super-pod-size": 16, "reserve-nodes": 0},
        "nodes": [{"name": f"n{i}", "npus": 8, "free": 0 if f"n{i}" in busy else 8,
                   "super-pod-id": i // 8} for i in range(16)],
        "running": [{"name": "t", "owner-uid": "u", "policy": "chip8-node8-sp",
                     "npu-per-task": 8, "sp-block": 32, "tasks": 8,
                     "ranks": {r: f"n{r if r < 4 else r + 4}" for r in range(8)}, **flags}],
    })


def _sessions(first: list[dict[str, Any]], quiet: int) -> list[dict[str, Any]]:
    return [{"name": "fault", "events": first}] + [
        {"name": f"wait {i}", "events": [{"advance": 60}]} for i in range(quiet)]


def _job_row(report: SimulationReport, index: int) -> Any:
    session = report.sessions[index - 1]
    return next(j for j in session.jobs if j.name == "t")


def test_850_fault_pod_is_deleted_alone_and_escalates_to_its_block_at_6() -> None:
    scenario = _sp_scenario(**{"pod-rescheduling": True})
    events = _sessions([{"node": "n9", "health": "unhealthy"}], quiet=6)
    report = simulate(scenario, events, engine="greedy")
    assert report.sessions[0].events[0].endswith("pod-level rescheduling of fault ranks 5")
    for k in range(1, 6):  # stage < 6: only rank 5 is pending; super pod 1 is full
        row = _job_row(report, k)
        assert not row.placed and row.ranks == [5]
        assert f"pending session {k} of the pod-level repair" in (row.reason or "")
    sixth = _job_row(report, 6)
    assert not sixth.placed and "now deletes ranks 4,6,7 too" in (sixth.reason or "")
    seventh = _job_row(report, 7)
    assert seventh.placed and seventh.ranks == [4, 5, 6, 7]
    assert seventh.nodes == ["n4", "n5", "n6", "n7"]  # the block moved to super pod 0
    final = report.final_state
    assert final is not None
    running = next(r for r in final.running if r.name == "t")
    assert {r: running.ranks[r] for r in range(4)} == {r: f"n{r}" for r in range(4)}


def test_process_recover_never_escalates() -> None:
    scenario = _sp_scenario(**{"process-recover": True})
    report = simulate(scenario, _sessions([{"node": "n9", "health": "unhealthy"}], quiet=6),
                      engine="greedy")
    for k in range(1, 8):
        row = _job_row(report, k)
        assert not row.placed and row.ranks == [5]
        assert "deletes" not in (row.reason or "")


def test_job_level_default_reschedules_the_whole_job() -> None:
    report = simulate(_sp_scenario(), _sessions([{"node": "n9", "health": "unhealthy"}], 0),
                      engine="greedy")
    row = _job_row(report, 1)
    assert row.ranks == list(range(8))


@pytest.mark.parametrize("engine", ["greedy", "cpsat"])
def test_950_window_escalates_at_3_and_moves_to_another_rack(engine: str) -> None:
    busy = {f"a{i}" for i in range(8)}
    scenario = Scenario.model_validate({
        "now": 1000,
        "config": {"super-pod-size": 64},
        "nodes": [{"name": f"{rack}{i}", "npus": 8, "free": 0 if f"{rack}{i}" in busy else 8,
                   "super-pod-id": 0, "rack-id": k}
                  for k, rack in enumerate("ab") for i in range(8)],
        "running": [{"name": "t", "owner-uid": "u", "policy": "chip8-node8-ra64-sp",
                     "npu-per-task": 8, "sp-block": 32, "ra-block": 16, "tasks": 4,
                     "pod-rescheduling": True, "ranks": {r: f"a{r}" for r in range(4)}}],
    })
    events = _sessions([{"node": "a3", "health": "unhealthy"}], quiet=3)
    report = simulate(scenario, events, engine=engine, time_limit=10)
    for k in (1, 2):  # same rack (stage < 3): rack a is full
        assert not _job_row(report, k).placed
    assert "now deletes ranks 2 too" in (_job_row(report, 3).reason or "")
    fourth = _job_row(report, 4)
    assert fourth.placed and fourth.ranks == [2, 3]
    assert all(n.startswith("b") for n in fourth.nodes)  # the window moved to rack b


def test_a_saved_partly_running_state_is_a_valid_scenario() -> None:
    scenario = _sp_scenario(**{"pod-rescheduling": True})
    report = simulate(scenario, _sessions([{"node": "n9", "health": "unhealthy"}], quiet=1),
                      engine="greedy")
    final = report.final_state
    assert final is not None
    job = next(j for j in final.jobs if j.name == "t")
    assert job.running_ranks and 5 not in job.running_ranks and job.pending_sessions == 2
    problem = compile_scenario(final)
    assert problem.jobs[0].partly_running
    # it continues as a scenario: a new simulate starts from it
    again = simulate(final, [{"name": "go", "events": [{"node": "n12", "free": 8}]}],
                     engine="greedy")
    row = _job_row(again, 1)
    assert row.placed and row.ranks == [5] and row.nodes == ["n12"]


def test_a_pod_level_fault_eviction_keeps_the_other_pods_running() -> None:
    scenario = _sp_scenario(**{"pod-rescheduling": True})
    events = [{"name": "fault", "events": [{"evict": "t", "ranks": [6], "fault": True}]}]
    report = simulate(scenario, events, engine="greedy")
    assert "only they are deleted, 7 pods keep running" in report.sessions[0].events[0]
    row = _job_row(report, 1)
    assert row.ranks == [6] and row.placed  # n10 is free again: rank 6 is repaired
