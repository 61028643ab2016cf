"""Tests of the benchmark suite: runs, results.csv, report.md and plots."""

from __future__ import annotations

import io
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import benchmarks.suite as suite
import benchmarks.suite_outputs as suite_outputs
import benchmarks.sweep.runner as sweep
from benchmarks.common import MemoryProbe, Progress, parse_markdown_table
from benchmarks.generators import FAMILIES, GenParams
from benchmarks.suite import (
    FIELDS,
    TABLE_HEADER,
    Settings,
    full_suite,
    quick_suite,
    read_csv,
    run_suite,
)
from benchmarks.suite_outputs import write_outputs
from solver.cli import main
from tests.benchmarks.tiny_suites import HERE, instances

TINY = [GenParams("850", nodes=32, seed=1, jobs=1), GenParams("ordinary", nodes=16, seed=2, jobs=3),
        GenParams("950", nodes=64, seed=3, jobs=2), GenParams("850", nodes=32, seed=4, jobs=2)]
FAST = Settings(time_limit=1.0, workers=1, seed=0)


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, str]]]:
    out = tmp_path_factory.mktemp("bench")
    rows = run_suite(instances(TINY), FAST, out, scheduler=HERE)
    write_outputs(rows, out, {"suite": "test"})
    return out, rows


def test_suite_writes_csv_report_plots_and_scenarios(
        bench_run: tuple[Path, list[dict[str, str]]]) -> None:
    out, rows = bench_run
    assert len(rows) == 2 * len(TINY)
    back = read_csv(out / "results.csv")
    assert list(back[0]) == list(FIELDS)
    for row in back:
        assert row["status"] in ("greedy", "optimal", "feasible")
        assert row["valid"] == "yes"
        assert float(row["wall-seconds"]) >= 0
        assert float(row["peak-mb"]) > 0
        assert int(row["achievable-origin-hits"]) <= int(row["origin-candidates"])
        assert int(row["origin-hits"]) <= int(row["achievable-origin-hits"])
        assert Path(row["scenario-file"]).is_file()
    assert (out / "report.md").is_file()
    for name in ("hit_rate_by_scale.png", "wall_time_vs_nodes.png",
                 "objective_improvement.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _pct(num: int, den: int) -> str:
    return f"{100.0 * num / den:.1f} %" if den else "-"


def test_report_tables_match_results_csv(bench_run: tuple[Path, list[dict[str, str]]]) -> None:
    """Recompute the family × scale table and the headline from results.csv, independently."""
    out, _ = bench_run
    report = (out / "report.md").read_text(encoding="utf-8")
    rows = read_csv(out / "results.csv")
    runs: dict[str, dict[str, dict[str, str]]] = defaultdict(dict)
    for row in rows:
        runs[row["instance"]][row["engine"]] = row
    cells: dict[tuple[str, str], list[tuple[dict[str, str], dict[str, str]]]] = defaultdict(list)
    for engines in runs.values():
        g, c = engines["greedy"], engines["cpsat"]
        cells[(g["family"], g["scale"])].append((g, c))

    table = parse_markdown_table(report, TABLE_HEADER[0])
    assert len(table) == len(cells)
    col = {name: i for i, name in enumerate(TABLE_HEADER)}
    for line in table:
        pairs = cells[(line[col["family"]], line[col["scale"]])]
        assert line[col["instances"]] == str(len(pairs))
        cand = sum(int(g["origin-candidates"]) for g, _ in pairs)
        assert line[col["greedy hits"]] == _pct(sum(int(g["origin-hits"]) for g, _ in pairs),
                                                cand)
        assert line[col["cpsat hits"]] == _pct(sum(int(c["origin-hits"]) for _, c in pairs),
                                               cand)
        assert line[col["achievable bound"]] == _pct(
            sum(int(g["achievable-origin-hits"]) for g, _ in pairs), cand)
        proven = [c for _, c in pairs if c["status"] == "optimal"]
        if proven:
            pc = sum(int(c["origin-candidates"]) for c in proven)
            subset = "" if len(proven) == len(pairs) else f" ({len(proven)}/{len(pairs)})"
            assert line[col["proven optimum"]] == _pct(
                sum(int(c["origin-hits"]) for c in proven), pc) + subset
            assert line[col["achievable on proven"]] == _pct(
                sum(int(c["achievable-origin-hits"]) for c in proven), pc) + subset
        else:
            assert line[col["proven optimum"]] == "-"
        jobs = sum(int(g["jobs"]) for g, _ in pairs)
        placed_g = sum(int(g["placed-jobs"]) for g, _ in pairs)
        placed_c = sum(int(c["placed-jobs"]) for _, c in pairs)
        assert line[col["greedy placed"]] == f"{placed_g}/{jobs}"
        assert line[col["cpsat placed"]] == f"{placed_c}/{jobs}"
        deltas = [int(c["objective"]) - int(g["objective"]) for g, c in pairs]
        expect = (sum(d > 0 for d in deltas), sum(d == 0 for d in deltas),
                  sum(d < 0 for d in deltas))
        assert line[col["objective W/T/L"]] == "/".join(map(str, expect))
        optimal = sum(c["status"] == "optimal" for _, c in pairs)
        assert line[col["optimal"]] == f"{optimal}/{len(pairs)}"
        peak = max(float(c["peak-delta-mb"]) for _, c in pairs)
        assert line[col["max cpsat peak Δ MB"]] == f"{peak:.0f}"

    headline = {r[0]: r[1] for r in parse_markdown_table(report, "measure")}
    all_pairs = [(e["greedy"], e["cpsat"]) for e in runs.values()]
    deltas = [int(c["origin-hits"]) - int(g["origin-hits"]) for g, c in all_pairs]
    expect = (sum(d > 0 for d in deltas), sum(d == 0 for d in deltas), sum(d < 0 for d in deltas))
    assert headline["CP-SAT vs greedy on origin hits (win/tie/loss)"] == "/".join(map(str, expect))
    within = sum(c["status"] == "optimal" and float(c["wall-seconds"]) <= 1.0
                 for _, c in all_pairs)
    assert headline["proven optimal within 1 s"] == _pct(within, len(all_pairs))
    detail = parse_markdown_table(report, "instance")
    assert len(detail) == len(rows)


def test_engine_crash_is_recorded_not_fatal(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    real = sweep.solve

    def crash(problem: Any, engine: str = "auto", **kwargs: Any) -> Any:
        if engine == "cpsat":
            raise RuntimeError("boom")
        return real(problem, engine=engine, **kwargs)

    monkeypatch.setattr(sweep, "solve", crash)
    rows = run_suite(instances(TINY[:1]), FAST, tmp_path, scheduler=HERE)
    assert [r["status"] for r in rows] == ["greedy", "error"]
    assert "boom" in rows[1]["note"]


def test_generator_failure_is_recorded_not_fatal(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    real = sweep.generate_case

    def flaky(params: GenParams) -> Any:
        if params.family == "ordinary":
            raise ValueError("no cluster today")
        return real(params)

    monkeypatch.setattr(sweep, "generate_case", flaky)
    # an earlier test of this process may have generated the same cases: start afresh
    monkeypatch.setattr(sweep, "_generated", {})
    rows = run_suite(instances(TINY[:2]), FAST, tmp_path, scheduler=HERE)
    assert [r["status"] for r in rows[2:]] == ["error", "error"]
    assert "no cluster today" in rows[2]["note"]
    assert rows[0]["status"] != "error"


def test_time_budget_skips_the_rest(tmp_path: Path) -> None:
    settings = Settings(time_limit=1.0, budget_seconds=1.0)
    rows = run_suite(instances(TINY[:2]), settings, tmp_path, scheduler=HERE)
    assert {r["status"] for r in rows} == {"skipped"}
    assert "time budget" in rows[0]["note"]


def test_progress_bar_only_when_enabled() -> None:
    stream = io.StringIO()
    bar = Progress(stream, 4, enabled=True)
    bar.update(2, "850-n64")
    bar.close()
    assert stream.getvalue().startswith("\r[") and "2/4" in stream.getvalue()
    quiet = io.StringIO()
    off = Progress(quiet, 4, enabled=False)
    off.update(1, "x")
    off.close()
    assert quiet.getvalue() == ""


def test_memory_probe_measures_a_peak() -> None:
    probe = MemoryProbe()
    before = probe.reset()
    block = bytearray(64 * 1024 * 1024)
    block[::4096] = b"x" * len(block[::4096])  # touch every page
    peak = probe.peak()
    del block
    assert peak >= before
    if probe.method.startswith("VmHWM"):
        assert peak - before >= 60


def test_suites_cover_every_family_and_scale() -> None:
    quick = quick_suite()
    assert 4 <= len(quick) <= 8
    assert {i.params.family for i in quick} == set(FAMILIES)
    full = full_suite()
    names = [i.name for i in full]
    assert len(names) == len(set(names))
    cells = {(i.params.family, i.params.nodes, i.params.mix) for i in full}
    assert cells == {(f, s, m) for f in FAMILIES for s in suite.SCALES
                     for m in ("single", "batch")}
    assert max(i.params.nodes for i in full) == 8192


def test_bench_command(tmp_path: Path) -> None:
    out = io.StringIO()
    code = main(["bench", "--suite", "quick", "--time-limit", "1", "--out", str(tmp_path),
                 "--no-progress", "--dask-workers", "1"], out=out)  # a local Dask cluster
    assert code == 0, out.getvalue()
    assert "quick suite:" in out.getvalue()
    assert "\r[" not in out.getvalue()  # not a terminal: no bar
    assert "local Dask cluster, 1 single-threaded worker process(es)" in out.getvalue()
    assert (tmp_path / "results.csv").is_file() and (tmp_path / "report.md").is_file()
    assert (tmp_path / "hit_rate_by_scale.png").is_file()  # plots by default


def test_missing_matplotlib_prints_the_install_hint(
        bench_run: tuple[Path, list[dict[str, str]]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    err = io.StringIO()
    _, rows = bench_run
    assert suite_outputs.write_plots(rows, tmp_path, err) == []
    assert err.getvalue() == ("plots skipped: matplotlib is not installed "
                              "(pip install 'npu-place[plot]')\n")
