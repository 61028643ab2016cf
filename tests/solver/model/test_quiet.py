"""Quiet regions (``solver.model.cancel.quiet``/``retain``): no collector pass and no model
freed just before a deadline; everything freed and the collector restored after."""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Callable

import pytest

from solver.model.cancel import (
    CancelToken,
    cancellable,
    deferred_cleanup,
    quiet,
    retain,
    settle,
)


class Payload:
    """A stand-in for a built model (weak-referenceable)."""


def wait_until(condition: Callable[[], bool], seconds: float = 5.0) -> bool:
    """Poll ``condition`` for at most ``seconds`` (bounded)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture(autouse=True)
def collector_on() -> None:
    gc.enable()
    assert wait_until(lambda: gc.isenabled())


def test_collector_is_off_inside_and_restored_after() -> None:
    with quiet(0.5):
        assert not gc.isenabled()
        with quiet(0.5):  # nested: still off when the inner one ends
            pass
        assert not gc.isenabled()
    assert wait_until(gc.isenabled)


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        with quiet(0.5):
            pass
        time.sleep(0.2)  # longer than the reaper's delay
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_retained_object_outlives_the_deadline_then_is_freed() -> None:
    payload = Payload()
    ref = weakref.ref(payload)
    with quiet(0.5):
        token = CancelToken(time.perf_counter() + 0.1)  # within the free slack
        with cancellable(token):
            retain(payload)
        del payload
        assert ref() is not None  # not freed near the deadline
    assert wait_until(lambda: ref() is None)


def test_retain_far_from_the_deadline_frees_earlier_objects() -> None:
    first, second = Payload(), Payload()
    first_ref, second_ref = weakref.ref(first), weakref.ref(second)
    with quiet(10.0):
        token = CancelToken(time.perf_counter() + 30.0)
        with cancellable(token):
            retain(first)
            del first
            assert first_ref() is not None
            retain(second)  # plenty of time left: the first one goes now
            del second
            assert first_ref() is None and second_ref() is not None
    assert wait_until(lambda: second_ref() is None)


def test_the_region_restores_the_collector_itself_unless_cleanup_is_deferred() -> None:
    payload = Payload()
    ref = weakref.ref(payload)
    with quiet(0.5):
        with cancellable(CancelToken(time.perf_counter() + 0.1)):
            retain(payload)
        del payload
    assert gc.isenabled() and ref() is None  # at the region's end, no reaper needed
    with deferred_cleanup():
        with quiet(0.5):
            pass
        assert settle(5.0)  # the reaper's work, after the region
    assert gc.isenabled()
