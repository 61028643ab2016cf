"""Multilevel greedy: placements on generated batches are those of the reference port.

``heuristics/multilevel/`` is a faithful port of upstream's greedy; its speed-ups (pass-2
domains that cannot complete a group skipped, repairs that cannot escalate
stopped at the first failure, incremental leaf counts, integer leaf keys, ...) must not
change one placement.  ``tests/data/multilevel_golden.json`` holds, per generated batch, a
digest of every placement and reason: the greedy batch (``greedy_plan``) and every job
alone on the initial state (``place_multilevel``).  The digests were written by the code
before the speed-ups (commit ``ab03e28``); the batches cover 512–2,048 nodes, fault jobs
with escalating repairs, returning jobs with origin preferences, rescaled and expired
jobs, busy clusters, and the generator's ``reservedNode`` 1.

Regenerate (only when an answer is meant to change, saying why in the commit)::

    python -m tests.heuristics.multilevel.test_multilevel_golden
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.generators import GenParams, generate
from heuristics.greedy import greedy_plan
from heuristics.multilevel import place_multilevel
from heuristics.state import ClusterState
from models.compiled import compile_scenario

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "multilevel_golden.json"


def _cases() -> dict[str, GenParams]:
    out: dict[str, GenParams] = {}
    for nodes, seed in ((512, 0), (512, 1), (1024, 2), (2048, 3)):
        options: dict[str, dict[str, Any]] = {
            "batch": {"jobs": 11},
            "faults": {"jobs": 8, "fault_prob": 0.9, "returning": 0.9,
                       "evict_fraction": 0.3, "taken_fraction": 0.2},
            "busy": {"jobs": 6, "occupancy": 0.8, "returning": 1.0, "scale_change": 0.5,
                     "expired": 0.0},
        }
        for label, extra in options.items():
            params = GenParams("multilevel", nodes=nodes, seed=seed, **extra)
            out[f"n{nodes}-s{seed}-{label}"] = params
    return out


def _digest(params: GenParams) -> tuple[str, dict[str, int]]:
    """Digest of every placement and reason, and what the batch exercises."""
    problem = compile_scenario(generate(params))
    plan = greedy_plan(problem)
    initial = ClusterState.initial(problem)
    alone = [place_multilevel(problem, j, initial) for j in problem.queue]
    record = {
        "plan": [None if n is None else [int(x) for x in n] for n in plan.nodes],
        "reasons": list(plan.reasons),
        "alone": [[None if o.nodes is None else o.nodes.tolist(), o.reason] for o in alone],
    }
    text = json.dumps(record, sort_keys=True)
    jobs = [problem.jobs[j] for j in problem.queue]
    seen = {
        "placed": sum(n is not None for n in plan.nodes),
        "fault-jobs": sum(bool(job.fault.any()) for job in jobs),
        "returning": sum(bool((job.preferred >= 0).any()) for job in jobs),
    }
    return hashlib.sha256(text.encode()).hexdigest(), seen


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_placements_match_reference(name: str) -> None:
    expected = json.loads(GOLDEN.read_text())
    digest, _seen = _digest(CASES[name])
    assert digest == expected[name], (
        f"multilevel greedy placements changed on generated batch {name}")


def test_cases_exercise_repairs_and_preferences() -> None:
    # the digests only protect what the batches exercise: fault jobs, returning jobs
    totals = {"placed": 0, "fault-jobs": 0, "returning": 0}
    for name in ("n512-s0-faults", "n1024-s2-busy"):
        _digest_value, seen = _digest(CASES[name])
        for key, value in seen.items():
            totals[key] += value
    assert totals["placed"] > 0
    assert totals["fault-jobs"] > 0
    assert totals["returning"] > 0


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps({name: _digest(p)[0] for name, p in sorted(CASES.items())},
                                 indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
