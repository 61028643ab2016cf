"""Tests of one multilevel ``Schedule`` call (``heuristics.multilevel.run.Run``).

Pass 2 is skipped when pushing every free leaf cannot complete the root
(``Run._completes``); the skip must never change an answer, so the prediction
is checked against pass 2 run in full on generated batches.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.generators import GenParams, generate
from heuristics.greedy import greedy_plan
from heuristics.multilevel.run import Run
from models.compiled import compile_scenario


def test_the_pass2_prediction_is_what_a_full_pass2_does(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """Every prediction equals the outcome of pass 2 run to the end (predictions of both
    kinds are made on these batches, so a prediction fixed at one answer fails)."""
    predicted: dict[int, bool] = {}
    checked: list[bool] = []
    completes = Run._completes
    run = Run.run

    def spy(self: Run, total: np.ndarray) -> bool:
        predicted[id(self)] = completes(self, total)
        return True  # let pass 2 run in full

    def checked_run(self: Run) -> bool:
        done = run(self)
        if id(self) in predicted:
            assert predicted.pop(id(self)) == done
            checked.append(done)
        return done

    monkeypatch.setattr(Run, "_completes", spy)
    monkeypatch.setattr(Run, "run", checked_run)
    for nodes, seed in ((512, 0), (512, 1), (512, 2), (1024, 3), (2048, 4)):
        greedy_plan(compile_scenario(generate(
            GenParams("multilevel", nodes=nodes, seed=seed, jobs=16))))
    assert True in checked and False in checked


def test_a_failing_pass2_pushes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the prediction says pass 2 fails, no leaf is pushed (the work is skipped)."""
    pushes: list[int] = []
    skipped: list[bool] = []
    push = Run._push
    completes = Run._completes

    def counted_push(self: Run, dom: object, task: object) -> None:
        pushes.append(1)
        push(self, dom, task)  # type: ignore[arg-type]

    def noted(self: Run, total: np.ndarray) -> bool:
        answer = completes(self, total)
        if not answer:
            skipped.append(True)
            pushes.clear()
        return answer

    def pass2_then_count(self: Run) -> None:
        before = len(skipped)
        pass2(self)
        if len(skipped) > before:
            assert pushes == []

    pass2 = Run._pass2
    monkeypatch.setattr(Run, "_push", counted_push)
    monkeypatch.setattr(Run, "_completes", noted)
    monkeypatch.setattr(Run, "_pass2", pass2_then_count)
    for nodes, seed in ((512, 0), (512, 1), (512, 2)):
        greedy_plan(compile_scenario(generate(
            GenParams("multilevel", nodes=nodes, seed=seed, jobs=16))))
    assert skipped
