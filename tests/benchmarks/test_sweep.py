"""Tests of ``npu-place sweep``: grids, a real local Dask cluster, resume, failures, baselines."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import dask
import pytest
import yaml
from distributed import Client, LocalCluster

import benchmarks.sweep.runner as sweep
from benchmarks.generators import GenParams, generate
from benchmarks.outputs import check_out_dir
from benchmarks.suite import Settings, quick_suite, suite_grid, suite_grid_data
from benchmarks.sweep import (
    Cell,
    apply_overrides,
    baseline_coverage,
    compare_rows,
    expand,
    load_grid,
    override_path_error,
    read_results,
    run_cell,
    run_cells,
)
from models.io import load_scenario
from models.validation import InputError
from solver.cli import main
from solver.facade import solve
from solver.simulate import simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "models" / "examples"
DET = 1.0  # CP-SAT deterministic time of every test cell: the same answer on any worker

# the worker processes cannot import this test module by name: ship its functions by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """A real Dask cluster on loopback: a scheduler and 2 single-threaded worker processes."""
    with dask.config.set(sweep.local_cluster_config()):
        # as `npu-place sweep` starts it (its crash tests' worker deaths left unlogged)
        cluster = LocalCluster(**{**sweep.local_cluster_options(2), "silence_logs": 50})
        try:
            yield str(cluster.scheduler_address)
        finally:
            cluster.close(timeout=30)


def _worker_state() -> dict[str, Any]:
    """In a worker: whether OR-Tools' model module is imported, the objects frozen, the
    malloc trim setting of its environment, whether Dask samples its stack."""
    import gc

    return {"ortools": "ortools.sat.python.cp_model" in sys.modules,
            "frozen": gc.get_freeze_count(),
            "malloc-trim": os.environ.get("MALLOC_TRIM_THRESHOLD_"),
            "profiled": dask.config.get("distributed.worker.profile.enabled"),
            "threads": os.environ.get("OMP_NUM_THREADS")}


def test_the_workers_import_the_cells_code_as_the_cluster_starts(scheduler: str) -> None:
    """Each worker of a sweep's own cluster has imported what a cell runs (OR-Tools, the
    models) and frozen that heap before it takes its first cell, so neither the imports
    nor a full collection over them is paid inside a cell.  It runs its cells as a plain
    process would: glibc's malloc as a plain process has it (no trim threshold, which
    would map every large array afresh), and no stack sampling beside the cell."""
    with Client(scheduler, timeout="20s") as client:
        states = client.run(_worker_state)
    assert len(states) == 2
    for address, state in states.items():
        assert state["ortools"], address
        assert state["frozen"] > 10_000, (address, state)  # modules, classes, Dask's state
        assert state["malloc-trim"] is None, (address, state)
        assert state["profiled"] is False, (address, state)
        assert state["threads"] == "1", (address, state)


def _write_grid(folder: Path, grid: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("superpod-850.yaml", "ordinary-8npu.yaml"):
        shutil.copy(EXAMPLES / name, folder / name)
    path = folder / "grid.yaml"
    path.write_text(yaml.safe_dump(grid), encoding="utf-8")
    return path


GRID: dict[str, Any] = {
    "scenarios": ["superpod-850.yaml", "ordinary-*.yaml"],
    "overrides": {"config.reserve-nodes": [0, 2]},
    "engines": ["greedy", "cpsat"],
    "time-limits": [60],
    "deterministic-time": DET,
}


@pytest.fixture(scope="module")
def swept(scheduler: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The grid above swept on the cluster: (grid file, output folder)."""
    folder = tmp_path_factory.mktemp("sweep")
    grid = _write_grid(folder, GRID)
    out = io.StringIO()
    code = main(["sweep", str(grid), "--scheduler", scheduler, "--out", str(folder / "out")],
                out=out)
    assert code == 0, out.getvalue()
    return grid, folder / "out"


