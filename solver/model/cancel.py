"""Cooperative cancellation of model building.

Building the CP-SAT model is Python work in a worker thread; a thread cannot be killed,
so the builders call :func:`checkpoint` at the head of their loops.  The worker runs
inside :func:`cancellable`, which binds a :class:`CancelToken` to the thread's context;
once the token is cancelled, or its deadline has passed, the next checkpoint raises
:class:`BuildCancelled` and the worker unwinds within milliseconds, so nothing the
facade started is still running when it returns.  Outside :func:`cancellable` (tests,
direct calls) a checkpoint costs one context-variable look-up and never raises.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import islice
from typing import Any, TypeVar

from models.errors import OutOfTime

T = TypeVar("T")


class BuildCancelled(OutOfTime):
    """The work was cancelled at a checkpoint (deadline passed or stop requested)."""


class CancelToken:
    """A stop flag with an optional ``time.perf_counter`` deadline.

    Parameters
    ----------
    deadline
        Absolute ``time.perf_counter()`` value after which checkpoints raise, or ``None``.
    """

    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        self._event = threading.Event()

    def cancel(self) -> None:
        """Ask the work to stop at its next checkpoint."""
        self._event.set()

    @property
    def cancelled(self) -> bool:
        """Whether the work should stop now."""
        if self._event.is_set():
            return True
        return self.deadline is not None and time.perf_counter() > self.deadline

    def check(self) -> None:
        """Raise :class:`BuildCancelled` when the work should stop."""
        if self.cancelled:
            raise BuildCancelled("cancelled")


_current: ContextVar[CancelToken | None] = ContextVar("npu_place_cancel_token", default=None)


def checkpoint() -> None:
    """Raise :class:`BuildCancelled` if the current thread's work has been cancelled."""
    token = _current.get()
    if token is not None:
        token.check()


#: Items of a long loop between two checkpoints of :func:`checked`: a few milliseconds
#: of the cheapest per-item work, and a negligible share of the dearest.
CHECK_EVERY = 256


def checked(items: Iterable[T], every: int = CHECK_EVERY) -> Iterable[T]:
    """``items``, with a :func:`checkpoint` before the first and after every ``every``-th.

    For loops over nodes, ranks, variables or terms whose single items are too cheap for
    a checkpoint each.  Outside :func:`cancellable` it returns ``items`` itself; inside,
    items are taken ``every`` at a time (so the loop's body must not change ``items``).
    """
    token = _current.get()
    if token is None:
        return items
    return _checked(iter(items), every, token)


def _checked(items: Iterator[T], every: int, token: CancelToken) -> Iterator[T]:
    while True:
        token.check()
        chunk = list(islice(items, every))
        if not chunk:
            return
        yield from chunk


@contextmanager
def cancellable(token: CancelToken) -> Iterator[CancelToken]:
    """Bind ``token`` to the current context for the duration of the block."""
    reset = _current.set(token)
    try:
        yield token
    finally:
        _current.reset(reset)


# --------------------------------------------------------------------------- quiet regions
#
# Two things hold the GIL for ~0.1 s on an 8,192-node model and so delay the caller's
# return past its deadline (measured: 0.09-0.14 s stalls of a 1-ms sleeper thread): the
# cyclic garbage collector's full passes while the model is being built, and freeing a
# model (hundreds of thousands of Python objects) when the worker unwinds at the deadline.
# Inside a quiet region the collector is off, and models handed to :func:`retain` are freed
# only when there is time (early in a long budget) or when the region ends.  By default the
# last region's end does that itself (the collector's state is restored before the call
# returns); inside :func:`deferred_cleanup` (the command line and the service opt in) a
# reaper thread does it just after the answer is returned.

#: Seconds of budget left above which a retained model is freed at once.
FREE_SLACK_SECONDS = 0.3
#: Seconds of budget left above which :func:`retain` may run a full collection, and the
#: allocations since the last one that make it do so.
COLLECT_SLACK_SECONDS = 1.0
COLLECT_AFTER_ALLOCATIONS = 1_000_000
#: Seconds after the last quiet region ends before the reaper frees what was retained,
#: turns the collector back on and collects (in the background, after the answer).
REAP_DELAY_SECONDS = 0.05
#: Budgets from which a quiet region first catches up at entry (frees what earlier
#: regions left and collects), for callers that start the next call at once.
FREE_AT_ENTRY_BUDGET = 1.0

_retained: list[Any] = []
_reapers: list[threading.Timer] = []
_quiet_lock = threading.Lock()
#: ``active``: regions running; ``restore``: the collector was on before the first one;
#: ``deferred``: :func:`deferred_cleanup` blocks open (the reaper catches up after a region).
_quiet_state = {"active": 0, "restore": 0, "deferred": 0}


