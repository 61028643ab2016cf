"""``simulate`` with vNPU jobs: the bundled example's sessions, chips released and taken
again, cache hits of returning replicas, and the saved state."""

from __future__ import annotations

from pathlib import Path

import yaml

from models.check import check
from models.compiled import compile_scenario
from models.scenario import Scenario
from solver.facade import solve
from solver.simulate import SimulationReport, simulate

EXAMPLES = Path(__file__).resolve().parents[3] / "models" / "examples"
SCENARIO = EXAMPLES / "vnpu-inference.yaml"
EVENTS = EXAMPLES / "vnpu-inference.events.yaml"


def report(engine: str = "greedy") -> SimulationReport:
    scenario = Scenario.model_validate(yaml.safe_load(SCENARIO.read_text()))
    return simulate(scenario, yaml.safe_load(EVENTS.read_text()), engine=engine,
                    time_limit=5.0)


def test_example_sessions_greedy() -> None:
    result = report()
    rows = [(len(s.placed), len(s.pending), s.hits, s.placed_candidates, s.moved)
            for s in result.sessions]
    assert rows == [
        (3, 2, 5, 5, 0),  # chat and embed return to 5 of their 6 cached ranks; OCR waits
        (2, 0, 1, 1, 0),  # the scale-down frees slices: OCR and the re-ranker start
        (2, 0, 5, 5, 0),  # every returning replica goes back to its node
        (1, 1, 1, 4, 3),  # vnpu-310p-1 fails: chat moves (3 ranks), re-ranker waits
        (2, 0, 2, 2, 0),  # repaired: the OCR replica and the re-ranker return
    ]
    night = result.sessions[1]
    assert [r.name for r in night.placed] == ["infer-ocr", "infer-rerank"]


def test_saved_state_holds_the_running_slices() -> None:
    state = report().final_state
    problem = compile_scenario(state)
    assert problem.scenario.vnpu_jobs == []  # every vNPU job runs at the end
    chips = {n.name: n.vnpu.chips for n in state.nodes if n.vnpu is not None}
    # the running slices are folded into the chips: less free than at the start
    free = {name: sum(c.free_cores or 0 for c in found or []) for name, found in chips.items()}
    assert free["vnpu-310p-1"] < 32 and free["vnpu-310p-3"] < 32
    assert all(n.vnpu is None or not n.vnpu.unfinished_templates for n in state.nodes)


def test_example_with_cpsat() -> None:
    result = report("auto")
    # CP-SAT places the OCR service in the first session too (it trades a chat hit)
    assert len(result.sessions[0].placed) == 4 and result.sessions[0].status == "optimal"
    scenario = Scenario.model_validate(yaml.safe_load(SCENARIO.read_text()))
    problem = compile_scenario(scenario)
    answer = solve(problem, engine="auto", time_limit=5.0, seed=0)
    assert check(problem, answer.placement) == []
    assert answer.metrics.placed_jobs == 4


def test_submit_vnpu_adds_a_vnpu_job_and_bad_ones_are_refused() -> None:
    import pytest

    from models.errors import InputError

    scenario = Scenario.model_validate(yaml.safe_load(SCENARIO.read_text()))
    events = [{"name": "a new speech service", "events": [
        {"submit-vnpu": {"name": "infer-asr", "owner-uid": "rs-asr", "tasks": 2,
                         "ai-cores": 1, "priority": 200, "image-size-gb": 8}}]},
        {"name": "the speech service scales down",
         "events": [{"advance": 600}, {"scale": "infer-asr", "tasks": 1}]}]
    result = simulate(scenario, events, engine="greedy", time_limit=5.0)
    first, second = result.sessions
    assert any("submit-vnpu infer-asr (2 x 1 AI cores)" in e for e in first.events)
    assert "infer-asr" in [r.name for r in first.placed]  # first in the queue
    assert any("scale infer-asr 2 -> 1: 1 pods released" in e for e in second.events)
    problem = compile_scenario(result.final_state)
    assert problem.scenario.vnpu_jobs == [] or all(
        j.name != "infer-asr" for j in problem.scenario.vnpu_jobs)
    for bad, words in (({"name": "x", "tasks": 1, "ai-cores": 3}, "submit-vnpu.ai-cores"),
                       ({"name": "infer-chat", "tasks": 1, "ai-cores": 1},
                        "submit-vnpu.name"),
                       ({"name": "y", "tasks": 0, "ai-cores": 1}, "submit-vnpu.tasks")):
        with pytest.raises(InputError) as info:
            simulate(scenario, [[{"submit-vnpu": bad}]], engine="greedy", time_limit=5.0)
        assert words in " ".join(info.value.messages), info.value.messages


def test_a_scaled_job_keeps_the_family_of_its_running_ranks() -> None:
    """A 10-core job without ``ring-controller`` runs its first rank on a whole 310P-10
    chip; scaled up, its new rank may not take the 910B3 slice that is free (one family
    per job): it waits."""
    data = {"now": 1764400000, "nodes": [
        {"name": "p", "npus": 1, "free": 1, "vnpu": {"chip-kind": "Ascend310P", "ai-cores": 10}},
        {"name": "b3", "npus": 1, "free": 1, "vnpu": {"chip-kind": "910B3"}}],
        "vnpu-jobs": [{"name": "a", "owner-uid": "u-a", "tasks": 1, "ai-cores": 10}]}
    events = [{"name": "start", "events": []},
              {"name": "scale", "events": [{"advance": "1h"}, {"scale": "a", "tasks": 2}]}]
    result = simulate(Scenario.model_validate(data), events, engine="greedy", time_limit=5.0)
    first, second = result.sessions
    assert [(r.name, r.nodes) for r in first.placed] == [("a", ["p"])]
    assert second.placed == [] and [r.name for r in second.pending] == ["a"]
    assert "ring-controller.atlas=ascend-310P" in (second.pending[0].reason or "")