def test_sweep_equals_serial_plan_cell_by_cell(swept: tuple[Path, Path],
                                               tmp_path: Path) -> None:
    grid, out = swept
    rows = read_results(out / "results.csv")
    assert len(rows) == 2 * 2 * 2
    assert len({r["worker"] for r in rows}) >= 1
    assert [r["scenario"] for r in rows[::4]] == ["superpod-850.yaml", "ordinary-8npu.yaml"]
    for row in rows:
        data = yaml.safe_load((grid.parent / row["scenario"]).read_text(encoding="utf-8"))
        data.setdefault("config", {})["reserve-nodes"] = int(row["config.reserve-nodes"])
        single = tmp_path / f"{row['key'][:12]}.yaml"
        single.write_text(yaml.safe_dump(data), encoding="utf-8")
        text = io.StringIO()
        assert main(["plan", str(single), "--engine", row["engine"], "--time-limit", "60",
                     "--deterministic-time", str(DET), "--format", "json"], out=text) == 0
        serial = json.loads(text.getvalue())
        metrics = serial["metrics"]
        assert row["status"] == serial["status"], row["cell"]
        assert int(row["objective"]) == metrics["objective"], row["cell"]
        assert int(row["origin-hits"]) == metrics["origin-hits"], row["cell"]
        assert int(row["placed-jobs"]) == metrics["placed-jobs"], row["cell"]
        assert int(row["achievable-origin-hits"]) == metrics["achievable-origin-hits"]
        assert row["valid"] == "yes" and row["error"] == ""
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "## By `config.reserve-nodes`" in report
    assert (out / "sweep_config-reserve-nodes.png").read_bytes()[:4] == b"\x89PNG"


