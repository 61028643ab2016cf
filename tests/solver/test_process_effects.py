"""What a library call of ``solve()`` leaves in the process (docs/library.md, "What a
call does to the process"): by default the collector's state as it was when the call
returns, no reaper thread, no CP-SAT thread and no exit hook; inside
``deferred_cleanup()`` (the command line and the service) the cleanup comes just after the
answer and ``settle()`` waits for it.  The per-problem cache is typed
(:mod:`models.derived`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from models.compiled import compile_scenario
from models.derived import Derived, DerivedCache
from models.io import load_scenario
from solver.doors import example_path

ROOT = Path(__file__).resolve().parents[2]


def test_a_call_restores_the_process_on_return_unless_cleanup_is_deferred() -> None:
    script = textwrap.dedent("""
        import atexit, gc, threading
        import solver.engine as engine
        from models.io import load_scenario
        from solver.doors import example_path
        from solver.facade import solve
        from solver.model.cancel import cleanup_deferred, deferred_cleanup, settle

        # the exit hooks registered and not unregistered since here
        registered = set()
        register, unregister = atexit.register, atexit.unregister
        atexit.register = lambda f, *a, **k: (registered.add(f), register(f, *a, **k))[1]
        atexit.unregister = lambda f: (registered.discard(f), unregister(f))[1]

        def engine_hook_left() -> bool:
            return engine._stop_workers_at_exit in registered

        scenario = load_scenario(example_path("superpod-850"))
        before = threading.active_count()
        solve(scenario, engine="greedy")
        assert not engine_hook_left(), "greedy registered an exit hook"
        assert not cleanup_deferred()
        tracked = []
        track = engine._track
        engine._track = lambda *a: (tracked.append(a), track(*a))[1]
        for enabled in (True, False, True):
            gc.enable() if enabled else gc.disable()
            solve(scenario, engine="auto", time_limit=5, deterministic_time=0.2)
            # on return, without waiting: the collector as it was, no thread, no hook
            assert gc.isenabled() is enabled, (enabled, gc.isenabled())
            assert threading.active_count() == before, threading.enumerate()
            assert engine.live_workers() == 0 and not engine_hook_left()
        assert len(tracked) == 3, "each call ran a CP-SAT worker"
        gc.enable()
        with deferred_cleanup():
            solve(scenario, engine="auto", time_limit=5, deterministic_time=0.2)
            # the reaper restores the collector after the answer, settle() waits for it
            assert settle(5.0)
        assert gc.isenabled() and threading.active_count() == before
        assert engine.live_workers() == 0 and not engine_hook_left()
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_derived_cache_computes_each_value_once_and_keeps_none() -> None:
    cache = DerivedCache()
    calls: list[int] = []
    squares: Derived[int, int | None] = Derived("squares")

    def square(k: int) -> int | None:
        calls.append(k)
        return None if k < 0 else k * k

    assert cache.get_or_compute(squares, 3, lambda: square(3)) == 9
    assert cache.get_or_compute(squares, 3, lambda: square(3)) == 9
    assert cache.get_or_compute(squares, -1, lambda: square(-1)) is None
    assert cache.get_or_compute(squares, -1, lambda: square(-1)) is None
    assert calls == [3, -1]
    assert cache.sizes() == {"squares": 2}
    cache.forget(squares)
    assert cache.get_or_compute(squares, 3, lambda: square(3)) == 9 and calls == [3, -1, 3]


def test_a_problem_derives_its_orders_once() -> None:
    problem = compile_scenario(load_scenario(example_path("superpod-850")))
    order = problem.topology_order()
    assert problem.topology_order() is order
    assert np.array_equal(np.sort(order), np.arange(problem.num_nodes))
    assert problem.derived.sizes() == {"topology order": 1}
