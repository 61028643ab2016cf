"""Mutable cluster state during one greedy pass over a batch of jobs."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from models.compiled import UNHEALTHY, Problem


@dataclass
class ClusterState:
    """Free chips per node as jobs of the batch commit one after another.

    A node is *whole-free* for a later job when all its chips are still free and it is
    not unhealthy.  Strategies read this state and never change it; the batch driver
    commits a job's answer with :meth:`commit` only when the whole gang fits.
    """

    free: np.ndarray  # int32 chips free per node
    # Jobs of this batch placed so far: job index → node per rank.  The inference paths
    # read it (an instance placed earlier in the session draws its service's next ones).
    placed: dict[int, np.ndarray] = field(default_factory=dict)

    @classmethod
    def initial(cls, problem: Problem) -> ClusterState:
        """The state before any pending job is placed."""
        return cls(problem.free.astype(np.int32).copy())

    def copy(self) -> ClusterState:
        """An independent copy."""
        return ClusterState(self.free.copy(), dict(self.placed))

    def whole_free(self, problem: Problem) -> np.ndarray:
        """Nodes still completely free and not unhealthy."""
        return (self.free == problem.npus) & (problem.health != UNHEALTHY)

    def commit(self, nodes: np.ndarray, npu_per_task: int) -> None:
        """Take ``npu_per_task`` chips on each node of ``nodes`` (one entry per rank)."""
        np.subtract.at(self.free, np.asarray(nodes, dtype=np.int64), npu_per_task)
        if (self.free < 0).any():
            raise AssertionError("greedy over-committed a node; this is a bug")
