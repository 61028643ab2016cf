"""CP-SAT against the validator and the objective on generated realistic clusters.

Small but realistic instances from the benchmark generators (caches from real earlier
placements, evictions, faults, batches with priorities).  These found bugs that the tiny
hypothesis scenarios did not: a UB-memory domain the model ignored, a group explicit in
two domains, uncounted children of counted groups in three-level jobs, and a fault rank
pushed onto its old node by the post-pass.
"""

from __future__ import annotations

import pytest

from benchmarks.generators import FAMILIES, GenParams, generate
from models.compiled import compile_scenario
from solver.facade import solve
from tests.solver.answers import assert_sound_answer

CASES = [
    GenParams(family=family, nodes=nodes, seed=seed, jobs=jobs)
    for family in FAMILIES
    for nodes, jobs, seed in ((64, 1, 11), (128, 4, 12), (128, 8, 13))
] + [
    GenParams(family="multilevel", nodes=256, seed=951844, jobs=4),
    GenParams(family="950", nodes=128, seed=1, jobs=8),
    GenParams(family="950", nodes=512, seed=7, jobs=1, soft_prob=0.5),
    GenParams(family="850", nodes=256, seed=5, jobs=4, soft_prob=0.5),
]


@pytest.mark.parametrize("params", CASES, ids=lambda p: f"{p.family}-{p.nodes}-{p.jobs}-{p.seed}")
def test_generated_instance(params: GenParams) -> None:
    problem = compile_scenario(generate(params))
    result = solve(problem, engine="cpsat", time_limit=30.0, workers=1, seed=0,
                   deterministic_time=2.0)
    assert_sound_answer(problem, result)
