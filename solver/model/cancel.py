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

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ortools.sat.python import cp_model


class BuildCancelled(Exception):
    """The work was cancelled (deadline passed or stop requested)."""


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


@contextmanager
def cancellable(token: CancelToken) -> Iterator[CancelToken]:
    """Bind ``token`` to the current context for the duration of the block."""
    reset = _current.set(token)
    try:
        yield token
    finally:
        _current.reset(reset)


class CancellableModel(cp_model.CpModel):
    """A CP-SAT model whose constraint-adding calls are checkpoints."""

    def add(self, ct: Any) -> cp_model.Constraint:
        """As :meth:`CpModel.add`, after a checkpoint."""
        checkpoint()
        return super().add(ct)

    def add_multiplication_equality(self, target: Any, *expressions: Any) -> cp_model.Constraint:
        """As :meth:`CpModel.add_multiplication_equality`, after a checkpoint."""
        checkpoint()
        return super().add_multiplication_equality(target, *expressions)

    def add_modulo_equality(self, target: Any, expr: Any, mod: Any) -> cp_model.Constraint:
        """As :meth:`CpModel.add_modulo_equality`, after a checkpoint."""
        checkpoint()
        return super().add_modulo_equality(target, expr, mod)

    def add_division_equality(self, target: Any, num: Any, denom: Any) -> cp_model.Constraint:
        """As :meth:`CpModel.add_division_equality`, after a checkpoint."""
        checkpoint()
        return super().add_division_equality(target, num, denom)

    def add_max_equality(self, target: Any, *expressions: Any) -> cp_model.Constraint:
        """As :meth:`CpModel.add_max_equality`, after a checkpoint."""
        checkpoint()
        return super().add_max_equality(target, *expressions)
