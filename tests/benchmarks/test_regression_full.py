"""The full-suite regression baseline: gzip files, baselines made from a bench run, and
proofs compared by deterministic time."""

from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from benchmarks.regression import (
    DET_USED,
    baseline_from_bench,
    compare_baseline,
    compare_proofs,
    load_baseline,
    read_baseline_file,
    scenario_digest,
    write_baseline_file,
)
from benchmarks.suite import Settings, read_csv, run_suite
from benchmarks.suite_outputs import write_outputs
from models.io import scenario_from_data
from models.validation import InputError
from solver.cli import main
from tests.benchmarks.tiny_suites import HERE, TINY

SETTINGS_LINE = ("time limit 30 s per CP-SAT run, 1 worker(s), CP-SAT seed 0, "
                 "deterministic time 1")


@pytest.fixture(scope="module")
def bench_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bench run of the two tiny instances, as ``npu-place bench --out DIR`` leaves it."""
    out = tmp_path_factory.mktemp("bench")
    rows = run_suite(TINY, Settings(time_limit=30.0, deterministic_time=1.0), out, None, HERE)
    write_outputs(rows, out, {"suite": "quick", "settings": SETTINGS_LINE})
    return out


@pytest.fixture(scope="module")
def gz_baseline(bench_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("base") / "tiny.json.gz"
    out = io.StringIO()
    assert baseline_from_bench("quick", bench_dir, path, out, TINY) == 0, out.getvalue()
    return path


def _copy(bench_dir: Path, dst: Path) -> Path:
    shutil.copytree(bench_dir, dst)
    return dst


def _rewrite_csv(path: Path, keep: Any = None, drop: tuple[str, ...] = ()) -> None:
    rows = read_csv(path)
    fields = [f for f in rows[0] if f not in drop]
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(r for r in rows if keep is None or keep(r))


# --------------------------------------------------------------------------- gzip files


def test_gzip_round_trip_is_byte_identical(gz_baseline: Path, tmp_path: Path) -> None:
    raw = gz_baseline.read_bytes()
    assert raw[:2] == b"\x1f\x8b" and raw[4:8] == b"\0\0\0\0"  # gzip, modification time 0
    data = load_baseline(gz_baseline)
    again = tmp_path / "again.json.gz"
    write_baseline_file(again, data)
    assert again.read_bytes() == raw
    plain = tmp_path / "plain.json"
    write_baseline_file(plain, data)
    assert plain.read_bytes() == gzip.decompress(raw)  # the same text, not compressed
    assert load_baseline(plain) == data


def test_baseline_from_bench_compares_ok(gz_baseline: Path, tmp_path: Path) -> None:
    data = load_baseline(gz_baseline)
    assert data["settings"] == {"deterministic-limit": 1.0, "time-limit": 30.0, "workers": 1,
                                "seed": 0}
    for record in data["instances"]:
        assert scenario_digest(scenario_from_data(record["scenario"])) == \
            record["scenario-sha256"]
        assert DET_USED in record["results"]["cpsat"]
        assert DET_USED not in record["results"]["greedy"]
    out = io.StringIO()
    assert compare_baseline(gz_baseline, out, tmp_path / "cmp", scheduler=HERE) == 0, \
        out.getvalue()
    assert "OK: no regression" in out.getvalue()
    for name in ("regression.md", "results.csv", "report.md"):
        assert (tmp_path / "cmp" / name).is_file()
    rows = read_csv(tmp_path / "cmp" / "results.csv")
    assert {r["family"] for r in rows} == {"850", "ordinary"}  # the report's gap table
    assert all(r[DET_USED] for r in rows if r["engine"] == "cpsat")
    assert "## By family × scale" in (tmp_path / "cmp" / "report.md").read_text("utf-8")


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read"),
    (b"{}", "not a gzip-compressed file"),
    ("truncated", "truncated"),
    # mtime=0: the same bytes (and test ids) in every process, as pytest-xdist requires
    (gzip.compress(b'{"version": 1, ', mtime=0), "malformed JSON"),
    (gzip.compress(b'{"version": 1, "suite": "quick", "instances": 3}', mtime=0),
     "must be a list"),
], ids=["missing", "not-gzip", "truncated", "malformed-json", "instances-not-a-list"])
def test_bad_gzip_baselines_are_input_errors(gz_baseline: Path, tmp_path: Path,
                                             content: bytes | str | None,
                                             message: str) -> None:
    path = tmp_path / "bad.json.gz"
    if content == "truncated":
        path.write_bytes(gz_baseline.read_bytes()[:200])
    elif isinstance(content, bytes):
        path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        load_baseline(path)
    err = io.StringIO()
    assert main(["compare", "--suite", "quick", "--baseline", str(path)], err=err) == 2
    assert str(path) in err.getvalue() and message in err.getvalue()
    assert "Traceback" not in err.getvalue()


def test_wrong_suite_is_refused(gz_baseline: Path) -> None:
    err = io.StringIO()
    assert main(["compare", "--suite", "full", "--baseline", str(gz_baseline)], err=err) == 2
    assert f"{gz_baseline}: the baseline is for suite 'quick', not 'full'" in err.getvalue()


# --------------------------------------------------------------------------- converter


def test_missing_instance_is_refused(bench_dir: Path, tmp_path: Path) -> None:
    run = _copy(bench_dir, tmp_path / "run")
    _rewrite_csv(run / "results.csv", keep=lambda r: r["instance"] != TINY[1].name)
    with pytest.raises(InputError, match=f"1 instance.*missing.*{TINY[1].name}"):
        baseline_from_bench("quick", run, tmp_path / "b.json.gz", io.StringIO(), TINY)
    assert not (tmp_path / "b.json.gz").exists()


def test_missing_scenario_file_is_refused(bench_dir: Path, tmp_path: Path) -> None:
    run = _copy(bench_dir, tmp_path / "run")
    (run / "scenarios" / f"{TINY[0].name}.json").unlink()
    with pytest.raises(InputError, match=f"no scenarios/{TINY[0].name}.json"):
        baseline_from_bench("quick", run, tmp_path / "b.json", io.StringIO(), TINY)


def test_instances_of_another_suite_are_refused(bench_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not in suite 'quick'"):
        baseline_from_bench("quick", bench_dir, tmp_path / "b.json", io.StringIO())
    err = io.StringIO()
    assert main(["compare", "--suite", "full", "--write-baseline", "--baseline",
                 str(tmp_path / "b.json.gz"), "--from-bench", str(bench_dir)], err=err) == 2
    assert "a run of suite 'quick', not 'full'" in err.getvalue()


def test_unrecorded_deterministic_time_is_refused(bench_dir: Path, tmp_path: Path) -> None:
    run = _copy(bench_dir, tmp_path / "run")
    _rewrite_csv(run / "results.csv", drop=("deterministic-time",))
    (run / "report.md").unlink()
    with pytest.raises(InputError, match="deterministic time is not recorded"):
        baseline_from_bench("quick", run, tmp_path / "b.json", io.StringIO(), TINY)


def test_bench_run_before_the_columns_stores_status_only(bench_dir: Path,
                                                         tmp_path: Path) -> None:
    """A run made before the deterministic-time columns: its report names the limit, and
    the baseline holds the status (not the deterministic time used) of its proofs."""
    run = _copy(bench_dir, tmp_path / "run")
    _rewrite_csv(run / "results.csv", drop=("deterministic-time", DET_USED))
    path = tmp_path / "old.json.gz"
    out = io.StringIO()
    assert baseline_from_bench("quick", run, path, out, TINY) == 0, out.getvalue()
    assert "recorded for 0 CP-SAT run(s)" in out.getvalue()
    data = load_baseline(path)
    assert data["settings"]["deterministic-limit"] == 1.0
    assert all(DET_USED not in r["results"]["cpsat"] for r in data["instances"])
    assert all(r["results"]["cpsat"]["status"] == "optimal" for r in data["instances"])


def test_invalid_run_writes_no_baseline(bench_dir: Path, tmp_path: Path) -> None:
    run = _copy(bench_dir, tmp_path / "run")
    rows = read_csv(run / "results.csv")
    rows[1]["valid"] = "no"
    with open(run / "results.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    out = io.StringIO()
    assert baseline_from_bench("quick", run, tmp_path / "b.json", out, TINY) == 1
    assert "not writing a baseline" in out.getvalue()
    assert not (tmp_path / "b.json").exists()


# --------------------------------------------------------------------------- proofs


def _row(status: str, used: str = "", cell: str = "x | cpsat | stored") -> dict[str, str]:
    return {"cell": cell, "engine": "cpsat", "status": status, "valid": "yes", DET_USED: used}


def test_lost_proof_fails() -> None:
    found = compare_proofs([_row("optimal", "0.5")], [_row("feasible", "5")], 5.0)
    assert len(found) == 1 and found[0].failure
    assert "proved it optimal at deterministic time 5; not proved now" in found[0].text
    # a run the baseline did not prove is not held to a proof
    assert compare_proofs([_row("feasible", "5")], [_row("feasible", "5")], 5.0) == []


@pytest.mark.parametrize(("then", "now", "fails"), [
    ("1.0", "1.3", False),     # 1.25 x 1.0 + 0.05 = 1.3: allowed
    ("1.0", "1.31", True),
    ("0.0", "0.05", False),    # the slack covers tiny proofs
    ("0.0", "0.06", True),
    ("2.0", "0.1", False),     # faster is never a finding
    ("", "9.0", False),        # a baseline without the column holds the status only
    ("1.0", "", False),
])
def test_slower_proof_rule(then: str, now: str, fails: bool) -> None:
    found = compare_proofs([_row("optimal", then)], [_row("optimal", now)], 5.0)
    assert [f.failure for f in found] == ([True] if fails else [])
    if fails:
        assert "slower proof" in found[0].text


def test_lost_proof_fails_the_comparison(gz_baseline: Path, tmp_path: Path) -> None:
    """Run at a deterministic limit too small to prove what the baseline proved."""
    data = load_baseline(gz_baseline)
    data["settings"]["deterministic-limit"] = 1e-6
    path = tmp_path / "tight.json.gz"
    write_baseline_file(path, data)
    out = io.StringIO()
    assert compare_baseline(path, out, scheduler=HERE) == 1
    assert "not proved now" in out.getvalue() and "FAILED" in out.getvalue()


def test_slower_proof_fails_the_comparison(gz_baseline: Path, tmp_path: Path) -> None:
    data = json.loads(read_baseline_file(gz_baseline))
    data["instances"][1]["results"]["cpsat"][DET_USED] = -1.0  # a proof "faster" than free
    path = tmp_path / "fast.json"
    write_baseline_file(path, data)
    out = io.StringIO()
    assert compare_baseline(path, out, scheduler=HERE) == 1
    assert f"REGRESSION: {TINY[1].name}" in out.getvalue()
    assert "slower proof" in out.getvalue()


def test_instance_cut_by_the_time_budget_is_refused(bench_dir: Path, tmp_path: Path) -> None:
    run = _copy(bench_dir, tmp_path / "run")
    rows = read_csv(run / "results.csv")
    for row in rows:
        if row["instance"] == TINY[0].name and row["engine"] == "cpsat":
            row.update(status="skipped", valid="",
                       note="skipped: the time budget of the run was used up")
    with open(run / "results.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(InputError, match="time budget was used up"):
        baseline_from_bench("quick", run, tmp_path / "b.json", io.StringIO(), TINY)


def test_from_bench_needs_write_baseline(bench_dir: Path, tmp_path: Path) -> None:
    err = io.StringIO()
    assert main(["compare", "--suite", "quick", "--baseline", str(tmp_path / "b.json"),
                 "--from-bench", str(bench_dir)], err=err) == 2
    assert "--from-bench DIR needs --write-baseline" in err.getvalue()


def test_full_suite_without_a_stored_baseline_is_an_input_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import benchmarks.regression as regression

    monkeypatch.setattr(regression, "FULL_BASELINE", tmp_path / "full.json.gz")
    err = io.StringIO()
    assert main(["compare", "--suite", "full"], err=err) == 2
    assert f"no committed baseline for suite 'full' ({tmp_path / 'full.json.gz'}" in \
        err.getvalue()
