"""Option types and the options every solving command shares (``argparse``)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from models.compiled import Problem
from models.errors import closest_name
from models.limits import (
    MAX_WEIGHT,
    LimitError,
    check_deterministic_time,
    check_range,
    check_seed,
    check_time_limit,
    check_workers,
    escape_text,
)
from models.numbers import parse_int
from models.objective import Weights, resolve_weights
from solver.doors import EXAMPLE_PREFIX, CliError, example_names, example_path
from solver.facade import ENGINES


def scenario_example(name: str) -> Path:
    """The bundled example scenario ``name`` (``--example NAME``).

    Raises
    ------
    CliError
        When there is none; a replay day (``npu-place examples`` lists both) is named as
        such, with the command that runs it.
    """
    try:
        return example_path(name)
    except CliError:
        from benchmarks.replay.api import EXAMPLES as DAYS  # only on this error

        if name in DAYS:
            raise CliError(f"'{name}' is a replay day, not a scenario: run it with "
                           f"npu-place replay --example {name} (scenario examples: "
                           f"{', '.join(example_names())})") from None
        raise


def scenario_argument(value: str) -> Path:
    """A SCENARIO argument: a file, or ``example:NAME`` (as the tables name a bundled
    example), with :func:`scenario_example`'s messages."""
    if value.startswith(EXAMPLE_PREFIX):
        return scenario_example(value[len(EXAMPLE_PREFIX):])
    return Path(value)


def positive_float(text: str) -> float:
    """An ``argparse`` type: a number > 0."""
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def whole_number(text: str) -> int:
    """An integer written in ASCII digits with an optional sign (:mod:`models.numbers`).

    Raises
    ------
    ValueError
        Otherwise (``argparse`` then says the value is invalid).
    """
    value = parse_int(text.strip(), signed=True)
    if value is None:
        raise ValueError(f"not an integer: {text!r}")
    return value


def positive_int(text: str) -> int:
    """An ``argparse`` type: an integer > 0."""
    value = whole_number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def bounded(check: Callable[[Any, str], Any], kind: type) -> Callable[[str], Any]:
    """An ``argparse`` type: convert with ``kind``, then apply a :mod:`models.limits` check."""

    def parse(text: str) -> Any:
        try:
            value = whole_number(text) if kind is int else kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(
                f"expected {what}, got '{escape_text(text, 40)}'") from None
        try:
            return check(value, "the value")
        except LimitError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def in_range(kind: type, low: float, high: float) -> Callable[[str], Any]:
    """An ``argparse`` type: ``kind`` within ``low .. high`` (:func:`models.limits.check_range`)."""
    return bounded(lambda value, name: check_range(value, name, low, high), kind)


#: The keys ``--weights`` takes (contract spelling).
WEIGHT_KEYS = tuple(f.alias or name for name, f in Weights.model_fields.items())


def weight_error_text(error: Any) -> str:
    """One pydantic error of :class:`~models.objective.Weights`, in the tool's words."""
    loc = error["loc"]
    key = str(loc[0]) if loc else ""
    kind = error["type"]
    got = error.get("input")
    if kind == "extra_forbidden":
        close = closest_name(key, WEIGHT_KEYS)
        hint = f"did you mean '{close}'? " if close else ""
        return f"unknown key '{escape_text(key, 40)}' ({hint}keys: {', '.join(WEIGHT_KEYS)})"
    if not loc:
        return "expected a JSON object of weights, such as '{\"fragment\": 0}'"
    shown = escape_text(json.dumps(got), 40) if isinstance(got, (int, float, str, bool)) \
        or got is None else type(got).__name__
    if kind in ("greater_than_equal", "less_than_equal"):
        limits = error.get("ctx", {})
        low, high = limits.get("ge", 0), limits.get("le", MAX_WEIGHT)
        return f"'{key}' must be from {low} to {high}, got {shown}"
    if key == "priority-levels" or kind.startswith("bool"):
        return f"'{key}' must be true or false, got {shown}"
    return f"'{key}' must be a whole number, got {shown}"


def weights_option(text: str) -> Weights:
    """An ``argparse`` type: objective weights as a JSON object (``--weights``); a mistake
    is named in the tool's words, with the closest key for a misspelt one."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(
            f"not JSON ({exc}); give an object such as '{{\"fragment\": 0}}'") from None
    try:
        return Weights.model_validate(data)
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(
            "; ".join(weight_error_text(error) for error in exc.errors())) from None


def unix_time(text: str) -> int:
    """``--now``: unix seconds, or an ISO 8601 time such as ``2026-12-01T05:00:00Z``."""
    from datetime import datetime

    value = parse_int(text.strip(), signed=True)
    if value is not None:
        return value
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected unix seconds or an ISO 8601 time, got "
                                         f"'{escape_text(text, 40)}'") from None


def add_engine_options(parser: argparse.ArgumentParser, *, engine: bool = True,
                       weights: bool = False) -> None:
    """The options every solving command shares."""
    if engine:
        parser.add_argument("--engine", choices=ENGINES, default="auto",
                            help="greedy, cpsat, or auto (greedy then CP-SAT; default)")
    parser.add_argument("--time-limit", type=bounded(check_time_limit, float), default=10.0,
                        metavar="S", help="wall-clock budget per placement in seconds, at "
                                          "most 604800 (default 10)")
    parser.add_argument("--workers", type=bounded(check_workers, int), default=1, metavar="N",
                        help="CP-SAT search workers, 1 to 64 (default 1)")
    parser.add_argument("--seed", type=bounded(check_seed, int), default=0, metavar="N",
                        help="random seed of the CP-SAT search, 0 to 2147483647 (default 0)")
    parser.add_argument("--deterministic-time", type=bounded(check_deterministic_time, float),
                        default=None,
                        metavar="D", dest="deterministic_time",
                        help="bound CP-SAT by its deterministic time D (same input and seed "
                             "give the same answer on any machine and load; the wall-clock "
                             "limit stays as a safety net)")
    if not weights:
        return
    parser.add_argument("--weights", type=weights_option, default=None, metavar="JSON",
                        help="objective weights, e.g. '{\"fragment\": 0, \"subhealthy\": 8}' "
                             "(keys: placed, origin-hit, fault-return, affinity-spill, "
                             "subhealthy, reserve, fragment, priority-levels, image-gb; "
                             "default: "
                             "automatic lexicographic weights)")


def check_weights(problem: Problem, weights: Weights | None) -> None:
    """Refuse weights whose objective would exceed CP-SAT's 2^31 coefficient bound.

    Raises
    ------
    CliError
        Naming ``--weights`` (or the automatic weights) and the sum.
    """
    try:
        resolve_weights(problem, weights)
    except ValueError as exc:
        option = "--weights" if weights is not None else "the automatic weights"
        raise CliError(f"{option}: {exc}") from None
