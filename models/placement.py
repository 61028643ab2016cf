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

    placed_jobs: int = Field(0, alias="placed-jobs", description="Jobs placed.")
    origin_hits: int = Field(0, alias="origin-hits", description=(
        "Ranks placed on the node of their live cache entry (fault ranks excluded)."))
    origin_candidates: int = Field(0, alias="origin-candidates", description=(
        "Ranks with a live cache entry that are not fault ranks."))
    fault_returns: int = Field(0, alias="fault-returns", description=(
        "Fault ranks placed back on their cached node (bad)."))
    subhealthy_nodes: int = Field(0, alias="subhealthy-nodes", description=(
        "Distinct subhealthy nodes hosting a rank."))
    reserve_used: int = Field(0, alias="reserve-used", description=(
        "Nodes taken from the super pods' (or level1 domains') reserve."))
    fragment_score: int = Field(0, alias="fragment-score", description=(
        "How badly the free capacity left is broken up (upstream's multilevel fragment "
        "score, per placed job's hierarchy); lower is better."))
    affinity_spill: int = Field(0, alias="affinity-spill", description=(
        "Soft-affinity jobs: nodes outside their block's super pod (and window's rack)."))
    achievable_origin_hits: int = Field(0, alias="achievable-origin-hits", description=(
        "An upper bound of origin-hits for this scenario (each job alone)."))
    objective: int = Field(0, description=(
        "The scalar objective (maximised): the weighted sum of the metrics above."))


class JobPlacement(_Model):
    """One job of a placement."""

    name: Name = Field(description="The job's name, as in the scenario.")
    placed: bool = Field(description="Whether every rank of the job is placed.")
    reason: str | None = Field(None, description=(
        "Why an unplaced job is not placed, naming the binding constraint."))
    ranks: dict[str, Name] = Field(default_factory=dict, max_length=MAX_TASKS, description=(
        "rank (a string) -> node of every rank placed (running ranks left out); empty when "
        "not placed."), examples=[{"0": "node-003", "1": "node-004"}])
    blocks: dict[str, list[Name]] = Field(default_factory=dict, max_length=MAX_TASKS,
                                          description=(
        "Super-pod block (or multilevel group) -> its nodes, running ones included."))
    origin_hits: int = Field(0, alias="origin-hits", description="This job's origin hits.")
    origin_candidates: int = Field(0, alias="origin-candidates",
                                   description="This job's origin candidates.")
    # vNPU jobs only: chip IDs per rank, and the ranks given the 310P AI-CPU downgrade
    chips: dict[str, list[int]] = Field(default_factory=dict, max_length=MAX_TASKS,
                                        description="vNPU jobs: rank -> chip IDs.")
    downgraded: list[str] = Field(default_factory=list, max_length=MAX_TASKS, description=(
        "vNPU jobs: the ranks given the 310P AI-CPU downgrade."))


class PlacementFile(_Model):
    """An engine's answer, as written by ``npu-place plan --format json``."""

    engine: str = Field("unknown", description=(
        "The engine whose answer this is: greedy or cpsat."), examples=["cpsat"])
    status: Status = Field(Status.GREEDY, description=(
        "optimal (proved for the objective), feasible (not proved) or greedy (the greedy "
        "answer)."))
    wall_seconds: float = Field(0.0, alias="wall-seconds", allow_inf_nan=False,
                                description="Wall-clock seconds of the solve.")
    objective: int | None = Field(None, description="The answer's objective (maximised).")
    bound: int | None = Field(None, description=(
        "CP-SAT's proven upper bound of the objective (absent for greedy)."))
    gap: float | None = Field(None, allow_inf_nan=False, description=(
        "(bound - objective) / bound."))
    seed: int | None = Field(None, description="CP-SAT's random seed.")
    jobs: list[JobPlacement] = Field(default_factory=list, max_length=MAX_JOBS,
                                     description="Every job of the scenario, placed or not.")
    metrics: MetricsModel | None = Field(None, description="The metrics of the objective.")
    notes: list[str] = Field(default_factory=list, description=(
        "What the engines noticed (a fallback, expired cache entries, ...)."))

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
