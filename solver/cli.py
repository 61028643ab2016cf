"""The ``npu-place`` command line.

Exit codes: 0 ok, 2 invalid input (message on stderr, no traceback), 1 internal error
(or a check that failed, such as ``validate`` finding violations or ``compare`` finding a
regression).  Set ``NPU_PLACE_DEBUG=1`` to see tracebacks of internal errors.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from heuristics.greedy import EngineNotAvailable
from models.check import check
from models.compiled import Problem, compile_scenario, expired_owners
from models.io import dump_data, load_placement, model_from_data, read_document
from models.limits import (
    MAX_ERRORS_SHOWN,
    MAX_WORKERS,
    LimitError,
    check_deterministic_time,
    check_range,
    check_seed,
    check_time_limit,
    check_workers,
    escape_text,
)
from models.objective import Metrics, Weights, evaluate, resolve_weights
from models.scenario import Scenario
from models.validation import InputError
from solver.facade import ENGINES, Result, solve

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2

#: The bundled example ``plan`` runs when no scenario is given.
DEFAULT_EXAMPLE = "superpod-850"


class CliError(Exception):
    """A user-facing error with an exit code."""

    def __init__(self, message: str, code: int = EXIT_INVALID) -> None:
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------- examples


def example_names() -> list[str]:
    """Names of the bundled example scenarios."""
    folder = resources.files("models") / "examples"
    return sorted(p.name[:-5] for p in folder.iterdir()
                  if p.name.endswith(".yaml") and not p.name.endswith(".events.yaml"))


def example_path(name: str) -> Path:
    """Path of a bundled example scenario."""
    folder = resources.files("models") / "examples"
    path = folder / f"{name}.yaml"
    if name not in example_names() or not path.is_file():  # never a path outside examples/
        raise CliError(f"no bundled example named '{name}'; choose one of "
                       f"{', '.join(example_names())}")
    return Path(str(path))


def load_problem(path: str | os.PathLike[str]) -> Problem:
    """Load, validate and compile a scenario file (raises :class:`InputError`)."""
    source = str(path)
    # compile_scenario runs the cross-field rules itself (once), naming ``source``
    scenario = model_from_data(Scenario, read_document(path), source)
    return compile_scenario(scenario, source)


def resolve_scenario_arg(value: str | None, example: str | None) -> Path:
    """The scenario path from a positional argument or ``--example``."""
    if value and example:
        raise CliError("give either a SCENARIO file or --example, not both")
    if value:
        return Path(value)
    return example_path(example or DEFAULT_EXAMPLE)


# --------------------------------------------------------------------------- output


def metrics_rows(metrics: Metrics) -> list[tuple[str, str]]:
    """Rows of the metrics table."""
    rate = (f"{100.0 * metrics.origin_hits / metrics.origin_candidates:.1f} %"
            if metrics.origin_candidates else "-")
    return [
        ("placed-jobs", str(metrics.placed_jobs)),
        ("origin-hits", f"{metrics.origin_hits} / {metrics.origin_candidates} candidates "
                        f"(achievable {metrics.achievable_origin_hits}; hit rate {rate})"),
        ("fault-returns", str(metrics.fault_returns)),
        ("subhealthy-nodes", str(metrics.subhealthy_nodes)),
        ("reserve-used", str(metrics.reserve_used)),
        ("fragment-score", str(metrics.fragment_score)),
        ("affinity-spill", str(metrics.affinity_spill)),
        ("objective", str(metrics.objective)),
    ]


def _table(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None) -> str:
    data = [list(header)] if header else []
    data += [list(r) for r in rows]
    if not data:
        return ""
    widths = [max(len(r[i]) for r in data) for i in range(len(data[0]))]
    lines = []
    for k, row in enumerate(data):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if header and k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _compress(nodes: list[str], limit: int = 6) -> str:
    if len(nodes) <= limit:
        return ", ".join(nodes)
    return ", ".join(nodes[:limit]) + f", ... (+{len(nodes) - limit})"


def render_result_table(problem: Problem, result: Result) -> str:
    """A readable summary of one result."""
    head = [
        ("engine", result.engine),
        ("status", result.status.value),
        ("objective", str(result.objective)),
        ("bound", "-" if result.bound is None else str(result.bound)),
        ("gap", "-" if result.gap is None else f"{100 * result.gap:.3f} %"),
        ("wall-seconds", f"{result.wall_seconds:.3f}"),
    ]
    if result.greedy_objective is not None and result.engine != "greedy":
        head.append(("greedy objective", str(result.greedy_objective)))
    parts = [_table(head), "", _table(metrics_rows(result.metrics))]
    rows = []
    for jp in result.placement.jobs:
        job = problem.jobs[problem.job_index[jp.name]]
        if jp.placed:
            if jp.blocks:
                where = "; ".join(f"{b}: {_compress(nodes, 4)}"
                                  for b, nodes in list(jp.blocks.items())[:3])
                if len(jp.blocks) > 3:
                    where += f"; ... ({len(jp.blocks)} blocks)"
            else:
                where = _compress([jp.ranks[str(r)] for r in range(job.tasks)])
            rows.append([jp.name, job.policy.value, str(job.tasks), "yes",
                         f"{jp.origin_hits}/{jp.origin_candidates}", where])
        else:
            rows.append([jp.name, job.policy.value, str(job.tasks), "no",
                         f"0/{jp.origin_candidates}", jp.reason or ""])
    parts += ["", _table(rows, ["job", "policy", "tasks", "placed", "hits", "nodes / reason"])]
    if result.notes:
        parts += ["", *(f"note: {n}" for n in result.notes)]
    return "\n".join(parts) + "\n"


def emit(text: str, output: str | None, stream: TextIO) -> None:
    """Write ``text`` to ``output`` (a file) or to ``stream``."""
    if output:
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:  # a bad --output path is the user's input, not a crash
            raise CliError(f"cannot write --output file '{output}': {exc.strerror}") from None
    else:
        stream.write(text)


# --------------------------------------------------------------------------- commands


def cmd_validate(args: argparse.Namespace, out: TextIO) -> int:
    """``npu-place validate SCENARIO [PLACEMENT]``."""
    problem = load_problem(args.scenario)
    lines = [f"{args.scenario}: valid scenario: {problem.num_nodes} nodes, "
             f"{len(problem.jobs)} pending jobs"]
    if not args.placement:
        out.write("\n".join(lines) + "\n")
        return EXIT_OK
    placement = load_placement(args.placement)
    violations = check(problem, placement)
    if args.format == "json" or args.format == "yaml":
        data: dict[str, Any] = {"valid": not violations,
                                "violations": [{"rule": v.rule.value, "job": v.job,
                                                "node": v.node, "message": v.message}
                                               for v in violations]}
        if not violations:
            data["metrics"] = evaluate(problem, placement).to_model().model_dump(by_alias=True)
        out.write(dump_data(data, args.format))
        return EXIT_FAILED if violations else EXIT_OK
    if violations:
        lines.append(f"{args.placement}: {len(violations)} hard-constraint violation(s):")
        lines += [f"  {v}" for v in violations]
        out.write("\n".join(lines) + "\n")
        return EXIT_FAILED
    lines.append(f"{args.placement}: the placement satisfies every hard constraint")
    metrics = evaluate(problem, placement)
    out.write("\n".join(lines) + "\n\n" + _table(metrics_rows(metrics)) + "\n")
    return EXIT_OK


def cmd_plan(args: argparse.Namespace, out: TextIO) -> int:
    """``npu-place plan [SCENARIO]``."""
    path = resolve_scenario_arg(args.scenario, args.example)
    problem = load_problem(path)
    check_weights(problem, args.weights)
    result = solve(problem, engine=args.engine, time_limit=args.time_limit,
                   workers=args.workers, seed=args.seed, weights=args.weights,
                   deterministic_time=args.deterministic_time)
    note = expired_cache_note(problem)
    if note:
        result.notes.append(note)
        result.placement.notes.append(note)
    if args.format == "table":
        text = f"scenario: {path}\n" + render_result_table(problem, result)
    else:
        text = dump_data(result.placement.to_dict(), args.format)
    emit(text, args.output, out)
    return EXIT_OK


def expired_cache_note(problem: Problem) -> str | None:
    """A note naming the cache owners whose entries are older than the TTL, if any."""
    owners = expired_owners(problem.scenario, problem.now)
    if not owners:
        return None
    ttl = problem.scenario.affinity_cache.ttl_seconds
    shown = ", ".join(owners[:10]) + (f", ... ({len(owners) - 10} more)" if len(owners) > 10
                                      else "")
    return (f"affinity cache: the entries of {len(owners)} owner(s) ({shown}) were last "
            f"updated before now - ttl-seconds ({problem.now} - {ttl}): expired, so no rank "
            "counts them as candidates (simulate evicts them before its first session)")


def cmd_compare(args: argparse.Namespace, out: TextIO) -> int:
    """``npu-place compare SCENARIO...`` (or the regression mode with ``--suite``)."""
    if args.suite:
        try:
            from benchmarks.regression import run_regression
        except ImportError:
            raise CliError("the regression suite is not available yet", EXIT_FAILED) from None
        return run_regression(args, out)
    if not args.scenarios:
        raise CliError("compare needs SCENARIO files (or --suite for the regression mode)")
    rows = []
    records = []
    for scenario in args.scenarios:
        problem = load_problem(scenario)
        check_weights(problem, args.weights)
        greedy = solve(problem, engine="greedy", seed=args.seed, weights=args.weights)
        cpsat = solve(problem, engine="cpsat", time_limit=args.time_limit,
                      workers=args.workers, seed=args.seed, weights=args.weights,
                      deterministic_time=args.deterministic_time)
        for result in (greedy, cpsat):
            m = result.metrics
            rows.append([str(scenario), result.engine if result is greedy else "cpsat",
                         result.status.value, str(m.placed_jobs),
                         f"{m.origin_hits}/{m.origin_candidates}", str(m.fault_returns),
                         str(m.subhealthy_nodes), str(m.reserve_used), str(m.fragment_score),
                         str(m.affinity_spill), str(result.objective),
                         "-" if result.bound is None else str(result.bound),
                         f"{result.wall_seconds:.3f}"])
            records.append({"scenario": str(scenario), "engine-run":
                            "greedy" if result is greedy else "cpsat",
                            "answer-engine": result.engine, "status": result.status.value,
                            "objective": result.objective, "bound": result.bound,
                            "wall-seconds": round(result.wall_seconds, 6),
                            "metrics": m.to_model().model_dump(by_alias=True)})
    if args.format == "table":
        header = ["scenario", "engine", "status", "placed", "hits", "fault-ret", "subhealthy",
                  "reserve", "fragment", "spill", "objective", "bound", "wall-s"]
        out.write(_table(rows, header) + "\n")
    else:
        out.write(dump_data(records, args.format))
    return EXIT_OK


def cmd_examples(args: argparse.Namespace, out: TextIO) -> int:
    """``npu-place examples``: list (or print) the bundled scenarios."""
    if args.name:
        out.write(example_path(args.name).read_text(encoding="utf-8"))
        return EXIT_OK
    for name in example_names():
        out.write(f"{name}\t{example_path(name)}\n")
    return EXIT_OK


def _unix_time(text: str) -> int:
    """``--now``: unix seconds, or an ISO 8601 time such as ``2026-12-01T05:00:00Z``."""
    from datetime import datetime

    try:
        return int(text)
    except ValueError:
        pass
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected unix seconds or an ISO 8601 time, got "
                                         f"{text!r}") from None


def cmd_import(args: argparse.Namespace, out: TextIO) -> int:
    """``npu-place import``: kubectl dumps or the live API → a contract scenario."""
    from models.io import format_for_path, load_scenario
    from models.kube import ClusterImport, Diagnostics, import_dumps

    live = args.kubeconfig is not None or args.in_cluster
    if live and args.paths:
        raise CliError("give dump PATHs or --kubeconfig/--in-cluster, not both")
    if not live and not args.paths:
        raise CliError("import needs dump PATHs (files, directories or '-'), or --kubeconfig")
    previous = load_scenario(args.previous) if args.previous else None
    if live:
        from models.kube.live import read_live

        importer = ClusterImport(Diagnostics())
        read_live(importer.add, importer.diag, kubeconfig=args.kubeconfig or None,
                  context=args.context, in_cluster=args.in_cluster)
        result = importer.build(now=args.now, previous=previous)
    else:
        result = import_dumps(args.paths, now=args.now, previous=previous)
    fmt = args.format or (format_for_path(args.output) if args.output else "yaml")
    emit(dump_data(result.data, fmt), args.output, out)
    for line in result.warnings:
        sys.stderr.write(f"warning: {line}\n")
    sys.stderr.write(result.summary() + "\n")
    return EXIT_OK


def _optional(module: str, func: str) -> Callable[[argparse.Namespace, TextIO], int]:
    def run(args: argparse.Namespace, out: TextIO) -> int:
        try:
            mod = __import__(module, fromlist=[func])
        except ImportError:
            raise CliError(f"'{args.command}' is not available yet", EXIT_FAILED) from None
        result: int = getattr(mod, func)(args, out)
        return result

    return run


# --------------------------------------------------------------------------- parser


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def add_engine_options(parser: argparse.ArgumentParser, *, engine: bool = True,
                       weights: bool = False) -> None:
    """The options every solving command shares."""
    if engine:
        parser.add_argument("--engine", choices=ENGINES, default="auto",
                            help="greedy, cpsat, or auto (greedy then CP-SAT; default)")
    parser.add_argument("--time-limit", type=_bounded(check_time_limit, float), default=10.0,
                        metavar="S", help="wall-clock budget per placement in seconds, at "
                                          "most 604800 (default 10)")
    parser.add_argument("--workers", type=_bounded(check_workers, int), default=1, metavar="N",
                        help="CP-SAT search workers, 1 to 64 (default 1)")
    parser.add_argument("--seed", type=_bounded(check_seed, int), default=0, metavar="N",
                        help="random seed of the CP-SAT search, 0 to 2147483647 (default 0)")
    parser.add_argument("--deterministic-time", type=_bounded(check_deterministic_time, float),
                        default=None,
                        metavar="D", dest="deterministic_time",
                        help="bound CP-SAT by its deterministic time D (same input and seed "
                             "give the same answer on any machine and load; the wall-clock "
                             "limit stays as a safety net)")
    if not weights:
        return
    parser.add_argument("--weights", type=_weights, default=None, metavar="JSON",
                        help="objective weights, e.g. '{\"fragment\": 0, \"subhealthy\": 8}' "
                             "(keys: placed, origin-hit, fault-return, affinity-spill, "
                             "subhealthy, reserve, fragment, priority-levels; default: "
                             "automatic lexicographic weights)")


def _bounded(check: Callable[[Any, str], Any], kind: type) -> Callable[[str], Any]:
    """An ``argparse`` type: convert with ``kind``, then apply a :mod:`models.limits` check."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
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


