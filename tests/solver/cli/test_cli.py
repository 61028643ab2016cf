"""The ``npu-place`` command line: exit codes, messages and output shapes.

Exit codes: 0 ok, 2 invalid input (message on stderr, no traceback), 1 for ``validate``
finding violations and for internal errors.  ``plan`` runs every family's greedy strategy:
a strategy module that fails to import fails these tests (it is never skipped).
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from models.io import load_placement, load_scenario
from solver import doors
from solver.cli import main
from solver.doors import DEFAULT_EXAMPLE, example_path
from tests.models.builders import job, node, placed, scenario, scenario_examples, write

ROOT = Path(__file__).resolve().parents[3]
PLACEMENT_KEYS = {"engine", "status", "wall-seconds", "objective", "bound", "jobs", "metrics"}
JOB_KEYS = {"name", "placed", "reason", "ranks", "blocks", "origin-hits", "origin-candidates"}
METRIC_KEYS = {"placed-jobs", "origin-hits", "origin-candidates", "fault-returns",
               "subhealthy-nodes", "reserve-used", "fragment-score"}


def run(*argv: str) -> tuple[int, str, str]:
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def ordinary_file(tmp_path: Path) -> Path:
    data = scenario([node("n0"), node("n1", free=4), node("n2", health="unhealthy"),
                     node("n3")],
                    [job("a", owner_uid="o", tasks=2, npu=4), job("b", npu=8, priority=1)],
                    cache=[{"owner-uid": "o", "rank": 0, "node": "n1", "updated": 1764399000}])
    return write(tmp_path / "scenario.yaml", data)


# --------------------------------------------------------------------------- validate


def test_validate_valid_scenario(ordinary_file: Path) -> None:
    code, out, err = run("validate", str(ordinary_file))
    assert code == 0
    assert out == f"{ordinary_file}: valid scenario: 4 nodes, 2 pending jobs\n"
    assert err == ""


def test_validate_invalid_scenario(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.yaml", scenario([node("n0", free=9), node("n0")],
                                                 [job("a", policy="nope")]))
    code, out, err = run("validate", str(bad))
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert lines[-1] == "3 input error(s); the input is not valid"
    assert f"error: {bad}: node 'n0': field 'free': free 9 must be between 0 and npus (8)" in lines
    assert any(line.startswith(f"error: {bad}: job 'a': field 'policy': unknown policy 'nope'")
               for line in lines)
    assert "Traceback" not in err


def test_validate_with_a_valid_placement(ordinary_file: Path, tmp_path: Path) -> None:
    answer = write(tmp_path / "answer.json", {"jobs": [placed("a", ["n1", "n3"]),
                                                       placed("b", ["n0"])]})
    code, out, err = run("validate", str(ordinary_file), str(answer))
    assert (code, err) == (0, "")
    assert f"{answer}: the placement satisfies every hard constraint" in out
    assert "capacity" not in out
    rows = dict(line.split(None, 1) for line in out.splitlines()[3:] if line.strip())
    assert rows["placed-jobs"] == "2"
    assert rows["origin-hits"].startswith("1 / 1 candidates (achievable 1; hit rate 100.0 %)")


def test_validate_placement_as_json(ordinary_file: Path, tmp_path: Path) -> None:
    answer = write(tmp_path / "answer.json", {"jobs": [placed("a", ["n1", "n3"]),
                                                       placed("b", ["n0"])]})
    code, out, _ = run("validate", str(ordinary_file), str(answer), "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["valid"] is True and data["violations"] == []
    assert set(data["metrics"]) >= METRIC_KEYS
    assert data["metrics"]["placed-jobs"] == 2


def test_validate_finds_violations(ordinary_file: Path, tmp_path: Path) -> None:
    answer = write(tmp_path / "answer.yaml", {"jobs": [placed("a", ["n2", "n1"]),
                                                       placed("b", ["n1"])]})
    code, out, err = run("validate", str(ordinary_file), str(answer))
    assert code == 1
    assert err == ""
    assert f"{answer}: 2 hard-constraint violation(s):" in out
    assert "  [unhealthy] job 'a' rank 0 is on unhealthy node 'n2'" in out
    assert "  [capacity] node 'n1' gets 12 NPUs but has only 4 free (jobs 'a', 'b')" in out
    code, out, _ = run("validate", str(ordinary_file), str(answer), "--format", "yaml")
    assert code == 1
    data = yaml.safe_load(out)
    assert data["valid"] is False
    assert {v["rule"] for v in data["violations"]} == {"unhealthy", "capacity"}
    assert data["metrics"] is None  # the service's answer shape: metrics only when valid
    assert set(data["violations"][0]) == {"rule", "job", "node", "message"}


def test_validate_every_kind_of_violation(tmp_path: Path) -> None:
    """One placement breaking each rule at once: validate lists every rule."""
    nodes = ([node(f"p0-{i}", super_pod_id=0, rack_id=0, labels={"rack": "r0", "sw": "s0"})
              for i in range(2)]
             + [node(f"p1-{i}", super_pod_id=1, rack_id=16, labels={"rack": "r1", "sw": "s1"})
                for i in range(2)]
             + [node("sick", health="unhealthy"), node("half", free=4, super_pod_id=0),
                node("x", labels={"rack": "r9", "huawei.com/topotree": "other"})])
    jobs = [job("gang", tasks=2, npu=1), job("cap", npu=8), job("sick", npu=1),
            job("sp", policy="chip8-node8-sp", tasks=2, npu=8),
            job("ra", policy="chip8-node8-ra64-sp", tasks=2, npu=8, sp_block=16, ra_block=16),
            job("ub", policy="chip8-node8-ra64-sp", tasks=2, npu=8, sp_block=8, ub_memory=True),
            job("ml", policy="multilevel", tasks=2, npu=8, affinity_config="level1=2"),
            job("tree", policy="multilevel", tasks=2, npu=8, affinity_config="level1=1")]
    config = {"super-pod-size": 8, "resource-level-config": {
        "default": {"level1": {"label": "rack"}, "level2": {"label": "sw"}}}}
    scenario_file = write(tmp_path / "s.yaml", scenario(nodes, jobs, config))
    answer = write(tmp_path / "a.json", {"jobs": [
        {"name": "gang", "placed": True, "ranks": {"0": "p0-0"}},
        placed("cap", ["half"]), placed("sick", ["sick"]),
        placed("sp", ["p0-0", "p1-0"]), placed("ra", ["p0-1", "p1-1"]),
        placed("ub", ["p0-0", "p1-0"]), placed("ml", ["p0-1", "p1-1"]),
        placed("tree", ["p0-0", "x"]), placed("ghost", ["p0-0"]),
    ]})
    code, out, _ = run("validate", str(scenario_file), str(answer), "--format", "json")
    assert code == 1
    rules = {v["rule"] for v in json.loads(out)["violations"]}
    assert rules == {"format", "gang", "capacity", "unhealthy", "whole-node", "super-pod",
                     "rack-window", "ub-memory", "multilevel", "topotree"}


def test_validate_malformed_placement(ordinary_file: Path, tmp_path: Path) -> None:
    answer = tmp_path / "answer.json"
    answer.write_text('{"jobs": [')
    code, out, err = run("validate", str(ordinary_file), str(answer))
    assert code == 2
    assert out == ""
    assert err.startswith(f"error: {answer}: malformed JSON at line 1")
    assert "Traceback" not in err


def test_validate_missing_files(tmp_path: Path) -> None:
    code, _, err = run("validate", str(tmp_path / "nope.yaml"))
    assert code == 2
    assert "cannot read the file" in err


# --------------------------------------------------------------------------- plan


@pytest.mark.parametrize("name", scenario_examples())
@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_plan_each_example_greedy(name: str, fmt: str, tmp_path: Path) -> None:
    path = example_path(name)
    code, out, err = run("plan", str(path), "--engine", "greedy", "--format", fmt)
    assert code == 0, err
    data = json.loads(out) if fmt == "json" else yaml.safe_load(out)
    _assert_placement_shape(data, path)
    assert data["engine"] == "greedy" and data["status"] == "greedy"
    assert data["bound"] is None
    # the answer is a valid placement file for `validate`
    answer = tmp_path / f"answer.{fmt}"
    answer.write_text(out)
    assert load_placement(answer).engine == "greedy"
    code, out, err = run("validate", str(path), str(answer))
    assert code == 0, out + err
    assert "satisfies every hard constraint" in out


def _assert_placement_shape(data: dict[str, Any], scenario_path: Path) -> None:
    scenario_ = load_scenario(scenario_path)
    assert set(data) >= PLACEMENT_KEYS
    assert set(data) <= PLACEMENT_KEYS | {"gap", "seed", "notes"}
    assert set(data["metrics"]) >= METRIC_KEYS
    specs = [*scenario_.jobs, *scenario_.vnpu_jobs]  # vNPU jobs follow the others
    assert [j["name"] for j in data["jobs"]] == [j.name for j in specs]
    for entry, spec in zip(data["jobs"], specs, strict=True):
        vnpu_keys = {"chips", "downgraded"} if spec in scenario_.vnpu_jobs else set()
        assert JOB_KEYS <= set(entry) <= JOB_KEYS | vnpu_keys
        if entry["placed"]:
            assert entry["reason"] is None
            assert list(entry["ranks"]) == [str(r) for r in range(spec.tasks)]
        else:
            assert entry["ranks"] == {}
            assert entry["reason"]
    placed_jobs = sum(1 for j in data["jobs"] if j["placed"])
    assert data["metrics"]["placed-jobs"] == placed_jobs
    assert data["objective"] == data["metrics"]["objective"]


@pytest.mark.parametrize("name", scenario_examples())
def test_plan_each_example_table(name: str) -> None:
    path = example_path(name)
    code, out, err = run("plan", "--example", name, "--engine", "greedy")
    assert (code, err) == (0, "")
    assert out.startswith(f"scenario: example:{name}\n")
    assert "engine        greedy" in out
    for key in ("placed-jobs", "origin-hits", "fault-returns", "subhealthy-nodes",
                "reserve-used", "fragment-score", "objective"):
        assert f"\n{key} " in out
    assert "job " in out and "rank:node / reason" in out
    for spec in load_scenario(path).jobs:
        assert f"\n{spec.name} " in out


def test_plan_without_scenario_runs_the_bundled_default() -> None:
    code, out, err = run("plan", "--engine", "greedy")
    assert (code, err) == (0, "")
    assert out.startswith(f"scenario: example:{DEFAULT_EXAMPLE}\n")


def test_plan_output_file(tmp_path: Path) -> None:
    path = example_path(DEFAULT_EXAMPLE)
    target = tmp_path / "answer.json"
    code, out, err = run("plan", "--engine", "greedy", "--format", "json", "--output",
                         str(target))
    assert (code, out, err) == (0, "", "")
    _assert_placement_shape(json.loads(target.read_text()), path)


def test_plan_output_to_a_missing_directory(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "answer.json"
    code, out, err = run("plan", "--engine", "greedy", "--output", str(target))
    assert (code, out) == (2, "")
    assert err == (f"error: cannot write --output file '{target}': No such file or directory\n")


def test_plan_invalid_scenario(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.json", scenario([node("n0")], [job("a", tasks=0)]))
    code, out, err = run("plan", str(bad), "--engine", "greedy")
    assert code == 2 and out == ""
    assert f"error: {bad}: job 'a' (jobs[0]): field 'tasks'" in err


def test_plan_unknown_example() -> None:
    code, _, err = run("plan", "--example", "nope")
    assert code == 2
    assert err.startswith("error: no bundled example named 'nope'; choose one of ")


def test_plan_scenario_and_example_together(ordinary_file: Path) -> None:
    code, _, err = run("plan", str(ordinary_file), "--example", DEFAULT_EXAMPLE)
    assert code == 2
    assert err == "error: give either a SCENARIO file or --example, not both\n"


@pytest.mark.parametrize(
    "argv",
    [["plan", "--engine", "magic"], ["plan", "--time-limit", "0"], ["plan", "--workers", "-1"],
     ["frobnicate"], [], ["validate"], ["plan", "--format", "xml"]],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "usage: npu-place" in captured.err
    assert "Traceback" not in captured.err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "validate" in capsys.readouterr().out


def test_internal_error_exit_1_without_traceback(
    ordinary_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any) -> list[Any]:
        raise RuntimeError("boom")

    monkeypatch.setattr(doors, "check", broken)  # the check validate runs
    monkeypatch.delenv("NPU_PLACE_DEBUG", raising=False)
    answer = write(tmp_path / "a.json", {"jobs": [placed("a", ["n1", "n3"]),
                                                  placed("b", ["n0"])]})
    code, out, err = run("validate", str(ordinary_file), str(answer))
    assert code == 1 and out == ""
    assert err == ("internal error: RuntimeError: boom\n"
                   "(set NPU_PLACE_DEBUG=1 for a traceback; please report it)\n")
    monkeypatch.setenv("NPU_PLACE_DEBUG", "1")
    code, _, err = run("validate", str(ordinary_file), str(answer))
    assert code == 1 and "Traceback" in err


# --------------------------------------------------------------------------- examples


def test_examples_lists_every_example_with_what_it_is() -> None:
    from benchmarks.replay.api import EXAMPLES as DAYS

    code, out, err = run("examples")
    assert (code, err) == (0, "")
    rows = {}
    for line in out.splitlines():
        words = line.split(maxsplit=2)
        if len(words) == 3 and not line.startswith(" ") and not line.startswith("print"):
            rows[words[0]] = (words[1], words[2])
    assert set(scenario_examples()) >= {"ordinary-8npu", "superpod-850", "rack-950",
                                        "multilevel"}
    assert {n for n, (kind, _about) in rows.items() if kind == "scenario"} == set(
        scenario_examples())
    assert {n for n, (kind, _about) in rows.items() if kind == "day"} == set(DAYS)
    assert {"superpod-850-dump", "sweep-grid", "extender-deploy"} <= set(rows)
    # each line says what the example is (the start of its description), not a path
    assert rows["rack-950"][1].startswith("Atlas 950 super pods")
    assert all("/" not in about.split()[0] for _kind, about in rows.values())


def test_examples_copy_writes_a_dump_folder(tmp_path: Path) -> None:
    code, out, err = run("examples", "--copy", "superpod-850-dump", str(tmp_path / "dump"))
    assert (code, err) == (0, "")
    assert (tmp_path / "dump" / "t1" / "pods.json").is_file()
    assert (tmp_path / "dump" / "events.yaml").is_file()
    assert "wrote 14 file(s)" in out
    again = run("examples", "--copy", "superpod-850-dump", str(tmp_path / "dump"))
    assert again[0] == 2 and "already exist" in again[2] and "nothing was copied" in again[2]


def test_examples_copy_writes_a_grid_with_its_scenarios(tmp_path: Path) -> None:
    from benchmarks.sweep.grid import expand, load_grid

    code, _out, err = run("examples", "--copy", "sweep-grid", str(tmp_path))
    assert (code, err) == (0, "")
    grid = load_grid(tmp_path / "grid.yaml")
    assert len(expand(grid)) == 8  # 2 scenarios x 2 settings x 2 engines


def test_examples_copy_of_an_unknown_name_suggests_one(tmp_path: Path) -> None:
    code, out, err = run("examples", "--copy", "sweep-gird", str(tmp_path))
    assert code == 2 and out == ""
    assert "did you mean 'sweep-grid'" in err
    assert not any(tmp_path.iterdir())


def test_examples_prints_no_folder() -> None:
    code, out, err = run("examples", "rack-950-dump")
    assert code == 2 and out == ""
    assert "--copy rack-950-dump DIR" in err


def test_bare_npu_place_lists_its_commands() -> None:
    from solver.cli.main import COMMANDS

    code, out, err = run()
    assert code == 2 and out == ""
    for name, _module, help_line in COMMANDS:
        assert re.search(rf"^\s+{name}\s+{re.escape(help_line.split()[0])}", err,
                         flags=re.MULTILINE), name


@pytest.mark.parametrize("name", scenario_examples())
def test_examples_prints_one(name: str, tmp_path: Path) -> None:
    code, out, _ = run("examples", name)
    assert code == 0
    copy = tmp_path / f"{name}.yaml"
    copy.write_text(out)
    assert load_scenario(copy) == load_scenario(example_path(name))


def test_examples_unknown_name() -> None:
    code, out, err = run("examples", "nope")
    assert code == 2 and out == ""
    assert "no bundled example named 'nope'" in err


# --------------------------------------------------------------------------- real process


def test_console_script_invalid_input_has_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: [\n")
    proc = subprocess.run([sys.executable, "-m", "solver.cli", "validate", str(bad)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"error: {bad}: malformed YAML")
    assert "Traceback" not in proc.stderr


def test_console_script_plan_default() -> None:
    path = example_path(DEFAULT_EXAMPLE)
    proc = subprocess.run([sys.executable, "-m", "solver.cli", "plan", "--engine", "greedy",
                           "--format", "json"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    _assert_placement_shape(json.loads(proc.stdout), path)


def test_console_script_bare_plan_the_readme_command() -> None:
    """``npu-place plan`` with no argument: bundled example, default engine (auto)."""
    proc = subprocess.run([sys.executable, "-m", "solver.cli", "plan", "--time-limit", "10"],
                          cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"scenario: example:{DEFAULT_EXAMPLE}"
    head = dict(line.split(None, 1) for line in lines[1:7])
    assert head["engine"] in {"greedy", "cpsat"}
    assert head["status"] in {"optimal", "feasible", "greedy"}
    assert "\nplaced-jobs " in proc.stdout


def test_plan_weights_option_changes_the_objective() -> None:
    code, out, _ = run("plan", "--engine", "greedy", "--format", "json")
    assert code == 0
    default = json.loads(out)
    code, out, _ = run("plan", "--engine", "greedy", "--format", "json", "--weights",
                       '{"fragment": 0, "subhealthy": 0}')
    assert code == 0
    custom = json.loads(out)
    assert custom["metrics"]["fragment-score"] == default["metrics"]["fragment-score"] > 0
    # the fragment no longer costs anything, and every other term is unchanged
    assert custom["objective"] != default["objective"]


def test_plan_weights_option_refuses_bad_json() -> None:
    code, out, err = run("plan", "--weights", '{"bogus": 1}')
    assert code == 2 and out == ""
    assert ("argument --weights: unknown key 'bogus' (keys: placed, origin-hit, fault-return, "
            "affinity-spill, subhealthy, reserve, fragment, priority-levels, image-gb)") in err
    assert "Traceback" not in err and "Extra inputs" not in err


@pytest.mark.parametrize(("weights", "message"), [
    ('{"fragmnt": 0}', "unknown key 'fragmnt' (did you mean 'fragment'? keys: placed, "),
    ('{"origin-hits": 5}', "unknown key 'origin-hits' (did you mean 'origin-hit'? "),
    ('{"fragment": -1}', "'fragment' must be from 0 to 2147483647, got -1"),
    ('{"fragment": 1.5}', "'fragment' must be a whole number, got 1.5"),
    ('{"priority-levels": 3}', "'priority-levels' must be true or false, got 3"),
    ("[1]", "expected a JSON object of weights, such as '{\"fragment\": 0}'"),
    ("{", "not JSON (Expecting property name"),
])
def test_plan_weights_mistakes_are_named_in_the_tools_words(weights: str, message: str) -> None:
    code, out, err = run("plan", "--weights", weights)
    assert code == 2 and out == ""
    assert f"argument --weights: {message}" in err, err
    assert "Input should" not in err and "Extra inputs" not in err
