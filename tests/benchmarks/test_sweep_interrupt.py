"""Ctrl-C while the local Dask cluster starts: one "interrupted" line, no tracebacks.

Found in the README walkthrough: ``npu-place sweep`` interrupted 2-4 s after it started
(the cluster still starting) printed "interrupted", exit 130, then distributed's exit hook
failed to close the half-started cluster with an ``AssertionError: Status.init``
traceback.  ``dask_client`` now closes what started before the interrupt goes on.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.sweep import runner as sweep
from solver.cli import main
from tests.benchmarks.test_sweep import GRID, _write_grid


def test_an_interrupt_while_the_cluster_starts_closes_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import distributed
    from distributed.deploy.spec import SpecCluster, close_clusters

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt  # Ctrl-C after the cluster, before the client

    for name in ("distributed", "asyncio"):  # the handler quiets them: restore after
        monkeypatch.setattr(logging.getLogger(name), "level", logging.getLogger(name).level)
    started: list[SpecCluster] = []

    class Recorded(distributed.LocalCluster):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            started.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(distributed, "LocalCluster", Recorded)
    monkeypatch.setattr(distributed, "Client", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt), sweep.dask_client(sweep.INPROCESS):
            pass  # pragma: no cover - never reached
        assert started, "the test did not start a cluster"
        assert all(c.status.name == "closed" for c in started), \
            [c.status for c in started]
    finally:
        atexit.register(close_clusters)  # the handler unregisters distributed's hook


def test_sweep_interrupted_while_its_cluster_starts_says_so_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One line that says what happened (it was a bare "interrupted"), exit 130."""

    @contextlib.contextmanager
    def starting(*args: Any, **kwargs: Any) -> Iterator[Any]:
        raise KeyboardInterrupt
        yield  # pragma: no cover - a generator for contextmanager

    monkeypatch.setattr(sweep, "dask_client", starting)
    grid = _write_grid(tmp_path, GRID)
    err = io.StringIO()
    assert main(["sweep", str(grid), "--out", str(tmp_path / "out"), "--no-progress"],
                err=err) == 130
    assert err.getvalue().splitlines() == [
        "interrupted while the Dask cluster started: no cell was run (0 of 8 cells were "
        "finished before)"], err.getvalue()
