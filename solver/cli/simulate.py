"""``npu-place simulate SCENARIO EVENTS``: a multi-session what-if with the cache lifecycle."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from models.io import dump_data, read_document, save_scenario, scenario_from_data
from solver.cli.options import add_engine_options, scenario_argument
from solver.cli.output import output_format
from solver.doors import EXIT_OK, CliError, require_extra


def register(sub: Any) -> None:
    """Add the ``simulate`` subcommand to ``sub``."""
    p = sub.add_parser("simulate", help="multi-session what-if: events, placements, cache")
    p.add_argument("scenario", metavar="SCENARIO",
                   help="the starting state: scenario file (YAML or JSON), or example:NAME "
                        "for a bundled example")
    p.add_argument("events", metavar="EVENTS",
                   help="sessions of events (evictions, faults, scale-ups, time passing) "
                        "as YAML or JSON (npu-place examples "
                        "rfc-inference-training.events shows one)")
    add_engine_options(p)
    p.add_argument("--format", choices=("table", "json", "yaml"), default=None,
                   help="table, json or yaml (default: from --output's suffix, .json/.yaml/"
                        ".yml, else table)")
    p.add_argument("--plot", metavar="FILE.png", help="plot hit rate and pending jobs")
    p.add_argument("--save-state", metavar="FILE", help="write the final state as a scenario")
    p.add_argument("--output", metavar="FILE", help="write the report to FILE")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run the sessions and print (or write) the report."""
    from solver.simulate import plot_report, simulate

    fmt = output_format(args.format, args.output)
    if args.plot:
        require_extra("plot", "npu-place simulate --plot")
    scenario_source = str(args.scenario)
    events_source = str(args.events)
    scenario = scenario_from_data(read_document(scenario_argument(args.scenario)),
                                  scenario_source)
    events = read_document(args.events)
    report = simulate(scenario, events, engine=args.engine, time_limit=args.time_limit,
                      workers=args.workers, seed=args.seed,
                      deterministic_time=args.deterministic_time, scenario_source=scenario_source,
                      events_source=events_source)
    text = report.render_table() if fmt == "table" else dump_data(report.to_dict(), fmt)
    try:
        if args.output:
            Path(args.output).write_text(text, encoding="utf-8")
        else:
            out.write(text)
        if args.save_state:
            save_scenario(report.final_state, args.save_state)
        if args.plot:
            plot_report(report, args.plot)
    except OSError as exc:
        raise CliError(f"cannot write {exc.filename}: {exc.strerror}") from None
    return EXIT_OK
