"""``simulate`` agrees with ``validate`` and ``plan`` and bounds its events."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from models.io import dump_data, load_scenario
from models.limits import MAX_ADVANCE_SECONDS, MAX_SESSIONS, MAX_TASKS
from solver.cli import main
from solver.simulate import simulate
from tests.models.builders import entry, job, node, scenario, write

EXAMPLES = Path(__file__).resolve().parents[3] / "models" / "examples"
RFC = EXAMPLES / "rfc-inference-training.yaml"
RFC_EVENTS = EXAMPLES / "rfc-inference-training.events.yaml"


def run(*argv: str) -> tuple[int, str, str]:
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def _refuse_constant(name: str) -> Any:
    raise AssertionError(f"the report is not JSON: it contains {name}")


# --------------------------------------------------------------------------- numbers


def test_infinite_image_size_is_refused_by_every_command(tmp_path: Path) -> None:
    """Before: ``image-size-gb: .inf`` made the JSON report print ``Infinity``."""
    path = tmp_path / "inf.yaml"
    path.write_text("now: 1000\nnodes: [{name: n0, npus: 8, free: 8}]\njobs:\n"
                    "- {name: a, policy: chip8-node8, tasks: 1, npu-per-task: 8, "
                    "image-size-gb: .inf}\n")
    events = tmp_path / "events.yaml"
    events.write_text("- []\n")
    for argv in (["validate", str(path)], ["plan", str(path), "--engine", "greedy"],
                 ["simulate", str(path), str(events), "--format", "json"]):
        code, out, err = run(*argv)
        assert code == 2 and out == ""
        assert f"{path}: line 4, column 76: non-finite number '.inf'" in err


def test_the_json_report_is_strict_json() -> None:
    code, out, err = run("simulate", str(RFC), str(RFC_EVENTS), "--engine", "greedy",
                         "--format", "json")
    assert code == 0, err
    json.loads(out, parse_constant=_refuse_constant)
    with pytest.raises(ValueError):
        dump_data({"x": float("inf")}, "json")  # never emitted, even by mistake


# --------------------------------------------------------------------------- running jobs


def running_case(kind: str) -> dict[str, Any]:
    """A scenario whose running job breaks one rule."""
    nodes = [node("n0"), node("n1", free=0)]
    running: dict[str, Any] = {"name": "r", "owner-uid": "o", "ranks": {0: "n1"}}
    if kind == "policy":
        running["policy"] = "no-such-policy"
    elif kind == "tasks":
        running["tasks"] = 10**9
    elif kind == "capacity":
        nodes[1]["free"] = 8
    elif kind == "gang":
        running.update({"policy": "chip8-node8-sp", "tasks": 2})
    return {**scenario(nodes, [job("a")]), "running": [running]}


RUNNING_RULES = {
    "policy": ["running job 'r'", "field 'policy'", "unknown policy 'no-such-policy'"],
    "tasks": ["running job 'r' (running[0])", "field 'tasks'",
              f"less than or equal to {MAX_TASKS}"],
    "capacity": ["node 'n1'", "field 'free'",
                 "free 8 plus the 8 NPUs of running jobs exceeds npus 8"],
    "gang": ["running job 'r'", "field 'ranks'",
             "a superpod job runs all its 2 ranks or none, but 1 are running"],
}


@pytest.mark.parametrize("kind", sorted(RUNNING_RULES))
def test_validate_plan_and_simulate_agree_on_running_jobs(tmp_path: Path, kind: str) -> None:
    """Before: an unknown policy or 10^9 tasks was "internal error: ValidationError" in
    simulate while validate and plan accepted the scenario; over-capacity running ranks
    passed validate but failed simulate."""
    path = write(tmp_path / f"{kind}.yaml", running_case(kind))
    events = tmp_path / "events.yaml"
    events.write_text("- []\n")
    errors = []
    for argv in (["validate", str(path)], ["plan", str(path), "--engine", "greedy"],
                 ["simulate", str(path), str(events), "--engine", "greedy"]):
        code, out, err = run(*argv)
        assert code == 2 and out == "", (argv, err)
        assert "internal error" not in err
        for word in RUNNING_RULES[kind]:
            assert word in err, (argv, word, err)
        errors.append(err.splitlines()[:-1])  # the closing line names what did not happen
    assert errors[0] == errors[1] == errors[2]  # the very same messages


def test_a_valid_running_job_still_simulates(tmp_path: Path) -> None:
    path = write(tmp_path / "ok.yaml", running_case("none"))
    events = tmp_path / "events.yaml"
    events.write_text("- events: [{evict: r}]\n")
    code, out, err = run("simulate", str(path), str(events), "--engine", "greedy",
                         "--format", "json")
    assert code == 0, err
    assert json.loads(out)["sessions"][0]["placed-jobs"] == 2


# --------------------------------------------------------------------------- events


@pytest.mark.parametrize(("events", "words"), [
    ("- events: [{advance: 100000000000000000000000000000}]\n",
     ["line 1, column 22: integer '1000000", "is out of range"]),
    ("- events: [{advance: 1000000000000}]\n",
     ["event 1 (advance)", "field 'advance'", f"less than or equal to {MAX_ADVANCE_SECONDS}"]),
    ("- events: [{advance: 1.0e+29}]\n", ["field 'advance'", "less than or equal"]),
    ("- events: [{advance: '100000000000000000000d'}]\n",
     ["field 'advance'", "is longer than"]),
    ("- events: [{scale: infer-chat, tasks: 1000000}]\n",
     ["event 1 (scale)", "field 'tasks'", f"less than or equal to {MAX_TASKS}"]),
    ("- events: [{node: node-1, free: 100000}]\n", ["field 'free'", "less than or equal"]),
    ("- name: \"x\\e[31m\"\n  events: []\n", ["field 'name'", "control or formatting",
                                              "\\x1b[31m"]),
    ("- events: [{evict: \"a\\x07\"}]\n", ["field 'evict'", "control or formatting"]),
    ("- events: [{advance: 60}, {advance: 60}]\n- events: []\n- events: []\n"
     "- events: [{advance: .inf}]\n", ["line 4, column 22: non-finite number"]),
    ("- events: []\n- events: []\n  events: []\n", ["duplicate key 'events'"]),
])
def test_bad_events_are_bounded(tmp_path: Path, events: str, words: list[str]) -> None:
    """Before: an advance of 10^29 s and a scale to 10^6 tasks were accepted silently."""
    path = tmp_path / "events.yaml"
    path.write_text(events)
    code, out, err = run("simulate", str(RFC), str(path), "--engine", "greedy")
    assert code == 2 and out == ""
    assert str(path) in err and "internal error" not in err and "\x1b" not in err
    for word in words:
        assert word in err, (word, err)


def test_the_simulated_clock_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "events.yaml"
    path.write_text("- events:\n" + "  - {advance: 3650d}\n" * 400)
    code, _, err = run("simulate", str(RFC), str(path), "--engine", "greedy")
    assert code == 2
    assert "field 'advance': the clock would pass 100000000000 s" in err


def test_too_many_sessions_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "events.yaml"
    path.write_text("- []\n" * (MAX_SESSIONS + 1))
    code, _, err = run("simulate", str(RFC), str(path), "--engine", "greedy")
    assert code == 2
    assert f"{MAX_SESSIONS + 1} sessions; the limit is {MAX_SESSIONS}" in err


def test_an_alias_bomb_in_events_is_refused(tmp_path: Path) -> None:
    lines = ["- name: s", "  x: &b0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"  x{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * 9) + "]" for i in range(1, 10)]
    path = tmp_path / "events.yaml"
    path.write_text("\n".join(lines) + "\n")
    code, _, err = run("simulate", str(RFC), str(path), "--engine", "greedy")
    assert code == 2
    assert "alias expansions counted" in err


# --------------------------------------------------------------------------- TTL


def ttl_scenario(age: int) -> dict[str, Any]:
    """A pending job whose owner's only cache entry is ``age`` seconds old (TTL 100)."""
    now = 1_000_000
    return scenario([node("n0"), node("n1")], [job("a", owner_uid="o")],
                    cache=[entry("o", 0, "n1", updated=now - age)], ttl=100, now=now)


