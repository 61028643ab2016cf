"""Ctrl-C while the local Dask cluster starts: one "interrupted" line, no tracebacks.

Found in the README walkthrough: ``npu-place sweep`` interrupted 2-4 s after it started
(the cluster still starting) printed "interrupted", exit 130, then distributed's exit hook
failed to close the half-started cluster with an ``AssertionError: Status.init``
traceback.  ``dask_client`` now closes what started before the interrupt goes on.
"""

from __future__ import annotations

import atexit
import logging
from typing import Any

import pytest

from benchmarks import sweep


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
