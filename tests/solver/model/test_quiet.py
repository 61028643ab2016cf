"""Quiet regions (``solver.model.cancel.quiet``/``retain``): no full collection and no
model freed just before a deadline; everything freed and the collector's thresholds
restored after."""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Callable

import pytest

from solver.model.cancel import (
    FULL_COLLECTIONS_OFF,
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


def test_full_collections_are_off_inside_and_restored_after() -> None:
    thresholds = gc.get_threshold()
    with quiet(0.5):
        assert gc.get_threshold() == (*thresholds[:2], FULL_COLLECTIONS_OFF)
        assert gc.isenabled()  # the young generations still collect
        with quiet(0.5):  # nested: still off when the inner one ends
            pass
        assert gc.get_threshold()[2] == FULL_COLLECTIONS_OFF
    assert gc.get_threshold() == thresholds and gc.isenabled()


def test_what_a_region_allocates_is_collected_as_it_goes() -> None:
    # with the collector off for the whole region, all of it waited in the youngest
    # generation for the region's end, which collected it after the deadline (0.02-0.04 s
    # of CPU after a 10-s solve of 4,096-65,536 nodes); the young collections now run
    # inside the region, so its end finds no more than one collection's worth
    threshold = gc.get_threshold()[0]
    with quiet(0.5):
        for _ in range(20 * threshold):
            cycle: list[object] = []
            cycle.append(cycle)
        del cycle
        assert gc.get_count()[0] <= threshold


def test_a_collector_that_was_off_stays_off() -> None:
    thresholds = gc.get_threshold()
    gc.disable()
    try:
        with quiet(0.5):
            pass
        time.sleep(0.2)  # longer than the reaper's delay
        assert not gc.isenabled() and gc.get_threshold() == thresholds
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
    thresholds = gc.get_threshold()
    with quiet(0.5):
        with cancellable(CancelToken(time.perf_counter() + 0.1)):
            retain(payload)
        del payload
    # at the region's end, no reaper needed
    assert gc.isenabled() and ref() is None and gc.get_threshold() == thresholds
    with deferred_cleanup():
        with quiet(0.5):
            pass
        assert settle(5.0)  # the reaper's work, after the region
    assert gc.isenabled() and gc.get_threshold() == thresholds
