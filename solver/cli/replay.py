"""``npu-place replay``: a day of a cluster replayed with several engines, in image pulls.

The library is :mod:`benchmarks.replay` (imported when the command runs); this module only
reads the options.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any, TextIO

from models.documents import read_text
from models.limits import check_deterministic_time, check_seed, check_time_limit
from solver.cli.options import bounded, positive_int
from solver.doors import (
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    extra_hint,
    missing_extra_module,
    require_extra,
)

#: The files a replay writes in its --out folder.
REPLAY_FILES = ("summary.csv", "sessions.csv", "report.md", "pulled-gb.png", "hit-rate.png")


def register(sub: Any) -> None:
    """Add the ``replay`` subcommand to ``sub``."""
    p = sub.add_parser("replay", help="replay a generated day with upstream, rfc and cpsat: "
                                      "image pulls, GB, minutes, hit rate, waits")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--workload", metavar="SPEC.yaml",
                        help="workload spec (see docs/replay.md)")
    source.add_argument("--example", metavar="NAME",
                        help="a bundled day (npu-place examples lists them)")
    source.add_argument("--snapshots", metavar="DIR",
                        help="a recorded day: one kubectl dump per subdirectory, in name "
                             "order (as npu-place import reads), diffed into sessions")
    p.add_argument("--interval", type=positive_int, default=300, metavar="S",
                   help="--snapshots: seconds between snapshots without a 'now' file "
                        "(default 300)")
    seeds = p.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=bounded(check_seed, int), default=0, metavar="N",
                       help="seed of the generated day (default 0)")
    seeds.add_argument("--seeds", metavar="LIST",
                       help="many days, e.g. 0-31: one Dask task per seed and engine; the "
                            "report gives per-engine means with 95%% intervals")
    p.add_argument("--out", metavar="DIR", default="replay-out",
                   help="summary.csv, sessions.csv, report.md and plots (default replay-out; "
                        "a non-empty folder is refused unless --force, as in bench and sweep)")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty --out folder (its files of the same names "
                        "are replaced; a symbolic link among them is refused, never followed)")
    p.add_argument("--engines", default="upstream,rfc,cpsat", metavar="LIST",
                   help="engines, comma-separated (default upstream,rfc,cpsat)")
    p.add_argument("--deterministic-time", type=bounded(check_deterministic_time, float),
                   default=1.0, metavar="D", dest="deterministic_time",
                   help="CP-SAT deterministic time per session (default 1: reproducible)")
    p.add_argument("--wall-clock", action="store_true",
                   help="bound CP-SAT by --time-limit instead (results depend on the load)")
    p.add_argument("--time-limit", type=bounded(check_time_limit, float), default=30.0,
                   metavar="S", help="wall-clock budget per session (default 30; a safety "
                                     "net under --deterministic-time)")
    p.add_argument("--solver-seed", type=bounded(check_seed, int), default=0, metavar="N",
                   help="CP-SAT random seed (default 0)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="--seeds: Dask scheduler address (default: a local cluster)")
    p.add_argument("--dask-workers", type=positive_int, metavar="N", dest="dask_workers",
                   help="--seeds: Dask worker processes of the local cluster (default: the "
                        "cores), as in sweep and bench")
    p.add_argument("--workers", type=positive_int, metavar="N", dest="legacy_workers",
                   help="deprecated name of --dask-workers")
    p.add_argument("--no-plots", action="store_true", help="no PNG plots")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(run=run)


def _written(out: TextIO, title: str, rows: list[dict[str, Any]], outdir: Path,
             plots: bool) -> int:
    from benchmarks.replay.report import BRIEF_FIELDS, dict_table

    sessions = rows[0]["sessions"] if rows else 0
    out.write(f"{title}: {sessions} sessions\n\n{dict_table(rows, BRIEF_FIELDS)}\n\n"
              f"wrote {outdir}/summary.csv, sessions.csv, report.md"
              f"{', pulled-gb.png, hit-rate.png' if plots else ''}\n")
    return EXIT_OK


def _dask_workers(args: argparse.Namespace, err: TextIO) -> tuple[int | None, str]:
    """The local cluster's worker processes and the option that gave them (``--workers``
    is the deprecated name: elsewhere it means CP-SAT search workers)."""
    if args.legacy_workers is None:
        return args.dask_workers, "--dask-workers"
    if args.dask_workers is not None:
        raise CliError("give --dask-workers only (--workers is its deprecated name)")
    err.write("note: replay --workers is deprecated, use --dask-workers (Dask worker "
              "processes; --workers of plan and compare is CP-SAT threads)\n")
    return args.legacy_workers, "--workers"


def run(args: argparse.Namespace, out: TextIO, err: TextIO | None = None) -> int:
    """Replay and write the report; print the summary table."""
    from benchmarks.outputs import check_out_dir
    from benchmarks.replay import api
    from benchmarks.replay.run import ReplayOptions

    err = err or sys.stderr
    try:
        options = ReplayOptions(
            engines=tuple(e.strip() for e in args.engines.split(",") if e.strip()),
            time_limit=args.time_limit,
            deterministic_time=None if args.wall_clock else args.deterministic_time,
            solver_seed=args.solver_seed)
    except ValueError as exc:
        raise CliError(f"--engines: {exc}") from None
    command = "npu-place " + " ".join(shlex.quote(a) for a in sys.argv[1:]) \
        if sys.argv and sys.argv[0].endswith("npu-place") else None
    progress = False if args.no_progress else None
    outdir = Path(args.out)
    plots = not args.no_plots
    # before any work: an --out that is a file, or a folder in use, fails now
    check_out_dir(outdir, force=args.force, files=REPLAY_FILES)
    missing = missing_extra_module("plot") if plots else None
    if missing is not None:  # the day still runs; only its pictures need the extra
        err.write(f"note: plots skipped: {extra_hint('plot', missing)}\n")
        plots = False
    try:
        if args.snapshots:
            if args.seeds is not None:
                raise CliError("--seeds: a recorded series has no seeds; give --workload or "
                               "--example")
            rows = api.replay_series(Path(args.snapshots), options, outdir,
                                     interval=args.interval, plots=plots, command=command,
                                     stream=err, progress=progress)
            return _written(out, f"replay {args.snapshots}", rows, outdir, plots)
        path = api.example_path(args.example) if args.example else Path(args.workload)
        spec = api.read_spec(path)
        if args.seeds is None:
            rows = api.replay_one(spec, args.seed, options, outdir, plots=plots,
                                  command=command, stream=err, progress=progress)
            return _written(out, f"replay {spec.name}, seed {args.seed}", rows, outdir, plots)
        require_extra("sweep", "npu-place replay --seeds")
        from benchmarks.sweep import dask_client, describe_client

        seeds = api.parse_seeds(args.seeds)
        workers, option = _dask_workers(args, err)
        with dask_client(args.scheduler, workers, option) as client:
            result = api.replay_many(spec, seeds, options, client, outdir, command=command,
                                     runner=describe_client(client), stream=err,
                                     progress=progress)
    except OSError as exc:
        raise CliError(f"cannot write {exc.filename}: {exc.strerror}") from None
    out.write(read_text(outdir / "report.md"))
    out.write(f"\nwrote {outdir}/summary.csv, report.md\n")
    for failure in result.failures:
        err.write(f"error: {failure}\n")
    return EXIT_FAILED if result.failures else EXIT_OK
