"""Ctrl-C while CP-SAT searches in a worker thread is Python's.

CP-SAT installs its own SIGINT handler around each solve unless told not to; a SIGINT
that arrives while a search runs in a thread other than the main one then aborts the
process ("terminate called after throwing an instance of 'std::bad_function_call'",
printed once per Dask worker when an interrupted ``sweep`` stopped its workers).  Every
search of the package leaves the signal to Python: the process gets its
KeyboardInterrupt and ends normally.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: A search that runs for seconds (a budget of 60) in a thread; SIGINT after it started.
SCRIPT = textwrap.dedent("""
    import os, signal, threading, time
    from ortools.sat.python import cp_model
    from solver.cpsat import search_parameters

    model = cp_model.CpModel()
    xs = [model.new_int_var(0, 100, f"x{i}") for i in range(300)]
    for a, b in zip(xs, xs[1:]):
        model.add(a + b <= 150)
    model.add_all_different(xs[:100])
    model.maximize(sum((i % 7 + 1) * x for i, x in enumerate(xs)))
    started = threading.Event()

    def search():
        solver = cp_model.CpSolver()
        search_parameters(solver, max_time=60.0, workers=1, seed=0, deterministic_time=None)
        started.set()
        solver.solve(model)

    threading.Thread(target=search, daemon=True).start()
    started.wait()
    time.sleep(1.0)
    print("interrupting", flush=True)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)
""")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_during_a_search_in_a_thread_is_a_keyboard_interrupt() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert "interrupting" in done.stdout
    assert "terminate called" not in done.stderr, done.stderr
    assert done.returncode != -signal.SIGABRT
    assert done.stderr.strip().splitlines()[-1] == "KeyboardInterrupt"


def test_every_cp_sat_solver_leaves_sigint_to_python() -> None:
    """Each function of the package that creates a ``CpSolver`` either sets its
    parameters with ``search_parameters`` or turns ``catch_sigint_signal`` off itself."""
    creations = 0
    for path in sorted((ROOT / "solver").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"cp_model\.CpSolver\(\)", text):
            creations += 1
            after = text[match.end():match.end() + 800]
            assert ("search_parameters(solver" in after
                    or "catch_sigint_signal = False" in after), f"{path.name}: {after[:200]}"
    assert creations >= 3
