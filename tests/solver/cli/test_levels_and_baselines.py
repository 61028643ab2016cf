"""Tree depth and baseline reads, against the real command line.

* A multilevel tree or ``affinity-config`` deeper than ``MAX_LEVELS`` is refused by
    validation (exit 2 naming the tree and the job): upstream's fragment score multiplies
    by 10 per level, which overflowed CP-SAT's 64-bit domains at 20 levels (OR-Tools
    ``Domain`` TypeError, exit 1).  Trees up to the bound plan with ``--engine auto``.
* ``compare --suite … --baseline`` and ``sweep … --baseline`` read the baseline through
    the bounded readers: ``/dev/zero`` is refused at the size limit, not read to
    MemoryError.
"""

from __future__ import annotations

import io
import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

import benchmarks.regression as regression
import models.documents as documents
from models.limits import MAX_LEVELS
from solver.cli import main
from solver.doors import EXIT_INVALID, EXIT_OK

EXAMPLES = Path(str(resources.files("models") / "examples"))


def _levels_scenario(depth: int) -> dict[str, Any]:
    """Six 8-NPU nodes in a ``depth``-level tree (level1 domains of 3 nodes) and two jobs
    that use every level: one with groups of 2 (a level1 remainder the model must count)
    and one of a single task."""
    nodes = []
    for n in range(6):
        labels = {"huawei.com/topotree": "default"}
        labels.update({f"l{i}": f"v{i}-{n // 3 if i == 1 else 0}" for i in range(1, depth + 1)})
        nodes.append({"name": f"n{n}", "npus": 8, "free": 8, "labels": labels})
    return {
        "now": 1764400000,
        "config": {"resource-level-config": {"default": {
            f"level{i}": {"label": f"l{i}"} for i in range(1, depth + 1)}}},
        "nodes": nodes,
        "jobs": [
            {"name": "pairs", "policy": "multilevel", "tasks": 2, "npu-per-task": 8,
             "affinity-config": ",".join(f"level{i}=2" for i in range(1, depth + 1))},
            {"name": "single", "policy": "multilevel", "tasks": 1, "npu-per-task": 8,
             "affinity-config": ",".join(f"level{i}=1" for i in range(1, depth + 1))},
        ],
    }


def _write(tmp_path: Path, data: dict[str, Any], name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


CPSAT = ["--workers", "1", "--seed", "1", "--time-limit", "20", "--deterministic-time", "5"]


def test_a_tree_at_the_level_bound_plans_with_every_engine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, _levels_scenario(MAX_LEVELS))
    assert main(["validate", str(path)]) == EXIT_OK
    out = io.StringIO()
    code = main(["plan", str(path), "--engine", "auto", "--format", "json", *CPSAT], out=out)
    assert code == EXIT_OK, capsys.readouterr().err
    answer = json.loads(out.getvalue())
    assert answer["metrics"]["placed-jobs"] == 2
    placement = tmp_path / "plan.json"
    placement.write_text(out.getvalue(), encoding="utf-8")
    assert main(["validate", str(path), str(placement)]) == EXIT_OK
    assert main(["compare", str(path), *CPSAT], out=io.StringIO()) == EXIT_OK


@pytest.mark.parametrize("depth", [MAX_LEVELS + 1, 20])
def test_a_deeper_tree_is_refused_by_validation(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                depth: int) -> None:
    path = _write(tmp_path, _levels_scenario(depth))
    for command in (["validate", str(path)], ["plan", str(path), "--engine", "auto", *CPSAT],
                    ["compare", str(path), *CPSAT]):
        capsys.readouterr()
        assert main(command, out=io.StringIO()) == EXIT_INVALID, command
        err = capsys.readouterr().err
        assert "internal error" not in err
        assert (f"{path}: config.resource-level-config tree 'default': field 'levels': the "
                f"tree has {depth} levels; at most {MAX_LEVELS} are accepted") in err
        assert (f"{path}: job 'pairs': field 'affinity-config': affinity-config has {depth} "
                f"levels; at most {MAX_LEVELS} are accepted") in err


def test_a_deep_tree_with_shallow_jobs_is_still_refused(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """The bound is on the tree too (upstream trims its upper levels for a shallower job,
    but a 20-level tree is a configuration mistake worth a message)."""
    data = _levels_scenario(MAX_LEVELS + 1)
    for job in data["jobs"]:
        job["affinity-config"] = "level1=1"
    path = _write(tmp_path, data)
    assert main(["validate", str(path)]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert "field 'levels': the tree has 9 levels" in err and "affinity-config" not in err


# --------------------------------------------------------------------------- item 14


def test_compare_suite_baseline_dev_zero(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    # a baseline has its own size limit (a full-suite baseline is ~40 MB of JSON)
    monkeypatch.setattr(regression, "BASELINE_MAX_BYTES", 4096)
    code = main(["compare", "--suite", "quick", "--baseline", "/dev/zero"], out=io.StringIO())
    err = capsys.readouterr().err
    assert code == EXIT_INVALID, err
    assert "error: /dev/zero: the file is larger than the limit of 4096 bytes" in err


@pytest.mark.parametrize(("text", "says"), [
    ("[" * 100_000 + "]" * 100_000, "nested deeper than 32 levels"),
    ('{"version": 1, "version": 1}', "duplicate key 'version'"),
    ("{", "malformed JSON at line 1"),
], ids=["deep", "duplicate", "malformed"])
def test_compare_suite_hostile_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        text: str, says: str) -> None:
    baseline = tmp_path / "baseline.json"
    baseline.write_text(text, encoding="utf-8")
    code = main(["compare", "--suite", "quick", "--baseline", str(baseline)],
                out=io.StringIO())
    err = capsys.readouterr().err
    assert code == EXIT_INVALID and "internal error" not in err, err
    assert f"error: {baseline}: " in err and says in err, err


def _grid(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLES / "ordinary-8npu.yaml", tmp_path / "ordinary-8npu.yaml")
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump({"scenarios": ["ordinary-8npu.yaml"],
                                    "engines": ["greedy"], "time-limits": [5]}),
                    encoding="utf-8")
    return grid


def test_sweep_baseline_dev_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before any cell runs (the local cluster is never started)."""
    monkeypatch.setattr(documents, "MAX_FILE_BYTES", 4096)
    out = tmp_path / "out"
    code = main(["sweep", str(_grid(tmp_path)), "--out", str(out), "--baseline", "/dev/zero",
                 "--workers", "1", "--no-progress"], out=io.StringIO())
    err = capsys.readouterr().err
    assert code == EXIT_INVALID, err
    assert "error: /dev/zero: the file is larger than the limit of 4096 bytes" in err
    assert not (out / "results.csv").exists()


def test_sweep_baseline_one_endless_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A CSV "line" without an end is bounded by the file limit, not read line by line."""
    monkeypatch.setattr(documents, "MAX_FILE_BYTES", 4096)
    baseline = tmp_path / "old.csv"
    baseline.write_text("cell,engine,status\n" + "x" * 10_000, encoding="utf-8")
    code = main(["sweep", str(_grid(tmp_path)), "--out", str(tmp_path / "out"), "--baseline",
                 str(baseline), "--workers", "1", "--no-progress"], out=io.StringIO())
    err = capsys.readouterr().err
    assert code == EXIT_INVALID, err
    assert f"error: {baseline}: the file is 10019 bytes; the limit is 4096 bytes" in err
