"""``npu-place compare``: greedy vs CP-SAT side by side, or the stored regression suite."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from models.io import dump_data
from models.joblist import job_count
from solver.cli.options import (
    add_engine_options,
    check_weights,
    scenario_argument,
    scenario_example,
)
from solver.cli.output import table
from solver.doors import EXIT_OK, CliError, load_problem, require_extra, source_label
from solver.facade import solve


def register(sub: Any) -> None:
    """Add the ``compare`` subcommand to ``sub``."""
    p = sub.add_parser(
        "compare", help="greedy vs CP-SAT side by side, or the regression suite",
        description="Greedy vs CP-SAT on scenario files side by side; with --suite, the "
                    "regression gate: re-run the scenarios stored in a baseline file and "
                    "fail (exit 1) when quality or a proof got worse, exit 2 when the "
                    "baseline itself is impossible.  Which command for what: compare "
                    "--suite to check a change of the code against the committed baseline "
                    "(CI, before merging); bench to measure the engines on a suite "
                    "(results.csv, report and plots, no pass/fail); sweep --baseline to "
                    "compare two what-if sweeps of your own grid cell by cell.")
    p.add_argument("scenarios", metavar="SCENARIO", nargs="*",
                   help="scenario files (YAML or JSON), or example:NAME for bundled examples")
    p.add_argument("--example", metavar="NAME", action="append", default=[],
                   help="compare on a bundled example (repeatable; see npu-place examples)")
    add_engine_options(p, engine=False, weights=True)
    p.add_argument("--format", choices=("table", "json", "yaml"), default="table",
                   help="table (default): one row per scenario and engine; json or yaml: "
                        "the same rows with every metric")
    p.add_argument("--suite", choices=("quick", "full"),
                   help="regression gate: re-run the suite's stored scenarios and compare "
                        "with --baseline (exit 1 on a regression, 2 on an impossible "
                        "baseline); to measure use bench, to compare two sweeps sweep "
                        "--baseline")
    p.add_argument("--baseline", metavar="FILE",
                   help="baseline file of the regression mode (gzip-compressed when its name "
                        "ends in .gz)")
    p.add_argument("--write-baseline", action="store_true",
                   help="write the baseline instead of comparing against it")
    p.add_argument("--from-bench", metavar="DIR", dest="from_bench",
                   help="with --write-baseline: build the baseline from the --out folder of "
                        "an npu-place bench run (results.csv and scenarios/), running nothing")
    p.add_argument("--out", metavar="DIR",
                   help="where the regression mode writes regression.md and the bench's "
                        "results.csv, report.md and plots (a non-empty folder is refused "
                        "unless --force, as in bench, sweep and replay)")
    p.add_argument("--force", action="store_true",
                   help="regression mode: write into a non-empty --out (files of the same "
                        "names are replaced)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="regression mode: Dask scheduler to run on (default: a local cluster)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Compare the engines on each scenario (or run the regression suite)."""
    if args.suite:
        if not args.from_bench:  # --from-bench runs nothing
            require_extra("sweep", f"npu-place compare --suite {args.suite}")
        from benchmarks.regression import run_regression

        return run_regression(args, out)
    scenarios = [*map(scenario_argument, args.scenarios), *map(scenario_example, args.example)]
    if not scenarios:
        raise CliError("compare needs SCENARIO files or --example NAME (or --suite for the "
                       "regression mode)")
    rows = []
    records = []
    for scenario in scenarios:
        problem = load_problem(scenario)
        check_weights(problem, args.weights)
        greedy = solve(problem, engine="greedy", seed=args.seed, weights=args.weights)
        cpsat = solve(problem, engine="cpsat", time_limit=args.time_limit,
                      workers=args.workers, seed=args.seed, weights=args.weights,
                      deterministic_time=args.deterministic_time)
        for result in (greedy, cpsat):
            m = result.metrics
            rows.append([source_label(scenario), result.engine if result is greedy else "cpsat",
                         result.status.value, f"{m.placed_jobs}/{job_count(problem.scenario)}",
                         f"{m.origin_hits}/{m.origin_candidates}", str(m.fault_returns),
                         str(m.subhealthy_nodes), str(m.reserve_used), str(m.fragment_score),
                         str(m.affinity_spill), str(result.objective),
                         "-" if result.bound is None else str(result.bound),
                         f"{result.wall_seconds:.3f}"])
            records.append({"scenario": source_label(scenario),
                            "jobs": job_count(problem.scenario), "engine-run":
                            "greedy" if result is greedy else "cpsat",
                            "answer-engine": result.engine, "status": result.status.value,
                            "objective": result.objective, "bound": result.bound,
                            "wall-seconds": round(result.wall_seconds, 6),
                            "metrics": m.to_model().model_dump(by_alias=True)})
    if args.format == "table":
        header = ["scenario", "engine", "status", "placed", "hits", "fault-ret", "subhealthy",
                  "reserve", "fragment", "spill", "objective", "bound", "wall-s"]
        out.write(table(rows, header) + "\n")
    else:
        out.write(dump_data(records, args.format))
    return EXIT_OK
