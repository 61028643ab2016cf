"""Every engine says "out of time" with one exception type, :class:`models.errors.OutOfTime`."""

from __future__ import annotations

import time

import pytest

import heuristics.multilevel.first as multilevel_first
import heuristics.origin_first as origin_first
import heuristics.vnpu as vnpu_greedy
from models.errors import OutOfTime
from solver.lns import StepNotStarted
from solver.model.cancel import BuildCancelled, CancelToken, cancellable, checkpoint


def test_the_engines_share_one_out_of_time_type() -> None:
    # the greedy passes raise the base type itself; the CP-SAT side's subclasses say more
    # (cancelled at a checkpoint; a step not started)
    for module in (origin_first, vnpu_greedy, multilevel_first):
        assert module.OutOfTime is OutOfTime
    assert issubclass(BuildCancelled, OutOfTime)
    assert issubclass(StepNotStarted, BuildCancelled)
    assert not hasattr(multilevel_first, "MultilevelOutOfTime")


def test_a_cancelled_build_is_caught_as_out_of_time() -> None:
    with pytest.raises(OutOfTime), cancellable(CancelToken(time.perf_counter() - 1.0)):
        checkpoint()
