"""Shared pytest configuration: deterministic, modest hypothesis profiles.

Profiles (choose with ``HYPOTHESIS_PROFILE=<name>``):

* ``ci`` (default): derandomized, no example database, few examples; the whole suite
  must stay fast on 2 cores.
* ``dev``: more examples, still derandomized, for a deeper local run.
"""

from __future__ import annotations

import gc
import os

import pytest
from hypothesis import HealthCheck, settings

#: What every profile shares: derandomized, no example database, no deadline.
_DETERMINISTIC = settings(
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("ci", _DETERMINISTIC, max_examples=30)
settings.register_profile("dev", _DETERMINISTIC, max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_finish(session: object) -> None:
    """Move what collection left alive (every imported module, the collected tests) to the
    collector's permanent generation, after one full collection.

    The test process holds far more long-lived objects than a real ``npu-place`` process
    (all test modules, hypothesis, the collected items); each full collection walks them
    all, and the code under test runs full collections on purpose (the extender after
    each session's answer, benchmarks between measured calls).  Frozen objects are still
    freed by reference counting; only cyclic garbage among them would stay (none: the
    collection before the freeze reclaimed it).  What the service's workers do with their
    own stored clusters (``solver.service.worker.settle_heap``).
    """
    gc.collect()
    gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker more than xdist's count (one per core).

    Much of the suite waits rather than computes (servers and their solver processes
    starting, ``npu-place`` and Chromium subprocesses, plans run to a deadline, sleeps
    that let the clock move on), so with one worker per core the cores idle for part of
    the run; the extra worker computes while the others wait.  A count set in
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` is xdist's to apply, unchanged.
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    from xdist.plugin import pytest_xdist_auto_num_workers as one_per_core

    cores: int = one_per_core(config)
    return cores + 1
