"""Fixtures of the solver tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from ortools.sat.python import cp_model


@pytest.fixture
def stall_cpsat(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], threading.Event]]:
    """Call it to make every later CP-SAT search ignore its limit: ``CpSolver.solve``
    waits for the returned event (30 s at most) before it searches, and ``stop_search``
    does nothing.  Set the event to let the abandoned searches finish; teardown sets
    it too."""
    release = threading.Event()

    def stall() -> threading.Event:
        real_solve = cp_model.CpSolver.solve

        def stuck(self: cp_model.CpSolver, model: cp_model.CpModel, *args: Any) -> Any:
            release.wait(30)
            return real_solve(self, model, *args)

        monkeypatch.setattr(cp_model.CpSolver, "solve", stuck)
        monkeypatch.setattr(cp_model.CpSolver, "stop_search", lambda self: None)
        return release

    yield stall
    release.set()
