"""Tiny benchmark suites shared by the bench and regression tests."""

from __future__ import annotations

from collections.abc import Iterable

from benchmarks.generators import GenParams, case_name
from benchmarks.suite import Instance

#: The sweep runner's in-process Dask cluster: one worker thread in this process (fast;
#: monkeypatched engines and generators apply).
HERE = "inprocess"


def instances(params: Iterable[GenParams]) -> list[Instance]:
    """One suite instance per generator setting, named as the suites name them."""
    return [Instance(case_name(p), p) for p in params]


#: Two tiny instances (an 850 and an ordinary cluster): the regression tests' baselines.
TINY = instances((
    GenParams("850", nodes=32, seed=1, jobs=2),
    GenParams("ordinary", nodes=16, seed=2, jobs=3),
))
