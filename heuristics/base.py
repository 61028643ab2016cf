"""The interface every greedy strategy implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from heuristics.state import ClusterState
from models.compiled import Problem


@dataclass(frozen=True)
class JobOutcome:
    """A strategy's answer for one job: a node per rank, or a reason."""

    nodes: np.ndarray | None
    reason: str | None = None

    @classmethod
    def fail(cls, reason: str) -> JobOutcome:
        """An unplaced job with an actionable reason."""
        return cls(None, reason)


class Strategy(Protocol):
    """Place job ``j`` of ``problem`` on the nodes ``state`` still offers.

    The strategy must not mutate ``state``.  It returns a node index per rank (rank
    ``r`` at position ``r``) satisfying every hard constraint of the job's family, or a
    reason.  Ties are broken deterministically (documented per strategy).
    """

    def __call__(self, problem: Problem, j: int, state: ClusterState) -> JobOutcome: ...
