"""Checks of a regression baseline's fields, and of figures no placement can reach.

``npu-place compare --suite --baseline FILE`` trusts the file for three things: the
settings it re-runs the stored scenarios with, the generator parameters it notes changes
against, and the figures it compares the fresh runs with.  Each is checked here before
any work (:func:`check_baseline`): a setting outside the command line's own bounds, a
generator size above the sweep grid's (a 3,000,000-node ``params`` was built only to say
it cannot be regenerated), a figure of the wrong type, are input errors naming the file
and the field (exit 2).

A figure no placement can reach is an *impossible baseline*, not a regression of the
code: origin hits above the instance's origin candidates, more placed jobs than the
scenario has, an objective above the optimum the baseline's own CP-SAT run proved
(:func:`impossible_figures`, before the run), or above the optimum this run's CP-SAT
proves (:func:`impossible_after_run`).  Those are exit 2 too, naming the field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.sweep.grid import generator_kwargs
from models.errors import InputError
from models.limits import (
    LimitError,
    check_deterministic_time,
    check_seed,
    check_time_limit,
    check_workers,
    escape_text,
)

__all__ = ["check_baseline", "impossible_after_run", "impossible_figures"]

#: The settings a baseline may hold: (check, integer only).
_SETTINGS: dict[str, tuple[Callable[..., Any], bool]] = {
    "time-limit": (check_time_limit, False),
    "deterministic-limit": (check_deterministic_time, False),
    "workers": (check_workers, True),
    "seed": (check_seed, True),
}
#: Stored figures that count something (never negative).
_COUNTS = ("placed-jobs", "origin-hits", "origin-candidates", "achievable-origin-hits",
           "fault-returns", "subhealthy-nodes", "reserve-used")
#: Every integer figure of a stored run (:data:`benchmarks.regression.STORED` less status).
_INTS = (*_COUNTS, "fragment-score", "affinity-spill", "objective")
_IMPOSSIBLE = ("an impossible baseline (no placement reaches it), not a regression of the "
               "code; write the baseline again with --write-baseline")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _settings(path: Path, settings: Any) -> None:
    if settings is None:
        return
    if not isinstance(settings, dict):
        raise InputError([f"{path}: field 'settings': expected a mapping of time-limit, "
                          f"deterministic-limit, workers and seed, got "
                          f"{escape_text(repr(settings), 60)}"])
    for key, (check, integer) in _SETTINGS.items():
        if key not in settings:
            continue
        value = settings[key]
        ok = _is_int(value) if integer else (
            isinstance(value, int | float) and not isinstance(value, bool))
        if not ok:
            kind = "an integer" if integer else "a number"
            raise InputError([f"{path}: field 'settings.{key}': expected {kind}, got "
                              f"{escape_text(repr(value), 60)}"])
        try:
            check(value, f"field 'settings.{key}'")
        except LimitError as exc:
            raise InputError([f"{path}: {exc}"]) from None


def _params(path: Path, where: str, params: Any) -> None:
    if params is None:
        return
    if not isinstance(params, dict):
        raise InputError([f"{path}: field '{where}.params': expected a mapping of generator "
                          "parameters"])
    seed = params.get("seed", 0)
    if not _is_int(seed) or not 0 <= seed < 2**31:
        raise InputError([f"{path}: field '{where}.params.seed': expected an integer in "
                          f"[0, 2^31), got {escape_text(repr(seed), 40)}"])
    # stored as GenParams.to_dict writes them (snake_case); a grid entry's keys are kebab
    generator_kwargs({str(k).replace("_", "-"): v for k, v in params.items()},
                     f"{path}: field '{where}.params'")


def _results(path: Path, where: str, results: Any) -> None:
    if results is None:
        return
    if not isinstance(results, dict):
        raise InputError([f"{path}: field '{where}.results': expected a mapping of engines"])
    for engine, quality in results.items():
        at = f"{where}.results.{escape_text(str(engine), 40)}"
        if not isinstance(quality, dict):
            raise InputError([f"{path}: field '{at}': expected a mapping of figures"])
        if not isinstance(quality.get("status", ""), str):
            raise InputError([f"{path}: field '{at}.status': expected a string"])
        for key in _INTS:
            value = quality.get(key)
            if value is None:
                continue
            if not _is_int(value) or (key in _COUNTS and value < 0):
                kind = "a count (an integer >= 0)" if key in _COUNTS else "an integer"
                raise InputError([f"{path}: field '{at}.{key}': expected {kind}, got "
                                  f"{escape_text(repr(value), 40)}"])


def check_baseline(path: Path, data: dict[str, Any]) -> None:
    """Check a loaded baseline's settings, generator parameters and figures.

    Raises
    ------
    InputError
        Naming the file and the first field outside its bounds.
    """
    _settings(path, data.get("settings"))
    for i, record in enumerate(data["instances"]):
        where = f"instances[{i}]"
        _params(path, where, record.get("params"))
        _results(path, where, record.get("results"))


def impossible_figures(path: Path, index: int, record: dict[str, Any],
                       pending_jobs: int | None) -> list[str]:
    """The stored figures of instance ``index`` no placement reaches (messages naming the
    file and field): origin hits above the origin candidates, more placed jobs than the
    scenario's ``pending_jobs``, an objective above the optimum the stored CP-SAT run
    proved."""
    results = record.get("results") or {}
    name = escape_text(str(record.get("name", "")), 80)
    out: list[str] = []
    proved = results.get("cpsat") if isinstance(results.get("cpsat"), dict) else None
    optimum = (proved.get("objective") if proved is not None
               and proved.get("status") == "optimal" else None)
    for engine, quality in results.items():
        at = f"{path}: field 'instances[{index}].results.{engine}"
        hits, candidates = quality.get("origin-hits"), quality.get("origin-candidates")
        if _is_int(hits) and _is_int(candidates) and hits > candidates:
            out.append(f"{at}.origin-hits' ({name}): {hits} origin hits of "
                       f"{candidates} origin candidates: {_IMPOSSIBLE}")
        placed = quality.get("placed-jobs")
        if pending_jobs is not None and _is_int(placed) and placed > pending_jobs:
            out.append(f"{at}.placed-jobs' ({name}): {placed} placed jobs of the "
                       f"scenario's {pending_jobs}: {_IMPOSSIBLE}")
        objective = quality.get("objective")
        if (engine != "cpsat" and _is_int(optimum) and _is_int(objective)
                and objective > optimum):
            out.append(f"{at}.objective' ({name}): {objective} is above the optimum "
                       f"{optimum} the baseline's own CP-SAT run proved: {_IMPOSSIBLE}")
    return out


def impossible_after_run(path: Path, data: dict[str, Any],
                         rows: Sequence[dict[str, str]]) -> list[str]:
    """Stored figures above what this run proved no placement can exceed: an objective
    above the optimum CP-SAT proved now on the same stored scenario, origin hits above
    its origin candidates (messages naming the file and field)."""
    fresh: dict[str, dict[str, dict[str, str]]] = {}
    for row in rows:
        if row.get("valid") == "yes":
            fresh.setdefault(row.get("scenario", ""), {})[row.get("engine", "")] = row
    out: list[str] = []
    for i, record in enumerate(data["instances"]):
        name = str(record.get("name", ""))
        runs = fresh.get(name, {})
        cpsat = runs.get("cpsat")
        optimum = None
        if cpsat is not None and cpsat.get("status") == "optimal":
            # what any engine reached now is reachable, whatever the proof says
            reached = [v for r in runs.values() if (v := _int(r.get("objective"))) is not None]
            optimum = max(reached, default=None)
        candidates = next((c for r in runs.values()
                           if (c := _int(r.get("origin-candidates"))) is not None), None)
        for engine, quality in (record.get("results") or {}).items():
            at = f"{path}: field 'instances[{i}].results.{engine}"
            objective, hits = quality.get("objective"), quality.get("origin-hits")
            if optimum is not None and _is_int(objective) and objective > optimum:
                out.append(f"{at}.objective' ({escape_text(name, 80)}): {objective} is above "
                           f"the optimum {optimum} CP-SAT proved for the stored scenario in "
                           f"this run: {_IMPOSSIBLE}")
            if candidates is not None and _is_int(hits) and hits > candidates:
                out.append(f"{at}.origin-hits' ({escape_text(name, 80)}): {hits} origin "
                           f"hits of the stored scenario's {candidates} origin candidates: "
                           f"{_IMPOSSIBLE}")
    return out


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None