def _interrupt_after(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    real = sweep.ResultsFile.write
    seen = {"rows": 0}

    def write(self: sweep.ResultsFile, row: dict[str, str]) -> None:
        real(self, row)
        seen["rows"] += 1
        if seen["rows"] == n:
            raise KeyboardInterrupt  # Ctrl-C while cells are still running

    monkeypatch.setattr(sweep.ResultsFile, "write", write)


def test_resume_after_an_interrupted_sweep_reruns_only_missing_cells(
        scheduler: str, swept: tuple[Path, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    grid = _write_grid(tmp_path, GRID)
    out = tmp_path / "out"
    with monkeypatch.context() as m:
        _interrupt_after(3, m)
        err = io.StringIO()
        assert main(["sweep", str(grid), "--scheduler", scheduler, "--out", str(out)],
                    err=err) == 130
    kept = read_results(out / "results.csv")
    assert len(kept) == 3
    with open(out / "results.csv", "a", encoding="utf-8") as handle:
        handle.write(kept[0]["key"][:10])  # a line cut short by the crash
    # without --resume the folder is refused, not overwritten
    err = io.StringIO()
    assert main(["sweep", str(grid), "--scheduler", scheduler, "--out", str(out)],
                err=err) == 2
    assert "--resume" in err.getvalue()

    submitted: list[Cell] = []
    real = sweep.run_cells

    def spy(client: Any, cells: list[Cell], *args: Any, **kwargs: Any) -> Any:
        submitted.extend(cells)
        return real(client, cells, *args, **kwargs)

    monkeypatch.setattr(sweep, "run_cells", spy)
    text = io.StringIO()
    assert main(["sweep", str(grid), "--scheduler", scheduler, "--out", str(out), "--resume"],
                out=text) == 0, text.getvalue()
    assert len(submitted) == 8 - 3
    assert not {c.key for c in submitted} & {r["key"] for r in kept}
    rows = read_results(out / "results.csv")
    assert sorted(r["key"] for r in rows) == sorted(c.key for c in expand(load_grid(grid)))
    # the resumed sweep gives the numbers of the uninterrupted one
    full = {r["key"]: r for r in read_results(swept[1] / "results.csv")}
    for row in rows:
        assert row["objective"] == full[row["key"]]["objective"]
    assert "3 kept" in text.getvalue()


def _kills_its_worker(cell: Cell) -> bool:
    """The one cell of the grid below whose task kills its worker process (twice: the
    first run and the retry elsewhere; each death costs a new worker process)."""
    return (cell.engine == "cpsat" and cell.source.label == "ordinary-8npu.yaml"
            and dict(cell.overrides)["config.reserve-nodes"] == 1)


def _dying_task(cell: Cell, data: Any, events: Any) -> dict[str, str]:
    if _kills_its_worker(cell):
        os._exit(3)  # the worker process dies mid-cell
    return run_cell(cell, data, events)


def test_crashing_cells_are_recorded_and_the_sweep_goes_on(scheduler: str,
                                                           tmp_path: Path) -> None:
    grid = load_grid(_write_grid(tmp_path, {
        "scenarios": ["superpod-850.yaml", "ordinary-8npu.yaml"],
        "overrides": {"config.reserve-nodes": [1, -5]},  # -5 makes every such cell invalid
        "engines": ["greedy", "cpsat"], "time-limits": [60], "deterministic-time": DET}))
    cells = expand(grid)
    assert sum(map(_kills_its_worker, cells)) == 1
    with Client(scheduler, timeout="30s") as client:
        rows = run_cells(client, cells, grid.data, task=_dying_task)
    assert len(rows) == len(cells) == 8
    by = {r["cell"]: r for r in rows}
    for cell in cells:
        row = by[cell.cell_id]
        if _kills_its_worker(cell):
            assert row["status"] == "error" and row["error"].startswith("worker lost")
            assert "KilledWorker" in row["error"]
        elif dict(cell.overrides)["config.reserve-nodes"] == -5:
            assert row["status"] == "error" and "invalid input" in row["error"]
            assert "reserve-nodes" in row["error"]
        else:
            assert row["status"] in ("greedy", "optimal") and row["valid"] == "yes", row


def test_the_summary_names_each_failed_cell_and_its_reason(scheduler: str,
                                                            tmp_path: Path) -> None:
    """The reason of a failed cell is printed, not only stored in results.csv."""
    grid = _write_grid(tmp_path, {"scenarios": ["superpod-850.yaml"],
                                  "overrides": {"config.reserve-nodes": [1, -5]},
                                  "engines": ["greedy"]})
    text = io.StringIO()
    assert main(["sweep", str(grid), "--scheduler", scheduler, "--out", str(tmp_path / "out"),
                 "--no-progress"], out=text) == 1
    failed = [line for line in text.getvalue().splitlines() if "failed:" in line]
    assert len(failed) == 1, text.getvalue()
    row = next(r for r in read_results(tmp_path / "out" / "results.csv")
               if r["status"] == "error")
    assert failed[0].startswith(f"  failed: {row['cell']} [greedy] error: invalid input: ")
    assert "reserve-nodes" in failed[0] and row["error"] in failed[0]
    assert ": 2 cells (2 run now, 0 kept, 1 failed)" in text.getvalue()


def test_the_summary_caps_the_failed_cells_it_lists() -> None:
    rows = [{"cell": f"c{i}", "engine": "cpsat", "status": "invalid", "note": "rule broken"}
            for i in range(sweep.FAILURES_SHOWN + 3)]
    lines = sweep.failure_lines(rows, Path("out/results.csv")).splitlines()
    assert len(lines) == sweep.FAILURES_SHOWN + 1
    assert lines[0] == "  failed: c0 [cpsat] invalid: rule broken"
    assert lines[-1] == "  ... and 3 more failed cell(s): see out/results.csv"
    assert sweep.failure_lines([], Path("r.csv")) == ""


def test_a_raising_engine_is_recorded_in_its_row(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("engine exploded")

    monkeypatch.setattr(sweep, "solve", boom)
    grid = load_grid(_write_grid(tmp_path, {"scenarios": ["superpod-850.yaml"],
                                            "engines": ["greedy"]}))
    row = run_cell(expand(grid)[0], grid.data["superpod-850.yaml"])
    assert row["status"] == "error" and "RuntimeError: engine exploded" in row["error"]


def test_two_million_generator_seeds_are_refused_before_any_case_is_made(
        tmp_path: Path) -> None:
    path = tmp_path / "grid.json"  # JSON: a YAML list this long takes minutes to read
    path.write_text(json.dumps({"generate": [
        {"family": "850", "nodes": 64, "seeds": list(range(2_000_000))}]}))
    err = io.StringIO()
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")], err=err) == 2
    assert "key 'generate': 2000000 generator cases" in err.getvalue()
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("grid", "message"), [
    ({"scenarios": ["missing.yaml"]}, "key 'scenarios': no such file 'missing.yaml'"),
    ({"scenarios": ["nothing-*.yaml"]}, "key 'scenarios': 'nothing-*.yaml' matches no file"),
    ({"scenarios": "superpod-850.yaml"}, "key 'scenarios': expected a list"),
    ({}, "no scenarios"),
    ({"scenarios": ["superpod-850.yaml"], "engines": ["fast"]},
     "key 'engines': unknown engine 'fast'"),
    ({"scenarios": ["superpod-850.yaml"], "time-limits": [0]}, "key 'time-limits': must be > 0"),
    ({"scenarios": ["superpod-850.yaml"], "time-limits": ["1s"]},
     "key 'time-limits': expected a finite number"),
    ({"scenarios": ["superpod-850.yaml"], "seeds": []}, "key 'seeds': expected a non-empty"),
    ({"scenarios": ["superpod-850.yaml"], "overrides": {"cfg.reserve-nodes": [1]}},
     "key 'overrides.cfg.reserve-nodes': 'cfg' is not a scenario key"),
    ({"scenarios": ["superpod-850.yaml"], "overrides": {"config.reserve-nodes": 2}},
     "key 'overrides.config.reserve-nodes': expected a non-empty list"),
    ({"scenarios": ["superpod-850.yaml"], "deterministic-time": -1},
     "key 'deterministic-time': must be > 0"),
    ({"scenarios": ["superpod-850.yaml"], "events": "nope.yaml"},
     "key 'events': no such file 'nope.yaml'"),
    ({"scenarios": ["superpod-850.yaml"], "engine": ["greedy"]}, "unknown key(s) engine"),
    ({"generate": [{"family": "a4", "nodes": 64}]}, "key 'generate[0]': unknown family"),
    ({"generate": [{"family": "850", "size": 64}]}, "key 'generate[0]': unknown key(s) size"),
    ({"generate": [{"family": "850", "nodes": "64"}]},
     "key 'generate[0]': key 'nodes': expected an integer"),
    ({"generate": [{"family": "850", "nodes": 10**9}]},
     "key 'generate[0]': key 'nodes': at most 65536"),
    # sizes counted before anything is expanded (this one filled the memory before)
    ({"scenarios": ["superpod-850.yaml"], "overrides": {
        "config.reserve-nodes": list(range(1000)), "now": list(range(1000)),
        "affinity-cache.ttl-seconds": list(range(1, 1001))}},
     "the grid makes 2,000,000,000 cells"),
])
def test_grid_validation_errors_name_the_file_and_key(tmp_path: Path, grid: dict[str, Any],
                                                      message: str) -> None:
    path = _write_grid(tmp_path, grid)
    with pytest.raises(InputError) as info:
        load_grid(path)
    assert str(path) in info.value.messages[0]
    assert message in info.value.messages[0]
    err = io.StringIO()
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")], err=err) == 2
    assert message in err.getvalue() and "Traceback" not in err.getvalue()


def test_baseline_regression_is_detected(scheduler: str, swept: tuple[Path, Path],
                                         tmp_path: Path) -> None:
    grid, out = swept
    rows = read_results(out / "results.csv")
    better = [dict(r) for r in rows]
    target = next(r for r in better if r["engine"] == "cpsat")
    target["objective"] = str(int(target["objective"]) + 1)
    baseline = tmp_path / "old.csv"
    with open(baseline, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(better)
    text = io.StringIO()
    code = main(["sweep", str(grid), "--scheduler", scheduler, "--out", str(tmp_path / "new"),
                 "--baseline", str(baseline)], out=text)
    assert code == 1, text.getvalue()
    assert f"REGRESSION: {target['cell']} [cpsat]: below the baseline: objective" \
        in text.getvalue()
    assert "FAILED: 1 regression(s)" in text.getvalue()
    # the same results against themselves: no regression
    assert not [f for f in compare_rows(rows, rows) if f.failure]


def test_compare_rows_rules() -> None:
    def row(engine: str, objective: int, placed: int = 2, hits: int = 3, status: str = "greedy",
            valid: str = "yes") -> dict[str, str]:
        return {"cell": f"a.yaml | {engine} | t=1 | s=0", "engine": engine, "status": status,
                "valid": valid, "placed-jobs": str(placed), "origin-hits": str(hits),
                "objective": str(objective)}

    old = [row("greedy", 100), row("cpsat", 120)]
    assert not [f for f in compare_rows(old, old) if f.failure]
    found = compare_rows(old, [row("greedy", 100), row("cpsat", 90)])
    assert any(f.failure and "loses to greedy" in f.text for f in found)
    found = compare_rows(old, [row("greedy", 100, hits=2), row("cpsat", 120)])
    assert any(f.failure and "origin hits 2 < 3" in f.text for f in found)
    # one more placed job may cost hits: not a regression on hits
    found = compare_rows(old, [row("greedy", 200, placed=3, hits=1), row("cpsat", 200, 3, 1)])
    assert not [f for f in found if f.failure]
    found = compare_rows(old, [row("greedy", 100, valid="no"), row("cpsat", 120)])
    assert any(f.failure and "invalid" in f.text for f in found)
    skipped = {**row("cpsat", 0), "status": "skipped", "note": "engine gone"}
    found = compare_rows(old, [row("greedy", 100), skipped])
    assert any(f.failure and "cannot run" in f.text for f in found)


def test_overrides_paths() -> None:
    data = {"config": {"reserve-nodes": 2}, "jobs": [{"priority": 1}, {"priority": 2}]}
    out = apply_overrides(data, [("config.reserve-nodes", 0), ("jobs.*.priority", 7),
                                 ("jobs.1.tasks", 4), ("affinity-cache.ttl-seconds", 3600)])
    assert out == {"config": {"reserve-nodes": 0},
                   "jobs": [{"priority": 7}, {"priority": 7, "tasks": 4}],
                   "affinity-cache": {"ttl-seconds": 3600}}
    assert data["config"]["reserve-nodes"] == 2  # the input is not changed
    with pytest.raises(InputError, match="'5' is not an index"):
        apply_overrides(data, [("jobs.5.priority", 1)])


def test_cell_keys_and_names(tmp_path: Path) -> None:
    grid = load_grid(_write_grid(tmp_path, GRID))
    cells = expand(grid, version="1.0")
    assert len({c.key for c in cells}) == len(cells) == 8
    again = expand(grid, version="1.0")
    assert [c.key for c in again] == [c.key for c in cells]
    newer = expand(grid, version="1.1")
    assert not {c.key for c in newer} & {c.key for c in cells}  # a new version reruns
    assert [c.cell_id for c in newer] == [c.cell_id for c in cells]  # but matches by name
    assert cells[0].cell_id == ("superpod-850.yaml | config.reserve-nodes=0 | greedy | t=60 | "
                                "s=0 | d=1")


def test_generated_and_simulated_cells_match_direct_runs(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "rfc-inference-training.yaml", tmp_path / "rfc.yaml")
    shutil.copy(EXAMPLES / "rfc-inference-training.events.yaml", tmp_path / "events.yaml")
    (tmp_path / "sim.yaml").write_text(yaml.safe_dump(
        {"scenarios": ["rfc.yaml"], "engines": ["greedy"], "events": "events.yaml"}),
        encoding="utf-8")
    grid = load_grid(tmp_path / "sim.yaml")
    row = run_cell(expand(grid)[0], grid.data["rfc.yaml"], grid.events)
    report = simulate(load_scenario(tmp_path / "rfc.yaml"), grid.events, engine="greedy")
    assert row["status"] == "simulated", row
    assert int(row["origin-hits"]) == report.hits
    assert int(row["sessions"]) == len(report.sessions)

    (tmp_path / "gen.yaml").write_text(yaml.safe_dump(
        {"generate": [{"family": 850, "nodes": 32, "jobs": 2, "seeds": [4]}],
         "engines": ["cpsat"], "deterministic-time": DET}), encoding="utf-8")
    grid = load_grid(tmp_path / "gen.yaml")
    row = run_cell(expand(grid)[0])
    direct = solve(generate(GenParams("850", nodes=32, jobs=2, seed=4)), engine="cpsat",
                   deterministic_time=DET)
    assert row["scenario"] == "850-n32-batch2-s4"
    assert int(row["objective"]) == direct.objective
    assert row["family"] == "850" and row["gen-seed"] == "4"


def test_builtin_suites_are_grids() -> None:
    settings = Settings(time_limit=3.0, deterministic_time=2.0)
    grid = suite_grid("quick", settings)
    cells = expand(grid)
    assert [c.source.label for c in cells[::2]] == [i.name for i in quick_suite()]
    assert {c.engine for c in cells} == {"greedy", "cpsat"}
    assert {c.deterministic_time for c in cells} == {2.0}
    data = suite_grid_data(quick_suite(), settings)
    assert yaml.safe_load(yaml.safe_dump(data)) == data  # a plain grid document


def test_bench_on_a_given_scheduler_equals_the_in_process_run(scheduler: str,
                                                              tmp_path: Path) -> None:
    runs = {}
    for name, where in (("cluster", scheduler), ("here", "inprocess")):
        out = io.StringIO()
        code = main(["bench", "--suite", "quick", "--deterministic-time", str(DET),
                     "--time-limit", "60", "--scheduler", where, "--no-progress",
                     "--out", str(tmp_path / name)], out=out)
        assert code == 0, out.getvalue()
        assert f"on Dask scheduler {where}" in out.getvalue()
        runs[name] = read_results_bench(tmp_path / name / "results.csv")
    assert runs["cluster"] == runs["here"]
    assert len(runs["here"]) == 2 * len(quick_suite())


def read_results_bench(path: Path) -> list[tuple[str, ...]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return [(r["instance"], r["engine"], r["status"], r["objective"], r["origin-hits"],
                 r["bound"]) for r in csv.DictReader(handle)]


def test_local_cluster_size_is_bounded(tmp_path: Path) -> None:
    grid = _write_grid(tmp_path, GRID)
    err = io.StringIO()
    assert main(["sweep", str(grid), "--workers", "100000", "--out", str(tmp_path / "o")],
                err=err) == 2
    assert "--workers 100000: a local cluster takes 1 to" in err.getvalue()
    assert "deprecated" in err.getvalue()  # the old name still works, with a note
    assert not (tmp_path / "o" / "results.csv").exists()


# ------------------------------------------------------------------ the newcomer's issue (23)

GREEDY_GRID: dict[str, Any] = {
    "scenarios": ["superpod-850.yaml", "ordinary-8npu.yaml"],
    "engines": ["greedy"],
    "time-limits": [1],
}


def _sweep(grid: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    text, err = io.StringIO(), io.StringIO()
    code = main(["sweep", str(grid), "--scheduler", "inprocess", "--no-progress",
                 "--out", str(out), *extra], out=text, err=err)
    return code, text.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def greedy_swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A greedy-only sweep of two scenarios in this process: (folder, results.csv)."""
    folder = tmp_path_factory.mktemp("greedy")
    grid = _write_grid(folder, GREEDY_GRID)
    code, text, err = _sweep(grid, folder / "base")
    assert code == 0, text + err
    return folder, folder / "base" / "results.csv"


def test_a_baseline_whose_cells_all_match_is_compared_cell_by_cell(
        greedy_swept: tuple[Path, Path], tmp_path: Path) -> None:
    folder, baseline = greedy_swept
    code, text, err = _sweep(folder / "grid.yaml", tmp_path / "new", "--baseline",
                             str(baseline))
    assert code == 0, text + err
    assert "compared 2 of 2 cell(s) with the baseline" in text
    assert "OK: no regression" in text
    report = (tmp_path / "new" / "report.md").read_text(encoding="utf-8")
    assert "## Against the baseline" in report and "compared 2 of 2" in report


def test_a_baseline_that_matches_no_cell_fails_and_says_so(
        greedy_swept: tuple[Path, Path], tmp_path: Path) -> None:
    _, baseline = greedy_swept
    grid = _write_grid(tmp_path, {**GREEDY_GRID, "time-limits": [2]})  # other cell names
    code, text, err = _sweep(grid, tmp_path / "new", "--baseline", str(baseline))
    assert code == 1, text + err
    assert "compared 0 of 2 cell(s) with the baseline" in text
    assert "FAILED: nothing was compared" in text
    assert "OK" not in text.splitlines()[-1]
    assert "first cell not in the baseline: 'superpod-850.yaml | greedy | t=2 | s=0'" in text
    assert "first baseline cell not in this run: 'superpod-850.yaml | greedy | t=1 | s=0'" \
        in text
    # the notes the terminal leaves out are written where it says
    report = tmp_path / "new" / "report.md"
    assert f"they are in {report}" in text
    notes = report.read_text(encoding="utf-8")
    assert "note: superpod-850.yaml | greedy | t=2 | s=0 [greedy]: not in the baseline" in notes
    assert "FAILED: nothing was compared" in notes


def test_a_baseline_covering_some_cells_fails(greedy_swept: tuple[Path, Path],
                                              tmp_path: Path) -> None:
    folder, baseline = greedy_swept
    rows = read_results(baseline)
    partial = tmp_path / "partial.csv"
    with open(partial, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerow(rows[0])
    code, text, err = _sweep(folder / "grid.yaml", tmp_path / "new", "--baseline",
                             str(partial))
    assert code == 1, text + err
    assert "compared 1 of 2 cell(s)" in text
    assert "FAILED: only 1 of 2 cell(s) were compared; no regression among those" in text


def test_baseline_coverage_counts_only_comparable_cells() -> None:
    def row(cell: str, status: str = "greedy", digest: str = "a") -> dict[str, str]:
        return {"cell": cell, "engine": "greedy", "status": status, "scenario-sha256": digest}

    new = [row("x"), row("y"), row("z")]
    assert baseline_coverage(new, new).complete
    cov = baseline_coverage([row("x"), row("y", status="error"), row("z", digest="b"),
                             row("w")], new)
    assert (cov.compared, cov.cells, cov.baseline_only) == (1, 3, 1)
    assert not cov.complete and cov.first_baseline_only == "w"
    assert not baseline_coverage([], []).complete  # nothing compared is not a pass


def test_a_typo_in_an_override_path_is_refused_when_the_grid_is_loaded(
        tmp_path: Path) -> None:
    grid = _write_grid(tmp_path, {**GREEDY_GRID, "overrides": {"config.reserv-nodes": [0, 2]}})
    code, _text, err = _sweep(grid, tmp_path / "out")
    assert code == 2
    assert str(grid) in err and "config.reserv-nodes" in err
    assert "did you mean 'config.reserve-nodes'?" in err
    assert not (tmp_path / "out").exists()  # refused before any cell ran


@pytest.mark.parametrize(("path", "reason"), [
    ("config.reserve-nodes", None),
    ("jobs.*.priority", None),
    ("jobs.0.fault-ranks", None),
    ("nodes.*.labels.host-arch", None),  # a free mapping: any key
    ("affinity-cache.entries.*.updated", None),
    ("running.*.ranks.3", None),
    ("jobs.*.prority", "did you mean 'jobs.*.priority'?"),
    ("jobs.priority", "did you mean 'jobs.*.priority'?"),
    ("config.reserve-nodes.x", "is a single value"),
    ("affinity-cache.ttl-secs", "did you mean 'affinity-cache.ttl-seconds'?"),
])
def test_override_paths_are_checked_against_the_scenario_fields(path: str,
                                                                reason: str | None) -> None:
    found = override_path_error(path)
    if reason is None:
        assert found is None
    else:
        assert found is not None and reason in found


def test_resume_with_every_cell_done_starts_no_cluster(greedy_swept: tuple[Path, Path],
                                                       tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    folder, baseline = greedy_swept
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(baseline, out / "results.csv")

    def no_cluster(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a Dask cluster was started")

    monkeypatch.setattr(sweep, "dask_client", no_cluster)
    code, text, err = _sweep(folder / "grid.yaml", out, "--resume")
    assert code == 0, text + err
    assert "(0 run now, 2 kept, 0 failed)" in text
    assert len(read_results(out / "results.csv")) == 2


def test_ctrl_c_on_a_sweep_says_interrupted_once(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    grid = _write_grid(tmp_path, GREEDY_GRID)
    _interrupt_after(1, monkeypatch)
    code, _text, err = _sweep(grid, tmp_path / "out")
    assert code == 130
    assert err.count("interrupted") == 1, err
    assert "add --resume to continue" in err


def test_a_used_out_folder_is_refused_unless_force(greedy_swept: tuple[Path, Path],
                                                   tmp_path: Path) -> None:
    folder, _ = greedy_swept
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    code, text, err = _sweep(folder / "grid.yaml", out)
    assert code == 2 and "--out" in err and "not empty" in err and "--force" in err
    code, text, err = _sweep(folder / "grid.yaml", out, "--force")
    assert code == 0, text + err
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine"  # other files stay
    # a finished sweep there: the message offers --resume too
    code, text, err = _sweep(folder / "grid.yaml", out)
    assert code == 2 and "--resume" in err
    code, text, err = _sweep(folder / "grid.yaml", out, "--force", "--resume")
    assert code == 2 and "not both" in err


def test_bench_refuses_a_used_out_folder_unless_force(tmp_path: Path) -> None:
    (tmp_path / "results.csv").write_text("old", encoding="utf-8")
    err = io.StringIO()
    assert main(["bench", "--out", str(tmp_path), "--no-progress"], err=err) == 2
    assert f"--out {tmp_path}: the folder is not empty" in err.getvalue()
    assert "add --force" in err.getvalue() and "--resume" not in err.getvalue()
    assert (tmp_path / "results.csv").read_text(encoding="utf-8") == "old"
    check_out_dir(tmp_path, force=True)  # --force lets the run write there


def test_sweep_dask_workers_is_the_local_cluster_size(tmp_path: Path) -> None:
    grid = _write_grid(tmp_path, GREEDY_GRID)
    err = io.StringIO()
    assert main(["sweep", str(grid), "--dask-workers", "100000", "--out",
                 str(tmp_path / "o")], err=err) == 2
    assert "--dask-workers 100000: a local cluster takes 1 to" in err.getvalue()
    err = io.StringIO()
    assert main(["sweep", str(grid), "--workers", "2", "--dask-workers", "2", "--out",
                 str(tmp_path / "o")], err=err) == 2
    assert "deprecated name" in err.getvalue()


def test_grid_messages_show_no_python_tuples(tmp_path: Path) -> None:
    grid = _write_grid(tmp_path, {"generate": [{"family": "999", "nodes": 64}]})
    with pytest.raises(InputError) as info:
        load_grid(grid)
    message = info.value.messages[0]
    assert "unknown family '999'; choose one of a3, 850, 950, multilevel, ordinary" in message
    assert "(" not in message.split("choose one of")[1]
