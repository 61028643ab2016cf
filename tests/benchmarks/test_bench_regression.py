"""Tests of the regression mode (``npu-place compare --suite ... --baseline ...``)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

import benchmarks.regression as regression
import benchmarks.sweep.runner as sweep
from benchmarks.regression import (
    DEFAULT_BASELINE,
    DET_USED,
    compare_baseline,
    compare_runs,
    load_baseline,
    scenario_digest,
    write_baseline,
)
from benchmarks.suite import Settings
from models.io import scenario_from_data
from models.validation import InputError
from solver.cli import main
from tests.benchmarks.tiny_suites import HERE, TINY

SETTINGS = Settings(time_limit=30.0, workers=1, seed=0, deterministic_time=1.0,
                    write_scenarios=False)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("baseline") / "tiny.json"
    out = io.StringIO()
    assert write_baseline("quick", path, out, SETTINGS, TINY, scheduler=HERE) == 0, \
        out.getvalue()
    return path


def _edit(src: Path, dst: Path, change: Any) -> Path:
    data = json.loads(src.read_text(encoding="utf-8"))
    change(data)
    dst.write_text(json.dumps(data), encoding="utf-8")
    return dst


def test_baseline_passes_against_itself(baseline: Path, tmp_path: Path) -> None:
    out = io.StringIO()
    assert compare_baseline(baseline, out, tmp_path / "report", scheduler=HERE) == 0, \
        out.getvalue()
    assert "OK: no regression" in out.getvalue()
    assert (tmp_path / "report" / "regression.md").is_file()
    assert (tmp_path / "report" / "results.csv").is_file()


def test_baseline_stores_reloadable_scenarios(baseline: Path) -> None:
    data = load_baseline(baseline)
    assert data["settings"]["deterministic-limit"] == 1.0
    for record in data["instances"]:
        scenario = scenario_from_data(record["scenario"])
        assert scenario_digest(scenario) == record["scenario-sha256"]
        assert set(record["results"]) == {"greedy", "cpsat"}


@pytest.mark.parametrize(("engine", "field"), [
    ("greedy", "placed-jobs"), ("greedy", "origin-hits"), ("cpsat", "origin-hits"),
])
def test_worsened_quality_fails(baseline: Path, tmp_path: Path, engine: str,
                                field: str) -> None:
    """A baseline claiming better quality than the engines reach now, yet within what a
    placement can reach (the second instance places 2 of its 3 jobs and hits 7 of its
    11 origin candidates), is a regression."""
    def raise_bar(data: dict[str, Any]) -> None:
        data["instances"][1]["results"][engine][field] += 1

    path = _edit(baseline, tmp_path / "better.json", raise_bar)
    out = io.StringIO()
    assert compare_baseline(path, out, scheduler=HERE) == 1
    text = out.getvalue()
    assert "REGRESSION" in text and f"[{engine}]" in text and "FAILED" in text
    name = json.loads(path.read_text())["instances"][1]["name"]
    # the instance is named as the table names it; the settings are in the title once
    assert f"REGRESSION: {name} [{engine}]" in text and "| t=" not in text


def _no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the suite ran before its inputs were checked")

    monkeypatch.setattr(regression, "_run_grid", refuse)
    monkeypatch.setattr(regression, "generate_case", refuse)


def _set(index: int, engine: str, field: str, value: Any) -> Any:
    def change(data: dict[str, Any]) -> None:
        data["instances"][index]["results"][engine][field] = value
    return change


@pytest.mark.parametrize(("change", "field"), [
    (_set(0, "cpsat", "origin-hits", 2), "instances[0].results.cpsat.origin-hits"),
    (_set(0, "greedy", "placed-jobs", 3), "instances[0].results.greedy.placed-jobs"),
    (_set(0, "greedy", "objective", 66), "instances[0].results.greedy.objective"),
])
def test_an_impossible_baseline_is_refused_before_the_run(
        baseline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Any,
        field: str) -> None:
    """Hits above the candidates, more placed jobs than the scenario has, an objective
    above the optimum the baseline's own CP-SAT run proved: not the code's regression."""
    _no_run(monkeypatch)
    path = _edit(baseline, tmp_path / "impossible.json", change)
    err = io.StringIO()
    assert main(["compare", "--suite", "quick", "--baseline", str(path)], err=err) == 2
    text = err.getvalue()
    assert f"{path}: field '{field}'" in text and "impossible baseline" in text
    assert "Traceback" not in text


def test_an_objective_above_the_proven_optimum_is_an_impossible_baseline(
        baseline: Path, tmp_path: Path) -> None:
    """The second instance's stored CP-SAT objective raised by one: CP-SAT proves the
    optimum again in this run, so no placement reaches the stored figure (it was
    reported as the code's regression, exit 1)."""
    path = _edit(baseline, tmp_path / "above.json", _set(1, "cpsat", "objective", 3484))
    with pytest.raises(InputError) as refused:
        compare_baseline(path, io.StringIO(), scheduler=HERE)
    text = " ".join(refused.value.messages)
    assert "field 'instances[1].results.cpsat.objective'" in text
    assert "above the optimum 3483 CP-SAT proved" in text and "impossible baseline" in text


@pytest.mark.parametrize(("change", "text"), [
    (lambda d: d.update(settings="abc"), "field 'settings': expected a mapping"),
    (lambda d: d["settings"].update({"time-limit": "x"}),
     "field 'settings.time-limit': expected a number"),
    (lambda d: d["settings"].update({"time-limit": 0}), "field 'settings.time-limit' must be"),
    (lambda d: d["settings"].update(workers=1000000), "field 'settings.workers' must be"),
    (lambda d: d["settings"].update(seed=-1), "field 'settings.seed' must be"),
    (lambda d: d["instances"][0]["params"].update(nodes=3000000),
     "field 'instances[0].params': key 'nodes': at most 65536"),
    (lambda d: d["instances"][0]["params"].update(seed="1"),
     "field 'instances[0].params.seed'"),
    (lambda d: d["instances"][1]["results"]["greedy"].update(objective="abc"),
     "field 'instances[1].results.greedy.objective': expected an integer"),
    (lambda d: d["instances"][1]["results"]["greedy"].update({"origin-hits": -1}),
     "field 'instances[1].results.greedy.origin-hits': expected a count"),
])
def test_bad_baseline_fields_are_refused_before_the_run(
        baseline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Any,
        text: str) -> None:
    _no_run(monkeypatch)
    path = tmp_path / "bad.json"
    data = json.loads(baseline.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    err = io.StringIO()
    assert main(["compare", "--suite", "quick", "--baseline", str(path)], err=err) == 2
    assert str(path) in err.getvalue() and text in err.getvalue(), err.getvalue()
    assert "Traceback" not in err.getvalue() and "internal error" not in err.getvalue()


def test_the_out_folder_follows_the_rules_of_bench_sweep_and_replay(
        baseline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_run(monkeypatch)
    args = ["compare", "--suite", "quick", "--baseline", str(baseline), "--out"]
    err = io.StringIO()
    file = tmp_path / "a-file"
    file.write_text("x")
    assert main([*args, str(file)], err=err) == 2
    assert "a file, not a folder" in err.getvalue()
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("an earlier run")
    err = io.StringIO()
    assert main([*args, str(used)], err=err) == 2
    assert "not empty" in err.getvalue() and "--force" in err.getvalue()
    outside = tmp_path / "outside.md"
    outside.write_text("not the run's")
    (used / "regression.md").symlink_to(outside)
    err = io.StringIO()
    assert main([*args, str(used), "--force"], err=err) == 2
    assert "symbolic link" in err.getvalue()
    assert outside.read_text() == "not the run's"


def test_improvement_is_a_note_not_a_failure(baseline: Path, tmp_path: Path) -> None:
    def lower_bar(data: dict[str, Any]) -> None:
        data["instances"][1]["results"]["greedy"]["objective"] -= 5

    path = _edit(baseline, tmp_path / "worse.json", lower_bar)
    out = io.StringIO()
    assert compare_baseline(path, out, scheduler=HERE) == 0
    assert "better than the baseline" in out.getvalue()


def test_invalid_stored_scenario_fails(baseline: Path, tmp_path: Path) -> None:
    def break_it(data: dict[str, Any]) -> None:
        data["instances"][0]["scenario"]["jobs"][0]["tasks"] = 0

    out = io.StringIO()
    assert compare_baseline(_edit(baseline, tmp_path / "bad.json", break_it), out,
                            scheduler=HERE) == 1
    assert "stored scenario is invalid" in out.getvalue()


def _cols(objective: int, placed: int = 1, hits: int = 3, valid: str = "yes") -> dict[str, str]:
    return {"status": "greedy", "valid": valid, "placed-jobs": str(placed),
            "origin-hits": str(hits), "origin-candidates": "4", "achievable-origin-hits": "4",
            "fault-returns": "0", "subhealthy-nodes": "0", "reserve-used": "0",
            "fragment-score": "0", "affinity-spill": "0", "objective": str(objective)}


def test_cpsat_losing_to_greedy_fails() -> None:
    found = compare_runs("x", {"greedy": _cols(100), "cpsat": _cols(99)}, None)
    assert any(f.failure and "loses to greedy" in f.text for f in found)


def test_invalid_placement_fails() -> None:
    found = compare_runs("x", {"greedy": _cols(100), "cpsat": _cols(100, valid="no")}, None)
    assert any(f.failure and "invalid" in f.text for f in found)


def test_fewer_hits_for_one_more_placed_job_is_not_a_regression() -> None:
    old = {"greedy": {"placed-jobs": 1, "origin-hits": 3, "objective": 100}}
    found = compare_runs("x", {"greedy": _cols(200, placed=2, hits=1),
                               "cpsat": _cols(200, placed=2, hits=1)}, old)
    assert not any(f.failure for f in found)


def test_an_engine_that_cannot_run_fails(baseline: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def gone(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("greedy is gone")

    monkeypatch.setattr(sweep, "solve", gone)
    out = io.StringIO()
    assert compare_baseline(baseline, out, scheduler=HERE) == 1
    assert "failed run: status error; RuntimeError: greedy is gone" in out.getvalue()


def test_bad_baseline_files_are_input_errors(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    with pytest.raises(InputError, match="cannot read"):
        load_baseline(path)
    path.write_text('{"version": 99}', encoding="utf-8")
    with pytest.raises(InputError, match="not a version-1 baseline"):
        load_baseline(path)
    err = io.StringIO()
    assert main(["compare", "--suite", "quick", "--baseline", str(path)], err=err) == 2
    assert "not a version-1 baseline" in err.getvalue()


def test_write_baseline_needs_a_path() -> None:
    err = io.StringIO()
    assert main(["compare", "--suite", "quick", "--write-baseline"], err=err) == 2
    assert "--write-baseline needs --baseline" in err.getvalue()


def test_committed_quick_baseline_is_loadable() -> None:
    data = load_baseline(DEFAULT_BASELINE)
    assert data["suite"] == "quick"
    assert data["settings"]["workers"] == 1
    for record in data["instances"]:
        scenario = scenario_from_data(record["scenario"], record["name"])
        assert scenario_digest(scenario) == record["scenario-sha256"]


def test_committed_quick_baseline_records_the_deterministic_time_of_every_cpsat_run() -> None:
    """CI compares proofs by deterministic time (``compare_proofs``): a quick baseline
    without it cannot see a proof that got slower."""
    data = load_baseline(DEFAULT_BASELINE)
    cpsat = [record["results"]["cpsat"] for record in data["instances"] if record["results"]]
    assert cpsat
    missing = [r for r in cpsat if DET_USED not in r]
    assert not missing, f"{len(missing)} CP-SAT run(s) of quick.json without {DET_USED}"
    assert all(r[DET_USED] <= data["settings"]["deterministic-limit"] for r in cpsat)
