"""Facades that misbehave, named by ``ServiceConfig(solve="tests.solver.service.faults:...")``
so that the worker processes import them."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from solver.facade import Result, solve


def slow_full(problem: Any, engine: str = "auto", **kwargs: Any) -> Result:
    """Greedy at once (published through ``on_fallback``); then the full solve ignores its
    time limit (sleeps 2 s)."""
    greedy = solve(problem, engine="greedy", seed=kwargs.get("seed", 0))
    if engine != "greedy":
        if kwargs.get("on_fallback") is not None:
            kwargs["on_fallback"](greedy)
        time.sleep(2.0)
    return greedy


def slow_greedy(problem: Any, engine: str = "auto", **kwargs: Any) -> Result:
    """Even greedy takes 1.5 s."""
    time.sleep(1.5)
    return solve(problem, engine="greedy", seed=kwargs.get("seed", 0))


def crash_on_666(problem: Any, engine: str = "auto", **kwargs: Any) -> Result:
    """Raises for seed 666, else the real facade."""
    if kwargs.get("seed") == 666:
        raise RuntimeError("boom")
    return solve(problem, engine=engine, **kwargs)


def die_in_full_solve(problem: Any, engine: str = "auto", **kwargs: Any) -> Result:
    """Greedy works (published through ``on_fallback``); then the full solve kills its own
    worker process (as the OOM killer would)."""
    greedy = solve(problem, engine="greedy", seed=kwargs.get("seed", 0))
    if engine != "greedy":
        if kwargs.get("on_fallback") is not None:
            kwargs["on_fallback"](greedy)
        os.kill(os.getpid(), signal.SIGKILL)
    return greedy


def late_with_models(problem: Any, engine: str = "auto", **kwargs: Any) -> Result:
    """Greedy at once (published); the full answer, counting 2 models reused within the
    solve and 3 built, comes 1 s later (past a short limit, before the kill grace)."""
    from dataclasses import replace

    from solver.model.reuse import ModelCounts

    greedy = solve(problem, engine="greedy", seed=kwargs.get("seed", 0))
    if engine == "greedy":
        return greedy
    if kwargs.get("on_fallback") is not None:
        kwargs["on_fallback"](greedy)
    time.sleep(1.0)
    return replace(greedy, models=ModelCounts(carried=0, within=2, built=3))


def sleepy_greedy(problem: Any, engine: str = "auto", **kwargs: Any) -> Result:
    """Greedy after 0.05 s (any engine): requests queue behind plans, as under load."""
    time.sleep(0.05)
    return solve(problem, engine="greedy", seed=kwargs.get("seed", 0))