@pytest.mark.parametrize(("age", "live"), [(100, True), (101, False)])
def test_plan_and_the_first_simulated_session_agree_on_the_ttl(tmp_path: Path, age: int,
                                                               live: bool) -> None:
    """Before: an entry older than the TTL was a hit in simulate's first session (the
    owner's pending job refreshed it) but not a candidate in plan."""
    path = write(tmp_path / "ttl.yaml", ttl_scenario(age))
    code, out, err = run("plan", str(path), "--engine", "greedy", "--format", "json")
    assert code == 0, err
    planned = json.loads(out)
    (placed,) = planned["jobs"]
    assert placed["origin-candidates"] == int(live)
    assert (placed["ranks"]["0"] == "n1") is live

    report = simulate(load_scenario(path), [[]], engine="greedy")
    first = report.sessions[0]
    assert (first.candidates, first.hits) == ((1, 1) if live else (0, 0))
    if live:
        assert first.cache_evicted == []
        assert not any("affinity cache" in n for n in planned.get("notes", []))
    else:  # both outputs say why
        assert first.cache_evicted == ["o"]
        assert first.events[0].startswith("cache: 1 owner(s) older than the TTL")
        assert any(n.startswith("affinity cache: the entries of 1 owner(s) (o)")
                   for n in planned["notes"])
        table = report.render_table()
        assert "TTL evicted o" in table and "older than the TTL" in table


def test_later_sessions_keep_refreshing_present_owners(tmp_path: Path) -> None:
    """After the start, simulate follows upstream: an owner in the session is refreshed
    before TTL eviction, so a job evicted and pending for longer than the TTL returns."""
    data = {**scenario([node("n0", free=0), node("n1", free=0)], [], cache=[], ttl=100,
                       now=1000),
            "running": [{"name": "r", "owner-uid": "o", "ranks": {0: "n1"}}]}
    path = write(tmp_path / "later.yaml", data)
    events = [[], [{"evict": "r"}, {"node": "n1", "health": "unhealthy"}],
              [{"advance": 1000}, {"node": "n1", "health": "healthy"}]]
    report = simulate(load_scenario(path), events, engine="greedy")
    assert report.sessions[2].hits == 1