def _in_range(kind: type, low: float, high: float) -> Callable[[str], Any]:
    """An ``argparse`` type: ``kind`` within ``low .. high`` (:func:`models.limits.check_range`)."""
    return _bounded(lambda value, name: check_range(value, name, low, high), kind)


def _weights(text: str) -> Weights:
    try:
        return Weights.model_validate(json.loads(text))
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or '(the object)'}: {error['msg']}"
            for error in exc.errors())
        raise argparse.ArgumentTypeError(problems) from None


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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``npu-place``."""
    parser = argparse.ArgumentParser(
        prog="npu-place",
        description="Placement engine for Ascend NPU gang jobs (greedy port + CP-SAT), "
                    "preferring each pod's previous node.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("validate", help="check a scenario, and optionally a placement")
    p.add_argument("scenario", metavar="SCENARIO")
    p.add_argument("placement", metavar="PLACEMENT", nargs="?")
    p.add_argument("--format", choices=("table", "json", "yaml"), default="table")
    p.set_defaults(run=cmd_validate)

    p = sub.add_parser("plan", help="place the pending jobs of a scenario")
    p.add_argument("scenario", metavar="SCENARIO", nargs="?",
                   help=f"scenario file (default: the bundled example '{DEFAULT_EXAMPLE}')")
    p.add_argument("--example", metavar="NAME", help="run a bundled example by name")
    add_engine_options(p, weights=True)
    p.add_argument("--format", choices=("table", "json", "yaml"), default="table")
    p.add_argument("--output", metavar="FILE", help="write the answer to FILE")
    p.set_defaults(run=cmd_plan)

    p = sub.add_parser("compare", help="greedy vs CP-SAT side by side, or the regression suite")
    p.add_argument("scenarios", metavar="SCENARIO", nargs="*")
    add_engine_options(p, engine=False, weights=True)
    p.add_argument("--format", choices=("table", "json", "yaml"), default="table")
    p.add_argument("--suite", choices=("quick", "full"),
                   help="re-run a stored benchmark suite (regression mode)")
    p.add_argument("--baseline", metavar="FILE", help="baseline file of the regression mode")
    p.add_argument("--write-baseline", action="store_true",
                   help="write the baseline instead of comparing against it")
    p.add_argument("--out", metavar="DIR", help="where the regression mode writes its report")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="regression mode: Dask scheduler to run on (default: a local cluster)")
    p.set_defaults(run=cmd_compare)

    p = sub.add_parser("simulate", help="multi-session what-if: events, placements, cache")
    p.add_argument("scenario", metavar="SCENARIO")
    p.add_argument("events", metavar="EVENTS")
    add_engine_options(p)
    p.add_argument("--format", choices=("table", "json", "yaml"), default="table")
    p.add_argument("--plot", metavar="FILE.png", help="plot hit rate and pending jobs")
    p.add_argument("--save-state", metavar="FILE", help="write the final state as a scenario")
    p.add_argument("--output", metavar="FILE", help="write the report to FILE")
    p.set_defaults(run=_optional("solver.simulate", "cmd_simulate"))

    p = sub.add_parser("bench", help="solver-vs-greedy benchmark suite with reports and plots")
    p.add_argument("--suite", choices=("quick", "full"), default="quick")
    add_engine_options(p, engine=False)
    p.add_argument("--out", metavar="DIR", default="bench-out")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="Dask scheduler to run the cells on (default: a local cluster)")
    p.add_argument("--dask-workers", type=_positive_int, metavar="N", dest="dask_workers",
                   help="worker processes of the local cluster (default: the cores)")
    p.set_defaults(run=_optional("benchmarks.suite", "cmd_bench"))

    p = sub.add_parser("import", help="kubectl dumps or a live cluster -> a scenario")
    p.add_argument("paths", metavar="PATH", nargs="*",
                   help="kubectl get -o json|yaml output: files, directories, or - (stdin)")
    p.add_argument("--kubeconfig", metavar="FILE", nargs="?", const="", default=None,
                   help="read the cluster live (list calls only); FILE defaults to "
                        "$KUBECONFIG or ~/.kube/config")
    p.add_argument("--context", metavar="C", help="kubeconfig context (default: current)")
    p.add_argument("--in-cluster", action="store_true",
                   help="read the cluster live with the pod's service account")
    p.add_argument("--now", type=_unix_time, metavar="T",
                   help="session time, unix seconds or ISO 8601 (default: the clock)")
    p.add_argument("--previous", metavar="SCENARIO",
                   help="merge the affinity cache of an earlier imported scenario")
    p.add_argument("--format", choices=("yaml", "json"), default=None,
                   help="output format (default: from --output's suffix, else yaml)")
    p.add_argument("--output", metavar="FILE", help="write the scenario to FILE")
    p.set_defaults(run=cmd_import)

    p = sub.add_parser("sweep", help="what-if grid of scenarios x overrides x engines on Dask")
    p.add_argument("grid", metavar="GRID", help="grid file (YAML or JSON; see README)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="Dask scheduler address (default: a local cluster, one worker per core)")
    p.add_argument("--workers", type=_positive_int, metavar="N",
                   help="worker processes of the local cluster (default: the cores)")
    p.add_argument("--out", metavar="DIR", default="sweep-out",
                   help="results.csv, report.md and plots (default sweep-out)")
    p.add_argument("--resume", action="store_true",
                   help="continue the sweep in --out; finished cells are not rerun")
    p.add_argument("--baseline", metavar="OLD/results.csv",
                   help="compare cell by cell with an earlier sweep; exit 1 on a regression")
    p.add_argument("--deterministic-time", type=_bounded(check_deterministic_time, float),
                   default=None, metavar="D", dest="deterministic_time",
                   help="bound every cell's CP-SAT by deterministic time D (replaces the "
                        "grid's deterministic-time)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(run=_optional("benchmarks.sweep", "cmd_sweep"))

    p = sub.add_parser("serve", help="run the planning service (HTTP, loopback by default)")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=_in_range(int, 0, 65535), default=8080,
                   help="port, 0 for any free one (default 8080)")
    p.add_argument("--workers", type=_in_range(int, 1, MAX_WORKERS), default=1, metavar="N",
                   help=f"solver worker processes: requests solved at once, 1 to {MAX_WORKERS} "
                        "(default 1)")
    p.add_argument("--queue", type=_in_range(int, 0, 1024), default=8, metavar="N",
                   help="solves that may wait for a worker before 503, 0 to 1024 (default 8)")
    p.add_argument("--max-body-mb", type=_in_range(float, 0.001, 1024), default=64.0,
                   metavar="M", dest="max_body_mb",
                   help="largest request body in MB, at most 1024 (default 64)")
    p.add_argument("--default-time-limit", type=_bounded(check_time_limit, float),
                   default=1.0, metavar="S", dest="default_time_limit",
                   help="time limit of plan calls without time-limit (default 1)")
    p.add_argument("--max-clusters", type=_in_range(int, 1, 1024), default=16, metavar="N",
                   dest="max_clusters", help="stored clusters at most, 1 to 1024 (default 16)")
    p.add_argument("--recycle-after", type=_in_range(int, 0, 10**9), default=1000,
                   metavar="N", dest="recycle_after",
                   help="replace a worker process after N requests (0: never; default 1000)")
    p.add_argument("--log-level", default="info", dest="log_level",
                   choices=("debug", "info", "warning", "error"))
    p.set_defaults(run=_optional("solver.service.server", "cmd_serve"))

    p = sub.add_parser("examples", help="list the bundled example scenarios, or print one")
    p.add_argument("name", nargs="?")
    p.set_defaults(run=cmd_examples)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    """Entry point of ``npu-place``; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    try:
        with contextlib.redirect_stderr(err):  # argparse reports usage errors on stderr
            args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_INVALID
    try:
        code: int = args.run(args, out)
        return code
    except InputError as exc:
        # The listing is capped: a file with 10^6 mistakes gets N lines and a count.
        for message in exc.messages[:MAX_ERRORS_SHOWN]:
            err.write(f"error: {escape_text(message, 2000)}\n")
        hidden = len(exc.messages) - MAX_ERRORS_SHOWN
        if hidden > 0:
            err.write(f"... and {hidden} more error(s) not shown\n")
        err.write(f"{len(exc.messages)} input error(s); nothing was placed\n")
        return EXIT_INVALID
    except CliError as exc:
        err.write(f"error: {escape_text(str(exc), 2000)}\n")
        return exc.code
    except EngineNotAvailable as exc:
        err.write(f"error: {exc}\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130
    except Exception as exc:  # the CLI never shows a traceback unless asked to
        if os.environ.get("NPU_PLACE_DEBUG"):
            traceback.print_exc(file=err)
        err.write(f"internal error: {type(exc).__name__}: {escape_text(str(exc), 2000)}\n"
                  "(set NPU_PLACE_DEBUG=1 for a traceback; please report it)\n")
        return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
