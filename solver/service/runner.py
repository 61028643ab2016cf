"""Deadline-bound solves off the event loop, with admission control.

Design (measured in the README, section "Planning service"):

* Solves run in threads, in two lanes of ``workers`` threads each: greedy's answer in
  one, the full solve (CP-SAT) in the other, so a request's greedy answer is never queued
  behind another request's long CP-SAT search.  Threads, not a process pool: a stored
  cluster's compiled :class:`~models.compiled.Problem` (and later whatever the CP-SAT
  layer caches) lives in this process and is used as is, while a process pool would
  pickle it into another process on every call; CP-SAT's search runs in C++ without the
  GIL; and the facade is becoming a hard deadline.
* Every solve first computes greedy's answer (``engine="greedy"``) and keeps it as the
  fallback, then, for ``auto``/``cpsat``, calls :func:`solver.facade.solve` with what is
  left of the budget minus a slack.  The request handler waits until its deadline minus a
  reply margin and then answers with the best answer it has: the full solve's, else
  greedy's, else (greedy itself did not finish) a valid placement that places nothing.
  No answer is ever sent after the deadline because of a slow solve.
* A thread cannot be killed: a solve abandoned at the deadline keeps its CPU until the
  facade returns.  Such solves stay counted in :attr:`SolveRunner.in_flight` until they
  really end, and admission refuses new work (503 + ``Retry-After``) once ``workers +
  queue`` solves are in flight, so abandoned work cannot pile up.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from models.check import check
from models.compiled import Problem
from models.placement import JobPlacement, PlacementFile, Status
from solver.facade import Result, solve

log = logging.getLogger("npu_place.service")

SolveFn = Callable[..., Result]

#: The answer came from the full solve, greedy's fallback, or nothing finished in time.
SOURCE_SOLVE = "solve"
SOURCE_GREEDY = "greedy-fallback"
SOURCE_EMPTY = "empty"


class Saturated(Exception):
    """Too many solves in flight; retry after :attr:`retry_after` seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__("the planner is saturated")
        self.retry_after = retry_after


@dataclass
class _Slot:
    """What the worker thread has produced so far (read by the event loop)."""

    greedy: Result | None = None
    final: Result | None = None
    error: BaseException | None = None
    greedy_seconds: float | None = None
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class Answer:
    """A plan answer and how it was obtained."""

    placement: PlacementFile
    source: str
    result: Result | None
    greedy_objective: int | None
    solve_seconds: float


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins
        return False


