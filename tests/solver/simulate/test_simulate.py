"""``npu-place simulate``: multi-session runs, their numbers, and bad event files."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from models.io import load_scenario
from models.scenario import Scenario
from models.validation import InputError
from solver.cli import main
from solver.simulate import SimulationReport, simulate

EXAMPLES = Path(__file__).resolve().parents[3] / "models" / "examples"
RFC = EXAMPLES / "rfc-inference-training.yaml"
RFC_EVENTS = EXAMPLES / "rfc-inference-training.events.yaml"


def rfc_report() -> SimulationReport:
    scenario = Scenario.model_validate(yaml.safe_load(RFC.read_text()))
    events = yaml.safe_load(RFC_EVENTS.read_text())
    return simulate(scenario, events, engine="greedy")


def small(jobs: list[dict[str, Any]], running: list[dict[str, Any]] | None = None,
          nodes: int = 4, free: dict[str, int] | None = None) -> Scenario:
    free = free or {}
    return Scenario.model_validate({
        "now": 1000,
        "config": {"prefer-previous-node": True},
        "nodes": [{"name": f"n{i}", "npus": 8, "free": free.get(f"n{i}", 8)}
                  for i in range(1, nodes + 1)],
        "jobs": [{"policy": "chip8-node8", **j} for j in jobs],
        "running": running or [],
    })


def row(report: SimulationReport, index: int) -> tuple[int, int, int, int, int, int, int]:
    s = report.sessions[index - 1]
    return (len(s.placed), len(s.pending), s.hits, s.placed_candidates, s.achievable,
            s.candidates, s.moved)


# --------------------------------------------------------------------------- the RFC example


def test_rfc_example_per_session_numbers() -> None:
    report = rfc_report()
    # (placed, pending, hits, placed-candidates, achievable, candidates, moved)
    expected = {
        1: (3, 0, 0, 0, 0, 0, 0),  # cold start: 14 new ranks
        2: (1, 1, 0, 0, 6, 6, 0),  # chat +2 (new); training preempted, cannot fit
        3: (1, 0, 6, 6, 6, 6, 0),  # chat -2; training returns to all 6 nodes
        4: (0, 0, 0, 0, 0, 0, 0),  # embed scales down: nothing to place
        5: (2, 1, 4, 4, 9, 10, 0),  # embed +2 and chat +2 return; training preempted
        6: (1, 0, 5, 6, 5, 6, 1),  # training returns; node-9 is partly taken: 1 moved
        7: (1, 0, 5, 5, 5, 5, 1),  # node-7 fails: 5 back, fault rank 2 moves
        8: (1, 0, 5, 5, 5, 5, 1),  # rank 0 fails on node-5: 5 back, rank 0 moves
    }
    assert {i: row(report, i) for i in expected} == expected
    assert report.sessions[0].new == 14 and report.sessions[0].cache_start == "cold"
    assert all(s.cache_start == "warm" for s in report.sessions[1:])
    assert report.hits == 25 and report.placed_candidates == 26
    assert report.hit_rate is not None and report.hit_rate >= 0.8  # the RFC's target
    assert report.sessions[2].pulls_avoided_gb == 6 * 35
    assert report.sessions[4].pulls_avoided_gb == 2 * 20 + 2 * 15
    assert sum(s.fault_returns for s in report.sessions) == 0
    pending = report.sessions[1].pending[0]
    assert pending.name == "train-llm" and pending.reason is not None
    assert "NPUResourceShortage" in pending.reason


def test_rfc_example_placements() -> None:
    report = rfc_report()
    train = {s.index: j for s in report.sessions for j in s.placed if j.name == "train-llm"}
    assert train[3].nodes == ["node-5", "node-6", "node-7", "node-8", "node-9", "node-10"]
    # node-9 has only 4 free chips: rank 4 moves to the repaired node-13
    assert train[6].nodes[4] == "node-13"
    # node-7 is down: fault rank 2 goes to the spare; the others return
    assert train[7].nodes == ["node-5", "node-6", "node-14", "node-8", "node-13", "node-10"]
    # rank 0 failed on healthy node-5: it avoids node-5 (-64) and takes the unused node-7
    assert train[8].nodes[0] == "node-7" and train[8].nodes[1:] == train[7].nodes[1:]


def test_final_state_is_a_valid_chainable_scenario(tmp_path: Path) -> None:
    report = rfc_report()
    state = report.final_state
    running = {r.name: r for r in state.running}
    assert set(running) == {"infer-chat", "infer-embed", "train-llm"}
    assert running["infer-chat"].priority == 100 and running["train-llm"].tasks == 6
    used = {node.name: node.npus - node.free for node in state.nodes}
    assert used["node-5"] == 0 and used["node-7"] == 8  # rank 0 moved off node-5
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump(state.to_dict()))
    again = load_scenario(path)  # validates
    second = simulate(again, [{"events": [{"evict": "train-llm"}]}], engine="greedy")
    assert row(second, 1) == (1, 0, 6, 6, 6, 6, 0)


# --------------------------------------------------------------------------- event semantics


def test_scale_down_then_up_returns_within_ttl_but_not_after() -> None:
    jobs = [{"name": "svc", "owner-uid": "rs-1", "tasks": 3, "npu-per-task": 4}]
    events: list[Any] = [
        [],
        [{"scale": "svc", "tasks": 1}],
        [{"advance": "71h"}, {"scale": "svc", "tasks": 3}],
        [{"scale": "svc", "tasks": 0}],
        # present again in the session that jumps 73 h: refreshed before TTL eviction
        [{"advance": "73h"}, {"scale": "svc", "tasks": 3}],
        [{"scale": "svc", "tasks": 0}],
        [{"advance": "73h"}],  # a session without the owner: its entries expire
        [{"scale": "svc", "tasks": 3}],
    ]
    report = simulate(small(jobs, free={"n1": 4}), events, engine="greedy")
    first = report.sessions[0].placed[0].nodes
    assert first == ["n1", "n2", "n2"]  # packs n1 (4 free), then n2
    back = report.sessions[2].placed[0]
    assert back.ranks == [1, 2] and back.nodes == first[1:] and back.hits == 2
    assert report.sessions[4].placed[0].hits == 3
    assert report.sessions[4].cache_evicted == []
    assert report.sessions[6].cache_evicted == ["rs-1"]
    assert report.sessions[6].cache_entries == 0
    late = report.sessions[7].placed[0]
    assert late.candidates == 0 and late.new == 3


def test_partial_eviction_of_a_service_and_job_deletion() -> None:
    jobs = [{"name": "svc", "owner-uid": "rs-1", "tasks": 4, "npu-per-task": 8},
            {"name": "other", "owner-uid": "rs-2", "tasks": 1, "npu-per-task": 8}]
    events: list[Any] = [
        [],
        [{"evict": "svc", "ranks": [1, 3]}, {"evict": "other"},
         {"delete-job": "other"}],
        [{"delete-job": "svc", "keep-cache": True},
         {"submit": {"name": "svc2", "owner-uid": "rs-1", "policy": "chip8-node8",
                     "tasks": 4, "npu-per-task": 8}}],
    ]
    report = simulate(small(jobs, nodes=5), events, engine="greedy")
    assert report.sessions[0].placed[0].nodes == ["n1", "n2", "n3", "n4"]
    again = report.sessions[1].placed[0]
    assert again.ranks == [1, 3] and again.nodes == ["n2", "n4"] and again.hits == 2
    assert report.sessions[1].cache_entries == 4  # "other" was deleted with its entries
    svc2 = report.sessions[2].placed[0]  # same owner, cache kept: all four return
    assert svc2.hits == 4 and svc2.nodes == ["n1", "n2", "n3", "n4"]


def test_restart_rebuilds_the_cache_from_running_pods() -> None:
    running = [{"name": "svc", "owner-uid": "rs-1", "npu-per-task": 8, "ranks": {0: "n3"},
                "tasks": 2}]
    events: list[Any] = [[], [{"restart": True}, {"scale": "svc", "tasks": 3}]]
    scenario = small([], running, free={"n3": 0})
    report = simulate(scenario, events, engine="greedy")
    s1, s2 = report.sessions
    assert s1.cache_start == "cold" and s1.cache_rebuilt == 1
    assert s1.placed[0].ranks == [1] and s1.placed[0].nodes == ["n1"]
    assert s2.cache_start == "cold" and s2.cache_rebuilt == 2  # ranks 0 and 1 run
    assert s2.placed[0].ranks == [2]


def test_event_lines_list_ranks_as_a_person_reads_them() -> None:
    """Event lines name ranks as ``1, 2``, never as a Python list ``[1, 2]``."""
    jobs = [{"name": "train", "owner-uid": "pt-1", "tasks": 2, "npu-per-task": 8}]
    events: list[Any] = [
        [],
        [{"evict": "train", "ranks": [0, 1], "fault": True}],
        [{"evict": "train", "ranks": [0, 1]}],
    ]
    report = simulate(small(jobs, nodes=3), events, engine="greedy")
    lines = [line for s in report.sessions for line in s.events]
    assert "evict train: ranks 0, 1 failed; the job is rescheduled" in lines[0]
    assert all("[" not in line for line in lines), lines
    text = report.render_table()
    assert "ranks 0, 1 failed" in text and "ranks [" not in text


def test_fault_eviction_and_unhealthy_node_mark_fault_ranks() -> None:
    jobs = [{"name": "train", "owner-uid": "pt-1", "tasks": 2, "npu-per-task": 8}]
    events: list[Any] = [
        [],
        [{"node": "n1", "health": "unhealthy"}],
        [{"node": "n1", "health": "healthy"}, {"evict": "train", "ranks": [1], "fault": True}],
    ]
    report = simulate(small(jobs, nodes=3), events, engine="greedy")
    assert report.sessions[0].placed[0].nodes == ["n1", "n2"]
    s2 = report.sessions[1]
    assert "(fault ranks 0; 2 pods released)" in s2.events[0] and "[" not in s2.events[0]
    assert s2.placed[0].nodes == ["n3", "n2"] and s2.placed[0].hits == 1
    s3 = report.sessions[2].placed[0]
    assert s3.nodes == ["n3", "n1"] and s3.moved == 1 and s3.fault_returns == 0


# --------------------------------------------------------------------------- CLI


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_json_plot_and_save_state(tmp_path: Path) -> None:
    plot = tmp_path / "sim.png"
    state = tmp_path / "state.yaml"
    code, out, err = run_cli("simulate", str(RFC), str(RFC_EVENTS), "--engine", "greedy",
                             "--format", "json", "--plot", str(plot), "--save-state", str(state))
    assert code == 0, err
    data = json.loads(out)
    assert [s["hits"] for s in data["sessions"]] == [0, 0, 6, 0, 4, 5, 5, 5]
    assert data["totals"]["hit-rate"] == pytest.approx(25 / 26, abs=1e-6)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert load_scenario(state).now == data["sessions"][-1]["now"]


def test_cli_deterministic_time_reaches_every_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """``simulate --deterministic-time D`` bounds each session's solve (it used to be
    accepted and ignored: every session ran on the wall clock)."""
    import solver.simulate.session as session

    seen: list[float | None] = []
    real = session.solve

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("deterministic_time"))
        return real(*args, **kwargs)

    monkeypatch.setattr(session, "solve", spy)
    code, _, err = run_cli("simulate", str(RFC), str(RFC_EVENTS), "--engine", "greedy",
                           "--deterministic-time", "0.5")
    assert code == 0, err
    assert seen and all(d == 0.5 for d in seen)


def test_cli_table(tmp_path: Path) -> None:
    code, out, _ = run_cli("simulate", str(RFC), str(RFC_EVENTS), "--engine", "greedy")
    assert code == 0
    assert "96.2 %" in out and "train-llm" in out


BAD_EVENTS = [
    ("- events:\n  - {evict: nope}\n", ["session 1", "event 1 (evict)", "field 'evict'",
                                          "unknown job 'nope'"]),
    ("- name: x\n  events:\n  - {advance: 60}\n  - {node: node-99, free: 2}\n",
     ["session 1 ('x')", "event 2 (node)", "field 'node'", "unknown node 'node-99'"]),
    ("- []\n- events:\n  - {advance: -5}\n", ["session 2", "event 1 (advance)",
                                               "negative time"]),
    ("- events: [{evict: train-llm\n", ["malformed YAML"]),
    ("sessions: 1\n", ["expected a list of sessions"]),
    ("- events:\n  - {explode: node-1}\n", ["event 1", "exactly one event type key"]),
    ("- events:\n  - {scale: infer-chat, tasks: -1}\n", ["field 'tasks'"]),
    ("- events:\n  - {delete-job: train-llm}\n  - {scale: train-llm, tasks: 2}\n",
     ["event 2 (scale)", "unknown job 'train-llm'"]),
    ("- []\n- events:\n  - {evict: train-llm, ranks: [9]}\n",
     ["session 2", "field 'ranks'", "ranks 9 of job", "do not exist"]),
    ("- []\n- events:\n  - {node: node-1, free: 4}\n", ["field 'free'", "exceeds npus"]),
]


@pytest.mark.parametrize(("text", "words"), BAD_EVENTS)
def test_bad_event_files_are_refused(tmp_path: Path, text: str, words: list[str]) -> None:
    path = tmp_path / "events.yaml"
    path.write_text(text)
    code, out, err = run_cli("simulate", str(RFC), str(path), "--engine", "greedy")
    assert code == 2
    assert out == ""
    assert str(path) in err and "Traceback" not in err
    for word in words:
        assert word in err


def test_evicting_a_pending_job_is_a_noted_no_op(tmp_path: Path) -> None:
    # which jobs run depends on the engine; an event file must replay with either engine
    path = tmp_path / "events.yaml"
    path.write_text("- events:\n  - {evict: train-llm}\n")
    code, out, err = run_cli("simulate", str(RFC), str(path), "--engine", "greedy",
                             "--format", "json")
    assert code == 0, err
    assert "nothing to evict, the job is pending" in out


def test_library_refuses_bad_events_with_every_message() -> None:
    scenario = Scenario.model_validate(yaml.safe_load(RFC.read_text()))
    with pytest.raises(InputError) as info:
        simulate(scenario, [{"events": [{"evict": "a"}, {"node": "b", "health": "healthy"},
                                        {"advance": -1}]}], events_source="ev.yaml")
    assert len(info.value.messages) == 3
    assert all(m.startswith("ev.yaml: session 1: event ") for m in info.value.messages)
