"""The CP-SAT engine's entry: :func:`solve_cpsat` runs one
:class:`~solver.request.SolveRequest` within its deadline.

Wall-clock guarantee: model building checks the clock between phases, and the search
runs in a worker thread with CP-SAT's own limit; if it has not returned at the deadline
the search is stopped, and if it still does not return within a small margin the call
gives up on it and returns without a plan (the facade then answers with greedy).

Inside the worker thread the request runs its phase plan (:func:`solver.phases.run_phases`:
which searches, in what order, on what budget), each search a CP-SAT run of
:mod:`solver.cpsat`; afterwards the bound is tightened (:mod:`solver.bounds`).
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import time
import traceback
from dataclasses import replace

import numpy as np

from models.compiled import Problem
from models.placement import Status
from models.plan import Plan
from solver.bounds.hit_lp import tighten_bound
from solver.explain import fill_reasons
from solver.model.cancel import BuildCancelled, CancelToken, cancellable, retain
from solver.model.reuse import ModelCache
from solver.phases import SEARCH_MODES, run_phases, search_mode
from solver.request import CpsatOutcome, SearchControl, SolveRequest

log = logging.getLogger("npu_place.cpsat")

#: Name of the thread a :func:`solve_cpsat` call searches in (it is joined before the call
#: returns unless CP-SAT ignores a stop inside one presolve step; see docs/cpsat.md).
WORKER_THREAD_NAME = "npu-place-cpsat"
#: Building is cancelled this long before the deadline (at most 10 % of the budget): the
#: worker then unwinds and frees a model of up to ~100k variables inside the deadline.
CANCEL_LEAD_SECONDS = 0.04
#: How long the caller waits for a cancelled worker before it gives up on it (a worker
#: that ignores cancellation is a bug; the deadline wins and a BUG note says so).
GIVE_UP_SECONDS = 0.02


def solve_cpsat(request: SolveRequest) -> CpsatOutcome:
    """Run CP-SAT on ``request``, warm-started from its hint, within its ``time_limit``
    (counted from ``request.started``, when the request was made).

    Building, hinting, searching and recovering the plan run in one worker thread that
    is always joined before this function returns: the search is stopped at the
    request's ``search_end`` (``stop_search``) and building or recovery is cancelled at
    checkpoints (:mod:`solver.model.cancel`), so no work started here outlives the call.

    Partly running ordinary jobs are solved as ordinary jobs of their pending ranks
    (:func:`ordinary_pending_view`: same terms, so the same objective), and
    the plan is mapped back with the running ranks on their nodes.

    Returns
    -------
    CpsatOutcome
        The plan (``None`` when the solver found nothing in time), status, objective and
        bound as CP-SAT reports them.
    """
    problem = request.problem
    view = ordinary_pending_view(problem)
    if view is not None:
        vproblem, subs = view
        viewed = solve_cpsat(replace(
            request, problem=vproblem, anchor=_to_view(request.anchor, subs),
            warm_start=(None if request.warm_start is None
                        else _to_view(request.warm_start, subs))))
        if viewed.plan is None:
            return viewed
        return replace(viewed, plan=_from_view(viewed.plan, problem, subs))
    # a cache of this run's own when the caller keeps none: repeated steps are handed
    # back, not built again (same proto; solver.model.reuse)
    own_models = request.models is None
    cache = ModelCache() if request.models is None else request.models
    mark = cache.mark()
    mode = request.mode
    if mode is None:
        mode = search_mode(problem)
    elif mode not in SEARCH_MODES:
        raise ValueError(f"unknown search mode {mode!r}; choose one of {SEARCH_MODES}")
    control = request.control
    request = replace(request, mode=mode, models=cache)
    box: dict[str, object] = {}
    # building and recovery stop a little before the deadline, so that unwinding the
    # worker fits inside it even on a busy machine
    token = CancelToken(request.deadline - min(CANCEL_LEAD_SECONDS, 0.1 * request.time_limit))

    def work() -> None:
        try:
            with cancellable(token):
                box["outcome"] = tighten_bound(request, run_phases(request))
        except BuildCancelled as exc:
            retain(exc)  # its frames hold the half-built model: freed after the deadline
            box["outcome"] = CpsatOutcome(
                None, Status.GREEDY, None, request.control.bound,
                time.perf_counter() - request.started,
                ["the CP-SAT model was not ready within the budget; building was cancelled"],
                None, "NOT_RUN", lp_bound=request.control.bound)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc
        finally:
            _untrack(threading.current_thread())

    thread = threading.Thread(target=work, name=WORKER_THREAD_NAME, daemon=True)
    _track(thread, token, control)
    thread.start()
    thread.join(max(0.0, request.search_end - time.perf_counter()))
    if thread.is_alive():
        control.stop()  # CP-SAT stops within milliseconds when asked
        thread.join(max(0.0, request.deadline - GIVE_UP_SECONDS - time.perf_counter()))
    if thread.is_alive():
        token.cancel()
        thread.join(GIVE_UP_SECONDS)
    if thread.is_alive():
        return _abandoned(request, thread, cache, mark)
    _untrack(thread)
    counts = cache.counts_since(mark)
    if own_models:
        cache.clear()  # freed at a safe time (cancel.retain), never just before a deadline
    error = box.get("error")
    if isinstance(error, BaseException):
        raise error
    outcome = box["outcome"]
    assert isinstance(outcome, CpsatOutcome)
    return replace(outcome, models=counts)


def ordinary_pending_view(problem: Problem) -> tuple[Problem, dict[int, np.ndarray]] | None:
    """``problem`` with every partly running ordinary job replaced by the view of its
    pending ranks (an ordinary job of those ranks, with their cache entries and fault
    flags), and the pending ranks per such job; ``None`` when there is none.

    Every objective term of an ordinary job depends on its placed ranks only (hits, fault
    returns, sub-healthy hosts, partly used hosts), so a plan of the view scores exactly
    as the full plan does.  Other partly running jobs stay as they are (pinned).
    """
    subs = {job.index: np.flatnonzero(job.to_place) for job in problem.jobs
            if job.partly_running and not job.rules.grouped}
    if not subs:
        return None
    jobs = tuple(
        replace(job, tasks=len(subs[job.index]), origin=job.origin[subs[job.index]],
                fault=job.fault[subs[job.index]], running=np.zeros(0, dtype=np.int32))
        if job.index in subs else job for job in problem.jobs)
    return replace(problem, jobs=jobs), subs


def _to_view(plan: Plan, subs: dict[int, np.ndarray]) -> Plan:
    nodes = [None if n is None else (np.asarray(n)[subs[j]] if j in subs else n)
             for j, n in enumerate(plan.nodes)]
    return Plan(nodes, list(plan.reasons))


def _from_view(plan: Plan, problem: Problem, subs: dict[int, np.ndarray]) -> Plan:
    nodes: list[np.ndarray | None] = []
    for j, n in enumerate(plan.nodes):
        if n is None or j not in subs:
            nodes.append(n)
            continue
        full = problem.jobs[j].running.astype(np.int32).copy()
        full[subs[j]] = np.asarray(n, dtype=np.int32)
        nodes.append(full)
    return Plan(nodes, list(plan.reasons))


def _abandoned(request: SolveRequest, thread: threading.Thread, cache: ModelCache,
               mark: tuple[int, int, int]) -> CpsatOutcome:
    """The outcome of a call that gives up on its worker ``thread`` at the deadline: the
    neighbourhood search's last published answer, else no plan; with the bound computed
    before the neighbourhoods, if any.

    CP-SAT's loading and presolve check for a stop only between steps, which can take
    longer than the margin on large models or a busy machine.
    """
    frame = sys._current_frames().get(thread.ident or -1)
    stack = traceback.extract_stack(frame) if frame is not None else []
    # the innermost frame that is not the thread machinery's own waiting
    own = [f for f in stack if not f.filename.endswith("threading.py")] or stack
    last = f"{own[-1].name} ({own[-1].filename}:{own[-1].lineno})" if own else "?"
    # one line for the operator; the stack only for --log-level debug
    log.warning("the CP-SAT worker did not stop at its deadline; abandoned in %s", last)
    log.debug("where the abandoned CP-SAT worker was:\n%s",
              "".join(traceback.format_list(stack[-3:])))
    note = ("CP-SAT did not stop within its budget (it was loading or presolving a "
            "model); the call returned without waiting, and the search ends on its own")
    # counted before the models go: no later session may hint a model that the
    # search still reads
    counts = cache.counts_since(mark)
    cache.clear()
    published = request.control.published
    if published is not None:
        plan, objective = published
        bound = request.control.bound
        return CpsatOutcome(fill_reasons(request.problem, plan), Status.FEASIBLE, objective,
                            bound, time.perf_counter() - request.started, [note], None, "LNS",
                            models=counts, lp_bound=bound)
    return CpsatOutcome(None, Status.GREEDY, None, request.control.bound,
                        time.perf_counter() - request.started, [note], None, "OVERRAN",
                        models=counts, lp_bound=request.control.bound)


#: Worker threads not yet ended, with what stops them (see :func:`_stop_workers_at_exit`).
_LIVE: dict[threading.Thread, tuple[CancelToken, SearchControl]] = {}
_LIVE_LOCK = threading.Lock()


def _track(thread: threading.Thread, token: CancelToken, control: SearchControl) -> None:
    """Count ``thread`` as live; the first live worker registers the exit hook."""
    with _LIVE_LOCK:
        if not _LIVE:
            atexit.register(_stop_workers_at_exit)
        _LIVE[thread] = (token, control)


def _untrack(thread: threading.Thread) -> None:
    """``thread`` has ended (or was joined); the last live worker removes the exit hook."""
    with _LIVE_LOCK:
        if _LIVE.pop(thread, None) is not None and not _LIVE:
            atexit.unregister(_stop_workers_at_exit)


def live_workers() -> int:
    """CP-SAT worker threads alive now; :func:`_stop_workers_at_exit` is registered with
    :mod:`atexit` exactly while there is one (not by importing this module, and not after
    the last worker ends)."""
    with _LIVE_LOCK:
        return len(_LIVE)


def _stop_workers_at_exit() -> None:
    """Stop and join any abandoned worker before the interpreter exits.

    A CP-SAT search still running in a thread when the interpreter tears down aborts the
    process ("terminate called without an active exception").
    """
    with _LIVE_LOCK:
        live = list(_LIVE.items())
    for thread, (token, control) in live:
        control.stopped.set()
        token.cancel()
        solver = control.solver
        if solver is not None:
            solver.stop_search()
        thread.join(10.0)
