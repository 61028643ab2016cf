"""``npu-place plan [SCENARIO]``: place the pending jobs of a scenario."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from models.io import dump_data
from solver.cli.options import (
    add_engine_options,
    check_weights,
    scenario_argument,
    scenario_example,
)
from solver.cli.output import emit, expired_cache_note, output_format, render_result_table
from solver.doors import DEFAULT_EXAMPLE, EXIT_OK, CliError, load_problem, source_label
from solver.facade import solve


def register(sub: Any) -> None:
    """Add the ``plan`` subcommand to ``sub``."""
    p = sub.add_parser("plan", help="place the pending jobs of a scenario")
    p.add_argument("scenario", metavar="SCENARIO", nargs="?",
                   help=f"scenario file (default: the bundled example '{DEFAULT_EXAMPLE}')")
    p.add_argument("--example", metavar="NAME", help="run a bundled example by name")
    add_engine_options(p, weights=True)
    p.add_argument("--format", choices=("table", "json", "yaml"), default=None,
                   help="table, json or yaml (default: from --output's suffix, .json/.yaml/"
                        ".yml, else table)")
    p.add_argument("--output", metavar="FILE", help="write the answer to FILE")
    p.set_defaults(run=run)


def resolve_scenario_arg(value: str | None, example: str | None) -> Path:
    """The scenario path from a positional argument or ``--example``."""
    if value and example:
        raise CliError("give either a SCENARIO file or --example, not both")
    if value:
        return scenario_argument(value)
    return scenario_example(example or DEFAULT_EXAMPLE)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Solve and print (or write) the answer."""
    fmt = output_format(args.format, args.output)
    path = resolve_scenario_arg(args.scenario, args.example)
    problem = load_problem(path)
    check_weights(problem, args.weights)
    result = solve(problem, engine=args.engine, time_limit=args.time_limit,
                   workers=args.workers, seed=args.seed, weights=args.weights,
                   deterministic_time=args.deterministic_time)
    note = expired_cache_note(problem)
    if note:
        result = result.with_note(note)
    if fmt == "table":
        text = f"scenario: {source_label(path)}\n" + render_result_table(problem, result)
    else:
        text = dump_data(result.placement.to_dict(), fmt)
    emit(text, args.output, out)
    return EXIT_OK
