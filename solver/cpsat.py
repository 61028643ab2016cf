"""CP-SAT engine entry point (placeholder until the model lands)."""

from __future__ import annotations

from dataclasses import dataclass, field

from models.compiled import Problem
from models.objective import ResolvedWeights
from models.placement import Status
from models.plan import Plan


@dataclass
class CpsatOutcome:
    """What the CP-SAT run produced."""

    plan: Plan | None
    status: Status
    objective: int | None
    bound: int | None
    wall_seconds: float
    notes: list[str] = field(default_factory=list)


def solve_cpsat(problem: Problem, hint: Plan, weights: ResolvedWeights, *, time_limit: float,
                workers: int, seed: int, deterministic_limit: float | None = None) -> CpsatOutcome:
    """Run CP-SAT warm-started from ``hint`` within ``time_limit`` seconds."""
    return CpsatOutcome(None, Status.GREEDY, None, None, 0.0,
                        ["the CP-SAT model is not implemented yet; returned greedy"])