class SolveRunner:
    """Runs solves in worker threads and answers on time.

    Parameters
    ----------
    workers
        Solver threads (solves running at once).
    queue
        Further solves that may wait for a thread; beyond ``workers + queue`` in flight,
        :meth:`plan` raises :class:`Saturated`.
    reply_margin
        Seconds kept between the handler's cut-off and the deadline, for serialising and
        sending the answer.
    solve_slack
        Seconds (plus 5 % of the budget) by which the facade's own limit is set below the
        cut-off, so that a solve normally returns before the handler gives up on it.
    solve_fn
        The facade (tests inject a failing one).
    """

    def __init__(self, workers: int = 1, queue: int = 2, reply_margin: float = 0.02,
                 solve_slack: float = 0.05, solve_fn: SolveFn = solve) -> None:
        self.workers = workers
        self.capacity = workers + queue
        self.reply_margin = reply_margin
        self.solve_slack = solve_slack
        self.solve_fn = solve_fn
        # two lanes: greedy answers are never queued behind long CP-SAT searches
        self._greedy_pool = ThreadPoolExecutor(max_workers=workers,
                                               thread_name_prefix="npu-greedy")
        self._solve_pool = ThreadPoolExecutor(max_workers=workers,
                                              thread_name_prefix="npu-solve")
        self._lock = threading.Lock()
        self.in_flight = 0  # accepted solves not finished yet (abandoned ones included)
        self.abandoned = 0  # of those, the ones whose request was already answered
        self._cache_kw = _accepts(solve_fn, "cache")

    # ------------------------------------------------------------------ admission
    def _admit(self) -> None:
        with self._lock:
            if self.in_flight >= self.capacity:
                raise Saturated(retry_after=1)
            self.in_flight += 1

    def _release(self, abandoned: bool) -> None:
        with self._lock:
            self.in_flight -= 1
            if abandoned:
                self.abandoned -= 1

    @property
    def saturated(self) -> bool:
        """True when a new solve would be refused."""
        return self.in_flight >= self.capacity

    # ------------------------------------------------------------------ the work
    def _greedy_stage(self, slot: _Slot, problem: Problem, engine: str, deadline: float,
                      options: dict[str, Any], finish: Callable[[], None]) -> None:
        try:
            started = time.perf_counter()
            if deadline - started <= 0:
                finish()  # waited in the queue past its deadline: nothing useful to do
                return
            slot.greedy = self.solve_fn(problem, engine="greedy", time_limit=max(
                0.001, deadline - started), **options)
            slot.greedy_seconds = time.perf_counter() - started
            if engine == "greedy":
                slot.final = slot.greedy
                finish()
                return
            self._solve_pool.submit(self._full_stage, slot, problem, engine, deadline,
                                    options, finish)
        except BaseException as exc:  # reported to the request, never kills the thread
            slot.error = exc
            log.exception("greedy failed")
            finish()

    def _full_stage(self, slot: _Slot, problem: Problem, engine: str, deadline: float,
                    options: dict[str, Any], finish: Callable[[], None]) -> None:
        try:
            remaining = deadline - time.perf_counter()
            budget = remaining - self.solve_slack - 0.05 * remaining
            # the facade runs greedy again before CP-SAT: not worth starting without room
            if budget <= 1.5 * (slot.greedy_seconds or 0.0) + 0.01:
                slot.final = slot.greedy
                return
            slot.final = self.solve_fn(problem, engine=engine, time_limit=budget, **options)
        except BaseException as exc:
            slot.error = exc
            log.exception("solve failed")
        finally:
            finish()

    async def plan(self, problem: Problem, *, engine: str, deadline: float, seed: int = 0,
                   deterministic_time: float | None = None, solver_cache: Any = None,
                   hurry: asyncio.Event | None = None) -> Answer:
        """Plan ``problem`` and answer by ``deadline`` (a ``time.perf_counter`` value).

        Parameters
        ----------
        problem
            The compiled scenario.
        engine
            ``greedy``, ``cpsat`` or ``auto``.
        deadline
            When the answer must be on the wire.
        seed, deterministic_time
            Passed to the facade.
        solver_cache
            The seam for a model-reuse cache: passed as ``cache=`` when the facade takes it.
        hurry
            When set (graceful shutdown), answer as soon as greedy's answer exists.

        Raises
        ------
        Saturated
            When ``workers + queue`` solves are already in flight.
        Exception
            Whatever the solve raised, when it failed before any answer existed.
        """
        self._admit()
        slot = _Slot()
        options: dict[str, Any] = {"seed": seed, "deterministic_time": deterministic_time}
        if self._cache_kw and solver_cache is not None:
            options["cache"] = solver_cache
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        state = {"abandoned": False}

        def on_done() -> None:  # on the loop, when the work ends (maybe long after)
            self._release(state["abandoned"])
            if not done.done():
                done.set_result(None)

        def finish() -> None:  # in a worker thread
            slot.done.set()
            with contextlib.suppress(RuntimeError):  # a closed loop: the process exits
                loop.call_soon_threadsafe(on_done)

        try:
            self._greedy_pool.submit(self._greedy_stage, slot, problem, engine, deadline,
                                     options, finish)
        except BaseException:
            self._release(False)
            raise
        cutoff = deadline - self.reply_margin
        hurry_task = asyncio.ensure_future(hurry.wait()) if hurry is not None else None
        try:
            while not slot.done.is_set():
                hurrying = hurry is not None and hurry.is_set()
                if hurrying and slot.greedy is not None:
                    break
                timeout = cutoff - time.perf_counter()
                if timeout <= 0:
                    break
                waiters: set[asyncio.Future[Any]] = {done}
                if hurrying:
                    timeout = min(timeout, 0.01)  # poll for greedy's answer
                elif hurry_task is not None:
                    waiters.add(hurry_task)
                await asyncio.wait(waiters, timeout=timeout,
                                   return_when=asyncio.FIRST_COMPLETED)
        finally:
            if hurry_task is not None and not hurry_task.done():
                hurry_task.cancel()
            abandoned = not slot.done.is_set()
            if abandoned:
                state["abandoned"] = True
                self.abandoned += 1
        if slot.error is not None and slot.greedy is None:
            raise slot.error
        return self._answer(problem, slot, engine, abandoned)

    def _answer(self, problem: Problem, slot: _Slot, engine: str, abandoned: bool) -> Answer:
        greedy_obj = slot.greedy.objective if slot.greedy is not None else None
        if slot.final is not None:
            return Answer(slot.final.placement, SOURCE_SOLVE, slot.final, greedy_obj,
                          slot.final.wall_seconds)
        if slot.greedy is not None:
            placement = slot.greedy.placement.model_copy(deep=True)
            why = (f"the solver failed ({type(slot.error).__name__}: {slot.error})"
                   if slot.error is not None else
                   "the full solve did not finish within the request's time limit")
            placement.notes = [*placement.notes, f"{why}; answered with greedy's plan"]
            return Answer(placement, SOURCE_GREEDY, slot.greedy, greedy_obj,
                          slot.greedy.wall_seconds)
        return Answer(empty_placement(problem), SOURCE_EMPTY, None, None, 0.0)

    def shutdown(self) -> None:
        """Stop taking work; running solves finish in their threads."""
        self._greedy_pool.shutdown(wait=False, cancel_futures=True)
        self._solve_pool.shutdown(wait=False, cancel_futures=True)


def empty_placement(problem: Problem) -> PlacementFile:
    """A valid answer that places nothing (no engine finished within the time limit)."""
    reason = ("no answer within the request's time limit: not even greedy finished; "
              "retry with a larger time-limit")
    placement = PlacementFile(
        engine="none", status=Status.GREEDY, objective=None,
        jobs=[JobPlacement(name=job.name, placed=False, reason=reason) for job in problem.jobs],
        notes=[reason])
    assert not check(problem, placement)  # placing nothing breaks no hard constraint
    return placement
