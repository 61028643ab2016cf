"""One list of a scenario's pending jobs, whatever their kind.

A scenario lists its pending jobs in two places: ``jobs`` (whole-card NPU jobs of every
family) and ``vnpu-jobs`` (dynamic vNPU jobs, ``huawei.com/npu-core``).  Every door that
counts, names or answers jobs (validate, plan summaries, the service's answers, sweeps,
replays, the simulator) walks :func:`pending_jobs` so that each job is seen exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from models.scenario import Scenario


class JobKind(StrEnum):
    """Which list of the scenario a pending job comes from."""

    NPU = "npu"  # ``jobs``: whole NPUs (every policy family)
    VNPU = "vnpu"  # ``vnpu-jobs``: AI-core slices or whole cards of a vNPU node


@dataclass(frozen=True, slots=True)
class PendingJob:
    """One pending job of either kind."""

    name: str
    kind: JobKind
    tasks: int
    priority: int


def pending_jobs(scenario: Scenario) -> list[PendingJob]:
    """Every pending job of ``scenario``: the ``jobs`` in file order, then the
    ``vnpu-jobs`` in file order."""
    out = [PendingJob(job.name, JobKind.NPU, job.tasks, job.priority) for job in scenario.jobs]
    out += [PendingJob(job.name, JobKind.VNPU, job.tasks, job.priority)
            for job in scenario.vnpu_jobs]
    return out


def job_names(scenario: Scenario) -> list[str]:
    """The names of every pending job (:func:`pending_jobs` order)."""
    return [job.name for job in scenario.jobs] + [job.name for job in scenario.vnpu_jobs]


def job_count(scenario: Scenario) -> int:
    """How many pending jobs ``scenario`` has, of both kinds."""
    return len(scenario.jobs) + len(scenario.vnpu_jobs)