@contextmanager
def deferred_cleanup() -> Iterator[None]:
    """Let calls return before their cleanup, for the whole process, inside the block.

    Outside it (the default for a library caller), the end of the last quiet region frees
    the models kept for later, turns the collector back on if it was on, and collects,
    before :func:`solver.facade.solve` returns: the process is as the caller left it, at
    the price of up to ~0.1 s past the deadline on a large model.  Inside it, a reaper
    thread (``npu-place-reaper``) does that :data:`REAP_DELAY_SECONDS` after the region,
    so the answer is returned on time, and the collector stays off between calls that
    follow each other closely.  The command line and the service's workers opt in; a
    caller that does should call :func:`settle` before it measures memory or forks.
    Blocks nest and may be opened by several threads.
    """
    with _quiet_lock:
        _quiet_state["deferred"] += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_state["deferred"] -= 1


def cleanup_deferred() -> bool:
    """Whether a :func:`deferred_cleanup` block is open."""
    return bool(_quiet_state["deferred"])


def _free_retained() -> None:
    with _quiet_lock:
        doomed = _retained[:]
        _retained.clear()
    del doomed  # the deallocation happens here, outside the lock


def retain(obj: Any) -> None:
    """Keep ``obj`` (a built model, an exception with its frames) alive until a safe time.

    With more than :data:`FREE_SLACK_SECONDS` left before the current token's deadline,
    what was retained earlier is freed now; ``obj`` itself waits for the next such moment
    or for the reaper after the quiet region.
    """
    token = _current.get()
    left = None if token is None or token.deadline is None else (
        token.deadline - time.perf_counter())
    if left is not None and left > FREE_SLACK_SECONDS:
        _free_retained()
        # a long search (many neighbourhood steps) must not pile up cyclic garbage while
        # the collector is off: collect while far from the deadline
        if (left > COLLECT_SLACK_SECONDS and not gc.isenabled()
                and gc.get_count()[0] > COLLECT_AFTER_ALLOCATIONS):
            gc.collect(0)  # what the region allocated (all of it is still in generation 0)
    with _quiet_lock:
        _retained.append(obj)


def _catch_up() -> None:
    """Free what was retained, turn the collector back on if it was on, and collect."""
    with _quiet_lock:
        restore = bool(_quiet_state["restore"]) and not _quiet_state["active"]
        if restore:
            _quiet_state["restore"] = 0
    _free_retained()
    if restore:
        gc.enable()
    gc.collect(0)  # what the region allocated (all of it is still in generation 0)


def _reap() -> None:
    with _quiet_lock:
        if _quiet_state["active"]:
            return  # a new region started; its end starts another reaper
    _catch_up()


@contextmanager
def quiet(budget: float) -> Iterator[None]:
    """A region with the cyclic garbage collector off and model frees deferred.

    A full collection holds the GIL for ~0.1 s on the heap of an 8,192-node model, and so
    does freeing the model; either one just before the deadline delays the return by as
    much.  Regions nest and may overlap across threads.  When the last one ends, the
    retained objects are freed, the collector restored and a collection run: at once, in
    the thread ending the region, or — inside :func:`deferred_cleanup` — by a reaper thread
    after the answer is returned.  A caller that starts its next call within
    :data:`REAP_DELAY_SECONDS` postpones the reaper; a region with a budget of at least
    :data:`FREE_AT_ENTRY_BUDGET` then catches up at its start.

    Parameters
    ----------
    budget
        The region's time budget in seconds.
    """
    with _quiet_lock:
        first = _quiet_state["active"] == 0
        _quiet_state["active"] += 1
        if first and gc.isenabled():
            _quiet_state["restore"] = 1
            gc.disable()
    if first and budget >= FREE_AT_ENTRY_BUDGET and (_retained or gc.get_count()[0] > 10_000):
        _free_retained()
        gc.collect(0)  # what the region allocated (all of it is still in generation 0)
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_state["active"] -= 1
            last = _quiet_state["active"] == 0
            deferred = bool(_quiet_state["deferred"])
        if last and not deferred:
            _catch_up()
        elif last:
            reaper = threading.Timer(REAP_DELAY_SECONDS, _reap)
            reaper.name = "npu-place-reaper"
            reaper.daemon = True
            with _quiet_lock:
                _reapers.append(reaper)
            reaper.start()


def settle(timeout: float = 5.0) -> bool:
    """Wait (at most ``timeout`` seconds) for the pending reapers; true when none is left.

    For callers that measure what runs after a call (tests, benchmarks of memory).
    """
    deadline = time.monotonic() + timeout
    while True:
        with _quiet_lock:
            _reapers[:] = [r for r in _reapers if r.is_alive()]
            pending = list(_reapers)
        if not pending:
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        pending[0].join(remaining)
