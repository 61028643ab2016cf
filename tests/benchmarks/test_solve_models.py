"""``benchmarks.solve_models``: a stateless solve keeps its own models for the steps it
repeats, and answers exactly as a solve that builds every step (deterministic
budget, 1 worker, seed 0)."""

from __future__ import annotations

from benchmarks.solve_models import measure


def test_a_solve_reuses_its_repeated_steps_and_answers_the_same() -> None:
    row = measure("950", 2048, 4, 1, 0.5)
    rebuild, own = row["rebuild"], row["per-solve"]
    assert row["identical-placement"]
    assert rebuild["objective"] == own["objective"]
    assert rebuild["models-reused"] == 0 and rebuild["models-built"] == rebuild["steps"] > 1
    assert own["models-reused"] > 0
    assert own["models-reused"] + own["models-built"] == rebuild["models-built"]
