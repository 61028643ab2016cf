"""Placement (an engine's answer) and metrics models, with the contract's key names."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from models.limits import MAX_JOBS, MAX_TASKS, Name


class Status(StrEnum):
    """One honest status per result (contract: ``optimal`` / ``feasible`` / ``greedy``)."""

    OPTIMAL = "optimal"  # proved optimal for the objective
    FEASIBLE = "feasible"  # a solution, not proved optimal
    GREEDY = "greedy"  # the greedy answer (engine greedy, or the solver found nothing better)


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class MetricsModel(_Model):
    """Every metric of the objective, as the contract names them."""

    placed_jobs: int = Field(0, alias="placed-jobs")
    origin_hits: int = Field(0, alias="origin-hits")
    origin_candidates: int = Field(0, alias="origin-candidates")
    fault_returns: int = Field(0, alias="fault-returns")
    subhealthy_nodes: int = Field(0, alias="subhealthy-nodes")
    reserve_used: int = Field(0, alias="reserve-used")
    fragment_score: int = Field(0, alias="fragment-score")
    affinity_spill: int = Field(0, alias="affinity-spill")
    achievable_origin_hits: int = Field(0, alias="achievable-origin-hits")
    objective: int = 0


class JobPlacement(_Model):
    """One job of a placement."""

    name: Name
    placed: bool
    reason: str | None = None
    ranks: dict[str, Name] = Field(default_factory=dict, max_length=MAX_TASKS)
    blocks: dict[str, list[Name]] = Field(default_factory=dict, max_length=MAX_TASKS)
    origin_hits: int = Field(0, alias="origin-hits")
    origin_candidates: int = Field(0, alias="origin-candidates")
    # vNPU jobs only: chip IDs per rank, and the ranks given the 310P AI-CPU downgrade
    chips: dict[str, list[int]] = Field(default_factory=dict, max_length=MAX_TASKS)
    downgraded: list[str] = Field(default_factory=list, max_length=MAX_TASKS)


class PlacementFile(_Model):
    """An engine's answer, as written by ``npu-place plan --format json``."""

    engine: str = "unknown"
    status: Status = Status.GREEDY
    wall_seconds: float = Field(0.0, alias="wall-seconds", allow_inf_nan=False)
    objective: int | None = None
    bound: int | None = None
    gap: float | None = Field(None, allow_inf_nan=False)
    seed: int | None = None
    jobs: list[JobPlacement] = Field(default_factory=list, max_length=MAX_JOBS)
    metrics: MetricsModel | None = None
    notes: list[str] = Field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return the placement with the contract's key names."""
        data = self.model_dump(by_alias=True, mode="json")
        for job in data.get("jobs", []):  # additive vNPU keys: absent on other jobs
            if not job.get("chips"):
                job.pop("chips", None)
            if not job.get("downgraded"):
                job.pop("downgraded", None)
        if not data.get("notes"):
            data.pop("notes", None)
        return data

    def job(self, name: str) -> JobPlacement | None:
        """Return the placement of job ``name``, if present."""
        for job in self.jobs:
            if job.name == name:
                return job
        return None
