"""How a plan's answer is made from what its worker answered by the cut-off.

A plan (:class:`~solver.service.messages.PlanRequest`) is answered by its deadline with
the best the worker had sent by then: the final answer, else the last fallback plan (with
a note saying why), else an empty placement once the scenario was parsed, else a 503
(:data:`PARSE_NOT_DONE`, or :data:`PLAN_NOT_STARTED` for a stored cluster, which has no
body).  The answer names the stored cluster's version the worker planned from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from solver.service.messages import FallbackAnswer, FinalAnswer, Parsed, PlanRequest
from solver.service.parsing import BadRequest, empty_placement

#: The answer came from the full solve, greedy's fallback, or nothing finished in time.
SOURCE_SOLVE = "solve"
SOURCE_GREEDY = "greedy-fallback"
SOURCE_EMPTY = "empty"

#: The error of a plan whose time limit passed before its body was parsed, and of a
#: stored cluster's plan whose limit passed before its worker took the cluster's snapshot.
PARSE_NOT_DONE = "time limit passed while parsing"
PLAN_NOT_STARTED = "time limit passed before planning"


class Saturated(Exception):
    """Refused (too many requests in flight, or it could not start before its deadline);
    retry after :attr:`retry_after` seconds.  :attr:`reason` labels the rejection metric,
    :attr:`messages` are the answer's."""

    def __init__(self, retry_after: int = 1, reason: str = "saturated",
                 messages: list[str] | None = None) -> None:
        super().__init__("the planner is saturated")
        self.retry_after = retry_after
        self.reason = reason
        self.messages = messages or ["too many requests in flight; retry later"]


@dataclass
class PlanOutcome:
    """A plan answer and how it was obtained."""

    placement: dict[str, Any]
    source: str
    greedy_objective: int | None
    objective: int | None
    queued_seconds: float | None = None
    #: the full solve failed (raised, or its worker process died): greedy's plan stands
    solve_failed: bool = False
    #: the answering solve's CP-SAT models (``carried``, ``within``, ``built``), when it
    #: ran CP-SAT and its final answer arrived in time
    models: dict[str, int] | None = None
    #: the stored cluster's version the worker planned from (``None``: a plan of a body);
    #: the answer is valid for this version, whatever deltas were applied since
    cluster_version: int | None = None


def plan_outcome(request: PlanRequest, *, parsed: Parsed | None,
                 fallback: FallbackAnswer | None, final: FinalAnswer | None,
                 error: tuple[int, str, list[str]] | None, terminal: bool) -> PlanOutcome:
    """The answer of a plan from its worker's answers so far.

    Parameters
    ----------
    request
        The plan.
    parsed, fallback, final
        The worker's answers (``None``: not sent by the cut-off): the parsed scenario,
        the last fallback plan, the final answer.
    error
        The request's failure (status, error, messages), if it failed.
    terminal
        Whether the request has ended (else its cut-off came first).

    Raises
    ------
    BadRequest
        The worker's failure when nothing else was answered; 503 when the time limit
        passed before the scenario was parsed (or the stored cluster's snapshot taken).
    """
    outcome = _answer(request, parsed, fallback, final, error, terminal)
    outcome.cluster_version = parsed.version if parsed is not None else None
    return outcome


def _answer(request: PlanRequest, parsed: Parsed | None, fallback_answer: FallbackAnswer | None,
            final: FinalAnswer | None, error: tuple[int, str, list[str]] | None,
            terminal: bool) -> PlanOutcome:
    fallback = fallback_answer.placement if fallback_answer is not None else None
    greedy_obj = fallback.get("objective") if fallback is not None else None
    if final is not None and final.placement is not None:
        return PlanOutcome(final.placement, SOURCE_SOLVE, greedy_obj,
                           final.placement.get("objective"), models=final.models)
    if fallback is not None:
        if terminal and final is not None and final.fallback_stands \
                and error is None:
            return PlanOutcome(fallback, SOURCE_SOLVE, greedy_obj, greedy_obj)
        placement = dict(fallback)
        failed_after = final is not None and final.error is not None
        failed = error is not None or failed_after
        if error is not None:  # the worker died (or was killed) during the solve
            why = f"the full solve failed ({'; '.join(error[2]) or error[1]})"
        elif failed_after:
            assert final is not None
            why = f"the solver failed ({final.error})"
        else:
            why = "the full solve did not finish within the request's time limit"
        placement["notes"] = [*placement.get("notes", []),
                              f"{why}; answered with the fallback plan "
                              f"({placement.get('engine', 'greedy')})"]
        return PlanOutcome(placement, SOURCE_GREEDY, greedy_obj, greedy_obj,
                           solve_failed=failed)
    if error is not None:
        raise BadRequest(*error)
    if parsed is not None:
        return PlanOutcome(empty_placement(parsed.jobs), SOURCE_EMPTY, None, None)
    if request.cluster is not None:
        # a stored cluster: there was no body to parse
        raise BadRequest(503, PLAN_NOT_STARTED, [
            "the request's time limit passed before its worker had taken the stored "
            "cluster's snapshot (the worker was busy; retry, or give a longer "
            "time limit)"], {"Retry-After": "1"})
    raise BadRequest(503, PARSE_NOT_DONE, [
        "the request's time limit passed before its body was parsed and checked "
        "(the service is loaded; large clusters should use PUT/PATCH "
        "/v1/clusters/{name} and plan the stored cluster)"], {"Retry-After": "1"})

