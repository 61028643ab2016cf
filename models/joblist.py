"""One list of a scenario's pending jobs, whatever their kind.

A scenario lists its pending jobs in two places: ``jobs`` (whole-card NPU jobs of every
family) and ``vnpu-jobs`` (dynamic vNPU jobs, ``huawei.com/npu-core``).  A door that
counts or names pending jobs (validate, compare, the service's answers, sweep rows) uses
these helpers so that each job is seen exactly once; an engine's answer lists the jobs in
the same order (``jobs``, then ``vnpu-jobs``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from models.scenario import Scenario


def job_names(scenario: Scenario) -> list[str]:
    """The names of every pending job: the ``jobs`` in file order, then the
    ``vnpu-jobs`` in file order."""
    return [job.name for job in scenario.jobs] + [job.name for job in scenario.vnpu_jobs]


def job_count(scenario: Scenario) -> int:
    """How many pending jobs ``scenario`` has, of both kinds."""
    return len(scenario.jobs) + len(scenario.vnpu_jobs)
