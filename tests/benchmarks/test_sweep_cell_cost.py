"""What a sweep cell costs around its solve: generation once per worker, CPU columns."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.generators import GenParams, generate_case
from benchmarks.sweep import runner
from benchmarks.sweep.grid import expand, load_grid


def test_cells_of_one_generated_scenario_generate_it_once(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump({
        "generate": [{"family": "950", "nodes": 64, "jobs": 3, "seeds": [4]}],
        "overrides": {"config.reserve-nodes": [0, 1]},
        "engines": ["greedy"], "time-limits": [10]}), encoding="utf-8")
    cells = expand(load_grid(grid))
    assert len(cells) == 2
    calls: list[Any] = []

    def counted(params: GenParams) -> Any:
        calls.append(params)
        return generate_case(params)

    monkeypatch.setattr(runner, "generate_case", counted)
    monkeypatch.setattr(runner, "_generated", {})
    rows = [runner.run_cell(cell) for cell in cells]
    assert len(calls) == 1
    # the kept data is not changed by a cell's overrides
    kept = runner.generated_data(cells[0].source.params or {})[1]
    assert kept == generate_case(GenParams("950", nodes=64, seed=4, jobs=3)).scenario.to_dict()
    assert len(calls) == 1
    for row in rows:
        assert row["valid"] == "yes", row
        assert float(row["cell-cpu-seconds"]) >= float(row["solve-cpu-seconds"]) > 0


def test_the_cluster_closes_while_the_report_is_written() -> None:
    """The finished sweep's client and cluster close in a thread while the report and the
    plots are written (about 1 s of waiting for the processes to end, no longer added to
    the run); leaving the block waits for the close and re-raises its error."""
    closing_started, report_written = threading.Event(), threading.Event()

    def close() -> None:
        closing_started.set()
        assert report_written.wait(10)

    stack = contextlib.ExitStack()
    stack.callback(close)
    closing = runner.Closing()
    closing.start(stack)
    with closing:
        assert closing_started.wait(10)  # the close runs while the block runs
        report_written.set()
    assert not any(t.name == "npu-place-sweep-close" for t in threading.enumerate())

    def fail() -> None:
        raise RuntimeError("the cluster did not close")

    stack = contextlib.ExitStack()
    stack.callback(fail)
    closing.start(stack)
    with pytest.raises(RuntimeError, match="did not close"), closing:
        pass
    with runner.Closing():  # never started: nothing to wait for
        pass
