"""``npu-place bench``: the solver-vs-greedy benchmark suite, with reports and plots.

The library (:mod:`benchmarks.suite`, Dask) is imported when the command runs, so that
the other commands start without it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from solver.cli.options import add_engine_options, positive_int
from solver.doors import require_extra


def register(sub: Any) -> None:
    """Add the ``bench`` subcommand to ``sub``."""
    p = sub.add_parser(
        "bench", help="solver-vs-greedy benchmark suite with reports and plots",
        description="Measure greedy and CP-SAT on a generated suite: results.csv, report.md "
                    "and plots, no pass/fail against a baseline.  To check a change of the "
                    "code against the committed baseline use compare --suite; to compare "
                    "two what-if sweeps use sweep --baseline.")
    p.add_argument("--suite", choices=("quick", "full", "scale"), default="quick",
                   help="quick (6 small instances), full (64 to 8,192 nodes) or scale "
                        "(every family at 16,384, 32,768 and 65,536 nodes, 16-job batches)")
    add_engine_options(p, engine=False)
    p.add_argument("--out", metavar="DIR", default="bench-out",
                   help="results.csv, report.md, plots and scenarios (default bench-out; "
                        "a non-empty folder is refused unless --force)")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty --out (files of the same names are replaced)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="Dask scheduler to run the cells on (default: a local cluster)")
    p.add_argument("--dask-workers", type=positive_int, metavar="N", dest="dask_workers",
                   help="worker processes of the local cluster (default: the cores)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """``npu-place bench [--suite quick|full|scale] [--time-limit S] [--workers N] [--seed N]
    [--deterministic-time D] [--scheduler ADDRESS] [--dask-workers N]``.

    Runs the suite on Dask (a local cluster unless ``--scheduler`` is given), writes
    ``results.csv``, ``report.md``, plots and the scenarios into ``--out`` and prints the
    headline.  Returns 1 when a placement was invalid or an
    engine failed, else 0.
    """
    require_extra("sweep", "npu-place bench")
    from benchmarks.common import MemoryProbe, Progress
    from benchmarks.outputs import check_out_dir
    from benchmarks.suite import (
        FULL_BUDGET_SECONDS,
        Settings,
        machine_description,
        read_csv,
        run_suite,
        suite_instances,
        summarize,
    )
    from benchmarks.suite_outputs import write_outputs

    suite = getattr(args, "suite", None) or "quick"
    instances = suite_instances(suite)
    settings = Settings(
        time_limit=float(args.time_limit),
        workers=int(args.workers),
        seed=int(args.seed),
        deterministic_time=getattr(args, "deterministic_time", None),
        budget_seconds=FULL_BUDGET_SECONDS if suite == "full" else None,
    )
    out_dir = Path(getattr(args, "out", None) or "bench-out")
    check_out_dir(out_dir, force=bool(getattr(args, "force", False)))
    out_dir.mkdir(parents=True, exist_ok=True)
    tty = bool(getattr(out, "isatty", lambda: False)())
    progress = Progress(out, len(instances), tty and not getattr(args, "no_progress", False))
    started = time.perf_counter()
    scheduler = getattr(args, "scheduler", None)
    dask_workers = getattr(args, "dask_workers", None)
    rows = run_suite(instances, settings, out_dir, progress, scheduler, dask_workers)
    elapsed = time.perf_counter() - started
    runner = (f"Dask scheduler {scheduler}" if scheduler else
              f"local Dask cluster, {dask_workers or os.cpu_count()} single-threaded worker "
              "process(es)")
    meta = {
        "suite": suite,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine_description(),
        "settings": (f"time limit {settings.time_limit:g} s per CP-SAT run, "
                     f"{settings.workers} worker(s), CP-SAT seed {settings.seed}"
                     + ("" if settings.deterministic_time is None else
                        f", deterministic time {settings.deterministic_time:g}")),
        "runner": runner,
        "peak memory": MemoryProbe().method + ", measured in the worker process",
        "suite wall time": f"{elapsed:.0f} s",
    }
    csv_path, report, plots = write_outputs(rows, out_dir, meta, sys.stderr)
    s = summarize(read_csv(csv_path))
    out.write(
        f"{suite} suite: {s.instances} instances ({s.compared} compared, {s.skipped} skipped, "
        f"{s.failed} failed) in {elapsed:.0f} s on {runner}\n"
        f"CP-SAT vs greedy, objective W/T/L {'/'.join(map(str, s.objective_wtl))}, "
        f"origin hits W/T/L {'/'.join(map(str, s.hits_wtl))}\n"
        f"hit rate greedy {s.greedy_hit_rate}, CP-SAT {s.cpsat_hit_rate}, "
        f"achievable bound {s.achievable_rate}; on the {s.proven} instances proven optimal: "
        f"optimum {s.proven_optimum_rate}, achievable bound {s.proven_achievable_rate}\n"
        f"wrote {csv_path}, {report}" + "".join(f", {p}" for p in plots) + "\n"
    )
    return 1 if s.failed else 0
