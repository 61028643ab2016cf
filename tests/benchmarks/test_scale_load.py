"""``python -m benchmarks.scale_load``: the load and greedy CPU figures at 16,384-65,536 nodes."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks import scale_load
from benchmarks.scale_load import main


def test_generates_measures_and_prints_one_row_per_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the full collection after each measured call (16 here) is counted, not run: in a
    # test process holding the whole suite's objects each one costs a quarter of a second
    # or more, and no figure of a row depends on it
    collections: list[int] = []
    monkeypatch.setattr(scale_load, "gc", SimpleNamespace(
        collect=lambda: collections.append(1) or 0, unfreeze=gc.unfreeze))
    assert main(["--generate", str(tmp_path), "--nodes", "64", "--seed", "5",
                 "--families", "950,ordinary"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["file"] for r in rows] == ["950-64-5.json", "ordinary-64-5.json"]
    for row in rows:
        assert row["nodes"] == 64
        assert row["load-cpu"] >= 0 and row["greedy-cpu"] <= row["greedy-cpu-median"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["950-64-5.json",
                                                           "ordinary-64-5.json"]
    assert len(collections) == 2 * (3 + 5 + 5)  # after every measured call


def test_without_files_it_says_what_to_give(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2
    assert "give scenario files or --generate DIR" in capsys.readouterr().err
