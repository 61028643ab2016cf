"""``benchmarks.session_reuse`` on a small cluster under a deterministic budget: the three
variants answer alike, an unchanged session carries the kept model over, and the summary
adds up (which deltas keep a model: ``tests/solver/model/test_model_reuse.py``)."""

from __future__ import annotations

from benchmarks.session_reuse import VARIANTS, measure


def test_kept_models_answer_as_the_other_variants_and_are_carried_over() -> None:
    out = measure("950", 128, 3, 60.0, 0, 1, jobs=3, deterministic_time=0.2)
    rows = out["sessions"]
    assert [r["session"] for r in rows] == [1, 2, 3]
    for row in rows:
        assert set(VARIANTS) <= set(row)
        assert row["models"]["objective"] == row["answer"]["objective"]
    assert rows[0]["models"]["models-carried"] == 0
    summary = out["summary"]
    assert summary["models-minus-answer"] == [0, 0, 0]
    assert summary["models-carried"] == sum(r["models"]["models-carried"] for r in rows[1:])
    assert rows[1]["models"]["models-carried"] > 0  # nothing changed: the model is kept
    assert rows[1]["models"]["models-built"] == 0
