"""``npu-place sweep GRID``: a what-if grid of scenarios x overrides x engines on Dask.

The library (:func:`benchmarks.sweep.run_sweep`, Dask) is imported when the command
runs, so that the other commands start without it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from models.limits import check_deterministic_time
from solver.cli.options import bounded, positive_int
from solver.doors import CliError, require_extra


def register(sub: Any) -> None:
    """Add the ``sweep`` subcommand to ``sub``."""
    p = sub.add_parser("sweep", help="what-if grid of scenarios x overrides x engines on Dask")
    p.add_argument("grid", metavar="GRID", help="grid file (YAML or JSON; see docs/sweeps.md)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="Dask scheduler address (default: a local cluster, one worker per core)")
    p.add_argument("--dask-workers", type=positive_int, metavar="N", dest="dask_workers",
                   help="worker processes of the local cluster (default: the cores; as in "
                        "bench; a cell's CP-SAT threads are the grid's cpsat-workers)")
    p.add_argument("--workers", type=positive_int, metavar="N", dest="legacy_workers",
                   help="deprecated name of --dask-workers")
    p.add_argument("--out", metavar="DIR", default="sweep-out",
                   help="results.csv, report.md and plots (default sweep-out)")
    p.add_argument("--resume", action="store_true",
                   help="continue the sweep in --out; finished cells are not rerun")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty --out, starting over (files of the same "
                        "names are replaced)")
    p.add_argument("--baseline", metavar="OLD/results.csv",
                   help="compare cell by cell with an earlier sweep of the same grid (a "
                        "what-if study before and after a change); exit 1 on a regression or "
                        "when not every cell could be compared.  The project's regression "
                        "gate is compare --suite; bench measures a suite")
    p.add_argument("--deterministic-time", type=bounded(check_deterministic_time, float),
                   default=None, metavar="D", dest="deterministic_time",
                   help="bound every cell's CP-SAT by deterministic time D (replaces the "
                        "grid's deterministic-time)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO | None = None) -> int:
    """Run the sweep; 1 when a cell failed or the baseline comparison failed."""
    require_extra("sweep", "npu-place sweep")
    from benchmarks.sweep import run_sweep

    err = err or sys.stderr
    workers, option = args.dask_workers, "--dask-workers"
    if args.force and args.resume:
        raise CliError("give --resume (continue the sweep in --out) or --force (start over), "
                       "not both")
    if args.legacy_workers is not None:
        if workers is not None:
            raise CliError("give --dask-workers only (--workers is its deprecated name)")
        workers, option = args.legacy_workers, "--workers"
        err.write("note: sweep --workers is deprecated, use --dask-workers (Dask worker "
                  "processes; --workers of plan and compare is CP-SAT threads)\n")
    return run_sweep(args.grid, args.out, out=out, err=err, resume=args.resume,
                     baseline=args.baseline, deterministic_time=args.deterministic_time,
                     scheduler=args.scheduler, workers=workers, workers_option=option,
                     show_progress=not args.no_progress, force=args.force)
