"""What one session's solve leaves for the next: the last answer, as a warm start.

A stored cluster in the planning service changes a little between sessions (a few
nodes' free chips or health, a job submitted or gone).  The last answer — usually
CP-SAT's — is kept by *names* (job → node per rank), so it survives re-indexing by a
structural delta.  The next session translates it to the new problem, completes the jobs
it did not place with greedy's placement, keeps only what the independent validator
accepts, and offers it as a candidate fallback and CP-SAT warm start: the search then
continues from where the last session stopped instead of from greedy.

The cache also keeps the built CP-SAT models of the cluster (:attr:`SolveCache.models`,
:mod:`solver.model.reuse`): a step model whose build would give the same model is taken
from there instead of being built again, so following sessions spend their budget
searching rather than building.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from models.check import check
from models.compiled import JobView, Problem
from models.placement import PlacementFile, Status
from models.plan import Plan, to_placement
from solver.families import solver_family
from solver.model.reuse import ModelCache


@dataclass
class SolveCache:
    """The last answer of a stored cluster (``solve(..., cache=)``).

    Attributes
    ----------
    placed
        Job name → rank → node name of every job the last answer placed (the ranks it
        placed: all of them, or a partly running job's pending ranks).
    engine
        The engine of the last answer (``cpsat``, ``origin-first``, ``greedy``).
    sessions
        Solves that used this cache.
    reused
        Of those, the ones whose warm start came from the last answer.
    models
        The cluster's built CP-SAT models (bounded; :mod:`solver.model.reuse`).
    """

    placed: dict[str, dict[int, str]] = field(default_factory=dict)
    engine: str = "greedy"
    sessions: int = 0
    reused: int = 0
    models: ModelCache = field(default_factory=ModelCache)

    def kept(self) -> None:
        """Count a session whose warm start was the recalled answer (:attr:`reused`)."""
        self.reused += 1

    def remember(self, placement: PlacementFile) -> None:
        """Keep an answer by names (job → node per rank, placed jobs only) and the
        engine that produced it."""
        # by rank id: a partly running job lists only the ranks it places (not 0..k-1)
        self.placed = {job.name: {int(r): node for r, node in job.ranks.items()}
                       for job in placement.jobs if job.placed}
        self.engine = placement.engine

    def recall(self, problem: Problem, complete_with: Plan) -> Plan | None:
        """The last answer translated to ``problem`` and still valid there, else ``None``;
        counts a session (:attr:`sessions`).

        Jobs the last answer placed keep their nodes when the job still asks for the same
        ranks (a partly running job: the same pending ranks; its running ranks keep their
        current nodes) and every node still exists; the other jobs take their ranks from
        ``complete_with`` (greedy's plan).  A partly running A3/850, 950 or multilevel
        job keeps its remembered nodes only where CP-SAT's model of it may put them
        (:func:`solver.model.podscope.within_scope`: its running ranks' anchors and its
        stage rules *now*, which the validator does not check: its ``pending-sessions`` or
        cache entries may have changed since).  If that union breaks a hard constraint,
        the jobs named by the violations go back to ``complete_with``'s placement, once; a
        plan still invalid after that is not used.
        """
        self.sessions += 1
        if not self.placed:
            return None
        remembered: dict[int, np.ndarray] = {}
        for job in problem.jobs:
            nodes = self._nodes(problem, job)
            if nodes is not None:
                remembered[job.index] = nodes
        if not remembered:
            return None
        plan = _merged(problem, remembered, complete_with)
        broken = _violating_jobs(problem, plan)
        if broken is None:
            return plan
        by_name = {job.name: job.index for job in problem.jobs}
        for name in broken:
            if name in by_name:
                remembered.pop(by_name[name], None)
        if not remembered:
            return None
        plan = _merged(problem, remembered, complete_with)
        return plan if _violating_jobs(problem, plan) is None else None


    def _nodes(self, problem: Problem, job: JobView) -> np.ndarray | None:
        """The remembered node per rank of ``job`` in ``problem``, or ``None``."""
        ranks = self.placed.get(job.name)
        if ranks is None:
            return None
        pending = np.flatnonzero(job.to_place).tolist()
        if sorted(ranks) != pending:
            return None
        nodes = np.asarray(job.running if job.partly_running
                           else np.full(job.tasks, -1), dtype=np.int64).copy()
        for r in pending:
            n = problem.node_index.get(ranks[r])
            if n is None:
                return None
            nodes[r] = n
        if job.partly_running and not solver_family(job.family).remembered_fits(
                problem, job, nodes):
            return None
        return nodes


def _merged(problem: Problem, remembered: dict[int, np.ndarray], rest: Plan) -> Plan:
    nodes: list[np.ndarray | None] = []
    reasons: list[str | None] = []
    for j in range(len(problem.jobs)):
        if j in remembered:
            nodes.append(remembered[j])
            reasons.append(None)
        else:
            nodes.append(rest.nodes[j])
            reasons.append(rest.reasons[j] if rest.reasons else None)
    return Plan(nodes, reasons)


def _violating_jobs(problem: Problem, plan: Plan) -> set[str] | None:
    """``None`` when ``plan`` is valid, else the jobs its violations name (may be empty)."""
    # the other jobs only: a scenario's vNPU jobs are solved apart (solver.facade)
    violations = check(problem, to_placement(problem, plan, engine="reuse",
                                             status=Status.FEASIBLE), include_vnpu=False)
    if not violations:
        return None
    return {v.job for v in violations if v.job is not None}
