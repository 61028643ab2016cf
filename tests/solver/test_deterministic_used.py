"""CP-SAT's deterministic time used, summed over a run's phases (proofs are
compared by it, never by the clock)."""

from __future__ import annotations

import re
from typing import Any

from benchmarks.generators import GenParams, generate_case
from benchmarks.sweep import Cell, Source, run_cell
from heuristics.greedy import greedy_plan
from models.compiled import Problem, compile_scenario
from models.objective import resolve_weights
from solver.engine import solve_cpsat
from solver.facade import solve
from solver.request import SolveRequest


def _generated(family: str, nodes: int, seed: int, jobs: int) -> Problem:
    params = GenParams(family, nodes=nodes, seed=seed, jobs=jobs)
    return compile_scenario(generate_case(params).scenario)


def test_hybrid_run_sums_its_phases_and_is_reproducible() -> None:
    problem = _generated("850", 256, 4, 3)
    weights = resolve_weights(problem)
    greedy = greedy_plan(problem)
    runs = [solve_cpsat(SolveRequest(problem, greedy, weights, time_limit=30.0, workers=1,
                                     seed=0, deterministic_time=6.0, warm_start=greedy,
                                     mode="hybrid"))
            for _ in range(2)]
    used = runs[0].deterministic_seconds
    assert used is not None and used > 0
    assert runs[1].deterministic_seconds == used  # one worker, a seed: no clock in it
    phases = [float(x) for p in runs[0].phases
              for x in re.findall(r"([0-9.]+) deterministic s,", p)]
    assert len(phases) == 3  # neighbourhoods, their wide steps, then the whole batch
    assert abs(sum(phases) - used) <= 0.001 * len(phases)


def test_solve_result_and_sweep_row_carry_it() -> None:
    params = GenParams("950", nodes=128, seed=2, jobs=4)
    problem = compile_scenario(generate_case(params).scenario)
    result = solve(problem, engine="cpsat", time_limit=30.0, workers=1, seed=0,
                   deterministic_time=1.0)
    assert result.solver_deterministic_seconds is not None
    assert 0 < result.solver_deterministic_seconds <= 1.0 + 1e-6
    assert solve(problem, engine="greedy").solver_deterministic_seconds is None
    source = Source("x", "generate", "d", params.to_dict())
    row = run_cell(Cell(source, (), "cpsat", 30.0, 0, deterministic_time=1.0))
    assert float(row["solver-deterministic-seconds"]) == round(
        result.solver_deterministic_seconds, 6)



def test_vnpu_model_is_counted(monkeypatch: Any) -> None:
    """The vNPU model's deterministic time is added to the other jobs' search."""
    import solver.engine as engine
    import solver.model.vnpu as vnpu
    from solver.doors import example_path, load_problem

    used: dict[str, float] = {}
    real_main, real_vnpu = engine.solve_cpsat, vnpu.solve_vnpu_cpsat

    def main(request: SolveRequest) -> Any:
        outcome = real_main(request)
        used["main"] = outcome.deterministic_seconds
        return outcome

    def chips(*args: Any, **kwargs: Any) -> Any:
        outcome = real_vnpu(*args, **kwargs)
        used["vnpu"] = outcome.deterministic_seconds
        return outcome

    monkeypatch.setattr(engine, "solve_cpsat", main)
    monkeypatch.setattr(vnpu, "solve_vnpu_cpsat", chips)
    problem = load_problem(str(example_path("vnpu-inference")))
    result = solve(problem, engine="cpsat", time_limit=30.0, workers=1, seed=0,
                   deterministic_time=2.0)
    assert used["main"] > 0 and used["vnpu"] > 0
    assert result.solver_deterministic_seconds == used["main"] + used["vnpu"]
