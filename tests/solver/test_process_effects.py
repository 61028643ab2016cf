"""What a library call of ``solve()`` leaves in the process (docs/library.md, "What a
call does to the process"): the collector's state as it was, no thread once
:func:`solver.model.cancel.settle` returns, and no exit hook from importing the engine."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_call_restores_the_collector_and_leaves_no_thread_or_hook_behind() -> None:
    script = textwrap.dedent("""
        import gc, threading
        import solver.engine as engine
        from models.io import load_scenario
        from solver.doors import example_path
        from solver.facade import solve
        from solver.model.cancel import settle

        assert not engine._EXIT_HOOK["registered"], "importing the engine registered a hook"
        scenario = load_scenario(example_path("superpod-850"))
        before = threading.active_count()
        solve(scenario, engine="greedy")
        assert not engine._EXIT_HOOK["registered"], "greedy registered an exit hook"
        for enabled in (True, False, True):
            gc.enable() if enabled else gc.disable()
            solve(scenario, engine="auto", time_limit=5, deterministic_time=0.2)
            assert settle(5.0)
            assert gc.isenabled() is enabled, (enabled, gc.isenabled())
            assert threading.active_count() == before, threading.enumerate()
        assert engine._EXIT_HOOK["registered"], "a CP-SAT run registers the exit hook"
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
