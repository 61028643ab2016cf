"""The anytime curve: what ``solve`` answers under short budgets on large batches.

For every instance (by default the 4,096- and 8,192-node batches of every family, seeds 0
and 1) and every budget, ``solve(engine="auto", time_limit=T)`` runs in this process,
model building included, and the row records the answer's objective and origin hits, the
engine that produced it, and the overrun ``wall − T``.  The report's "budget" table gives
per budget and family the share of the best-known gain captured (``gain(T)`` over the
best gain any budget reached on that instance), the origin hits lost against that best
answer, how often CP-SAT's own search produced the answer, the overrun p50/p99/max, the
calls that returned with a search still running, and the budgets whose answer is worse
than a shorter budget's (each such monotonicity violation is listed below the table);
the plot draws the share captured and the origin hit rate against the budget.  With
``--deterministic`` the budgets are CP-SAT deterministic times instead.

Run it with ``python -m benchmarks.anytime --out DIR`` (see ``--help``).  Wall-clock
figures depend on the machine and its load; run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import csv
import gc
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from benchmarks.generators import FAMILIES, GenParams, case_name, generate_case
from benchmarks.outputs import save_figure
from models.compiled import Problem, compile_scenario
from solver.doors import extra_hint
from solver.engine import WORKER_THREAD_NAME
from solver.facade import preload, solve

#: The budgets of the curve, in seconds.
BUDGETS: tuple[float, ...] = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
#: Jobs per batch at a scale (as the full suite: 10 at 4,096 nodes, 11 at 8,192; as the
#: scale suite above: 16).
BATCH_JOBS = {4096: 10, 8192: 11, 12288: 16, 16384: 16, 24576: 16, 32768: 16, 65536: 16}

COLUMNS = ("instance", "family", "nodes", "jobs", "budget", "wall-seconds", "overrun-ms",
           "engine", "status", "objective", "greedy-objective", "gain", "origin-hits",
           "origin-candidates", "threads-after", "search-after", "deterministic",
           "share-captured", "hits-lost", "bound", "gap")


@dataclass(frozen=True)
class AnytimeInstance:
    """A generated instance of the curve."""

    name: str
    family: str
    nodes: int
    jobs: int
    params: GenParams


def default_instances(scales: Sequence[int] = (4096, 8192),
                      seeds: Sequence[int] = (0, 1),
                      families: Sequence[str] = FAMILIES) -> list[AnytimeInstance]:
    """The large batches of the curve: every family × scale × seed."""
    out = []
    for nodes in scales:
        for family in families:
            for seed in seeds:
                jobs = BATCH_JOBS.get(nodes, 10)
                params = GenParams(family, nodes=nodes, seed=seed, jobs=jobs)
                out.append(AnytimeInstance(case_name(params), family, nodes, jobs, params))
    return out


def run_instance(instance: AnytimeInstance, problem: Problem, budgets: Iterable[float],
                 seed: int = 0, deterministic: bool = False) -> list[dict[str, Any]]:
    """Solve one instance once per budget; one row per budget.

    With ``deterministic`` each budget is CP-SAT's deterministic time (the wall-clock
    limit is then only a safety net of :func:`deterministic_wall_limit` seconds, and the
    overrun column means nothing).
    """
    rows = []
    for budget in budgets:
        gc.collect()
        started = time.perf_counter()
        if deterministic:
            result = solve(problem, engine="auto", time_limit=deterministic_wall_limit(budget),
                           workers=1, seed=seed, deterministic_time=budget)
        else:
            result = solve(problem, engine="auto", time_limit=budget, workers=1, seed=seed)
        wall = time.perf_counter() - started
        greedy = result.greedy_objective if result.greedy_objective is not None else 0
        rows.append({
            "instance": instance.name, "family": instance.family, "nodes": instance.nodes,
            "jobs": instance.jobs, "budget": budget, "wall-seconds": round(wall, 4),
            "overrun-ms": round(1000 * (wall - budget), 1) if not deterministic else 0.0,
            "engine": result.engine,
            "status": result.status.value, "objective": result.objective,
            "greedy-objective": greedy, "gain": result.objective - greedy,
            "origin-hits": result.metrics.origin_hits,
            "origin-candidates": result.metrics.origin_candidates,
            "threads-after": threading.active_count(),
            # a CP-SAT search still running after the call returned (should be 0)
            "search-after": sum(1 for t in threading.enumerate()
                                if t.name == WORKER_THREAD_NAME and t.is_alive()),
            "deterministic": deterministic,
            # the answer's bound and relative gap (None: the answer has no bound)
            "bound": result.bound,
            "gap": None if result.gap is None else round(result.gap, 6),
        })
    return rows


def deterministic_wall_limit(budget: float) -> float:
    """Wall-clock safety net of a deterministic-time run of ``budget``."""
    return max(120.0, 60.0 * budget)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


def add_shares(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add ``share-captured`` and ``hits-lost`` to every row (in place; returns ``rows``).

    ``share-captured`` is ``gain(T) / best gain`` over all budgets of the row's instance
    (``None`` when no budget beats greedy: there is nothing to capture); ``hits-lost`` is
    the origin hits of the instance's best answer minus the row's.
    """
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by[str(row["instance"])].append(row)
    for mine in by.values():
        best = max(mine, key=lambda r: (int(r["objective"]), -float(r["budget"])))
        best_gain = int(best["gain"])
        for row in mine:
            row["share-captured"] = (round(int(row["gain"]) / best_gain, 4)
                                     if best_gain > 0 else None)
            row["hits-lost"] = int(best["origin-hits"]) - int(row["origin-hits"])
    return rows


def violations(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every pair of budgets ``T1 < T2`` of an instance whose answer at ``T2`` is worse."""
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by[str(row["instance"])].append(row)
    out = []
    for name in sorted(by):
        mine = sorted(by[name], key=lambda r: float(r["budget"]))
        for i, low in enumerate(mine):
            for high in mine[i + 1:]:
                if int(high["objective"]) < int(low["objective"]):
                    out.append({"instance": name, "family": low["family"],
                                "budget-low": float(low["budget"]),
                                "budget-high": float(high["budget"]),
                                "objective-low": int(low["objective"]),
                                "objective-high": int(high["objective"]),
                                "hits-low": int(low["origin-hits"]),
                                "hits-high": int(high["origin-hits"])})
    return out


def budget_table(rows: list[dict[str, Any]]) -> list[list[str]]:
    """Per budget and family: share of the best-known gain captured, hits lost, CP-SAT
    share, overrun p50/p99/max, calls that returned with a search still running, and
    monotonicity violations (this budget worse than a shorter one)."""
    add_shares(rows)
    broken = violations(rows)
    groups: dict[tuple[float, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(float(row["budget"]), str(row["family"]))].append(row)
        groups[(float(row["budget"]), "all")].append(row)
    table = []
    for (budget, family) in sorted(groups, key=lambda k: (k[0], k[1] == "all", k[1])):
        group = groups[(budget, family)]
        shares = [float(r["share-captured"]) for r in group
                  if r.get("share-captured") is not None]
        lost = [int(r["hits-lost"]) for r in group]
        by_cpsat = sum(1 for r in group if r["engine"] == "cpsat" and int(r["gain"]) > 0)
        overruns = [float(r["overrun-ms"]) for r in group]
        running = sum(1 for r in group if int(r.get("search-after", 0)) > 0)
        names = {str(r["instance"]) for r in group}
        worse = sum(1 for v in broken if v["budget-high"] == budget and v["instance"] in names)
        table.append([
            f"{budget:g}", family, str(len(group)),
            f"{100 * statistics.median(shares):.0f} %" if shares else "-",
            f"{100 * min(shares):.0f} %" if shares else "-",
            f"{sum(lost)}", f"{max(lost)}",
            f"{by_cpsat}/{len(group)}",
            f"{_percentile(overruns, 0.5):.1f}", f"{_percentile(overruns, 0.99):.1f}",
            f"{max(overruns):.1f}", f"{running}/{len(group)}", str(worse),
        ])
    return table


BUDGET_HEADER = ["budget s", "family", "runs", "median share captured", "min share captured",
                 "hits lost (sum)", "hits lost (max)", "improved by CP-SAT search",
                 "overrun p50 ms", "overrun p99 ms", "overrun max ms", "search still running",
                 "worse than a shorter budget"]
VIOLATION_HEADER = ["instance", "shorter budget s", "longer budget s", "objective",
                    "origin hits"]


def goal_summary(rows: list[dict[str, Any]], short: float = 1.0) -> str:
    """The anytime goals: median share captured at ``short``, violations, worst overrun."""
    add_shares(rows)
    shares = [float(r["share-captured"]) for r in rows
              if float(r["budget"]) == short and r.get("share-captured") is not None]
    overruns = [float(r["overrun-ms"]) for r in rows]
    running = sum(1 for r in rows if int(r.get("search-after", 0)) > 0)
    median = f"{100 * statistics.median(shares):.0f} %" if shares else "-"
    return (f"median share of the best-known gain captured at {short:g} s: {median} "
            f"(over {len(shares)} instances with a gain); monotonicity violations: "
            f"{len(violations(rows))}; overrun max: "
            f"{max(overruns) if overrun_known(rows) else float('nan'):.1f} ms; "
            f"calls returned with a search running: {running}")


def size_table(rows: list[dict[str, Any]], budget: float) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the share of the best-known gain captured at ``budget``: one row
    per node count, one column per family (the median over seeds), then the median and
    the worst over every instance of that size ("-": no budget beat greedy)."""
    add_shares(rows)
    families = [f for f in FAMILIES if any(r["family"] == f for r in rows)]
    table = []
    for nodes in sorted({int(r["nodes"]) for r in rows}):
        at = [r for r in rows if int(r["nodes"]) == nodes and float(r["budget"]) == budget]
        cells = []
        for family in families:
            shares = [float(r["share-captured"]) for r in at
                      if r["family"] == family and r.get("share-captured") is not None]
            cells.append(f"{100 * statistics.median(shares):.0f} %" if shares else "-")
        shares = [float(r["share-captured"]) for r in at if r.get("share-captured") is not None]
        summary = (f"{100 * statistics.median(shares):.0f} % / {100 * min(shares):.0f} %"
                   if shares else "-")
        table.append([f"{nodes:,}", *cells, summary])
    return ["nodes", *families, "median / worst"], table


def gap_table(rows: list[dict[str, Any]]) -> list[list[str]]:
    """One row per instance: the answer's gap at every budget of the run, in percent."""
    budgets = sorted({float(r["budget"]) for r in rows})
    by: dict[str, dict[float, Any]] = defaultdict(dict)
    for row in rows:
        by[str(row["instance"])][float(row["budget"])] = row.get("gap")
    return [[name, *["-" if by[name].get(b) is None else f"{100 * float(by[name][b]):.3f} %"
                     for b in budgets]] for name in sorted(by)]


def family_gap_table(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the answers' gap to their bound: one row per node count and
    budget, one column per family (the median over its instances, in percent; "-": no
    answer there, "no bound": an answer without one)."""
    families = [f for f in FAMILIES if any(r["family"] == f for r in rows)]
    table = []
    for nodes in sorted({int(r["nodes"]) for r in rows}):
        for budget in sorted({float(r["budget"]) for r in rows if int(r["nodes"]) == nodes}):
            cells = []
            for family in families:
                at = [r for r in rows if int(r["nodes"]) == nodes
                      and float(r["budget"]) == budget and r["family"] == family]
                gaps = [float(r["gap"]) for r in at if r.get("gap") not in (None, "")]
                cells.append("-" if not at else "no bound" if len(gaps) < len(at)
                             else f"{100 * statistics.median(gaps):.2f} %")
            table.append([f"{nodes:,}", f"{budget:g}", *cells])
    return ["nodes", "budget s", *families], table


def overrun_known(rows: list[dict[str, Any]]) -> bool:
    """Whether the rows were measured by wall clock (overruns mean something)."""
    return bool(rows) and not any(r.get("deterministic") for r in rows)


def _markdown(rows: list[list[str]], header: list[str]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def write_report(rows: list[dict[str, Any]], out_dir: Path, command: str) -> Path:
    """Write ``anytime.csv``, ``anytime.md`` and (with matplotlib) ``anytime.png``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    add_shares(rows)
    with open(out_dir / "anytime.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(COLUMNS))
        writer.writeheader()
        writer.writerows(rows)
    broken = violations(rows)
    text = ["# Anytime curve", "", f"Command: `{command}`", "",
            "Share captured: the answer's gain over greedy divided by the best gain any "
            "budget reached on that instance (instances where no budget beats greedy are "
            "left out); hits lost: origin hits of that best answer minus this answer's.",
            "", goal_summary(rows), "", _markdown(budget_table(rows), BUDGET_HEADER), "",
            f"## Monotonicity violations ({len(broken)})", ""]
    if broken:
        text.append(_markdown([[v["instance"], f"{v['budget-low']:g}", f"{v['budget-high']:g}",
                                f"{v['objective-low']} → {v['objective-high']}",
                                f"{v['hits-low']} → {v['hits-high']}"] for v in broken],
                              VIOLATION_HEADER))
    else:
        text.append("None: no instance got a worse answer from a longer budget.")
    for budget in sorted({float(r["budget"]) for r in rows})[:-1]:
        header, table = size_table(rows, budget)
        text += ["", f"## Share of the best gain at {budget:g} s, per size and family", "",
                 _markdown(table, header)]
    gap_header, gap_rows = family_gap_table(rows)
    text += ["", "## Gap to the bound", "",
             "The answer's relative gap to its bound (`(bound - objective) / bound`), the "
             "median per size, budget and family (no bound: some answer there had none):",
             "", _markdown(gap_rows, gap_header), "",
             "Per instance and budget (- : no bound).", "",
             _markdown(gap_table(rows), ["instance", *[f"{b:g}" for b in
                                                      sorted({float(r['budget']) for r in rows})]]),
             ""]
    plotted = plot_anytime(rows, out_dir / "anytime.png")
    if plotted:
        text += ["![anytime curve](anytime.png)", ""]
    report = out_dir / "anytime.md"
    report.write_text("\n".join(text), encoding="utf-8")
    return report


def anytime_series(rows: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """What :func:`plot_anytime` draws, per family: the budgets, the median share of the
    best-known gain captured (%, ``nan`` where no instance has a gain) and the mean origin
    hit rate (%) at each budget."""
    add_shares(rows)
    series: dict[str, dict[str, list[float]]] = {}
    for family in sorted({str(r["family"]) for r in rows}):
        mine = [r for r in rows if r["family"] == family]
        budgets = sorted({float(r["budget"]) for r in mine})
        share = []
        hits = []
        for b in budgets:
            at = [r for r in mine if float(r["budget"]) == b]
            shares = [float(r["share-captured"]) for r in at
                      if r.get("share-captured") is not None]
            share.append(100 * statistics.median(shares) if shares else float("nan"))
            hits.append(statistics.mean(
                int(r["origin-hits"]) / max(1, int(r["origin-candidates"])) for r in at) * 100)
        series[family] = {"budget": budgets, "share": share, "hit-rate": hits}
    return series


def plot_anytime(rows: list[dict[str, Any]], path: Path,
                 metadata: dict[str, str] | None = None) -> bool:
    """Median share of the best-known gain captured, and origin hit rate, per budget
    (:func:`anytime_series`); ``metadata``: text chunks of the PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plots skipped: " + extra_hint("plot", "matplotlib"), file=sys.stderr)
        return False
    deterministic = not overrun_known(rows)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for family, line in anytime_series(rows).items():
        ax1.plot(line["budget"], line["share"], marker="o", label=family)
        ax2.plot(line["budget"], line["hit-rate"], marker="o", label=family)
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_xlabel("budget (CP-SAT deterministic time)" if deterministic else
                      "budget (s, wall clock, model building included)")
        ax.grid(True, alpha=0.3)
    ax1.set_ylabel("median % of the best-known gain captured")
    ax2.set_ylabel("mean origin hit rate (%)")
    ax1.legend(fontsize=8)
    ax1.set_title("share of the best gain over greedy")
    ax2.set_title("origin hits")
    fig.tight_layout()
    save_figure(fig, path, dpi=110, metadata=metadata)
    plt.close(fig)
    return True


def run(instances: Sequence[AnytimeInstance], budgets: Sequence[float], out: TextIO,
        seed: int = 0, deterministic: bool = False,
        after_instance: Callable[[list[dict[str, Any]]], object] | None = None,
        ) -> list[dict[str, Any]]:
    """Generate, compile and solve every instance at every budget; print progress.

    ``after_instance(rows)`` is called with the rows so far after each instance (``main``
    rewrites the report then, so that a long run cut short keeps what it measured).
    """
    rows: list[dict[str, Any]] = []
    for i, instance in enumerate(instances, 1):
        problem = compile_scenario(generate_case(instance.params).scenario)
        # warm the process once (imports, first-call caches), as a daemon would be: the
        # CP-SAT modules too, which solve() imports before its budget starts (the first
        # call's wall would count that import as an overrun)
        preload("auto")
        solve(problem, engine="greedy", time_limit=60)
        mine = run_instance(instance, problem, budgets, seed, deterministic)
        rows += mine
        out.write(f"[{i}/{len(instances)}] {instance.name}: " + ", ".join(
            f"{r['budget']:g}s {r['engine']} +{r['gain']} ({r['overrun-ms']:+.0f} ms)"
            for r in mine) + "\n")
        out.flush()
        if after_instance is not None:
            after_instance(rows)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.anytime``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.anytime",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default="anytime-out", help="output folder")
    parser.add_argument("--budgets", default=",".join(f"{b:g}" for b in BUDGETS),
                        help="comma-separated budgets in seconds")
    parser.add_argument("--scales", default="4096,8192", help="comma-separated node counts")
    parser.add_argument("--seeds", default="0,1", help="comma-separated generator seeds")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--seed", type=int, default=0, help="CP-SAT seed")
    parser.add_argument("--deterministic", action="store_true",
                        help="budgets are CP-SAT deterministic times (reproducible under any "
                             "load; the overrun columns then mean nothing)")
    args = parser.parse_args(argv)
    budgets = [float(x) for x in args.budgets.split(",")]
    instances = default_instances([int(x) for x in args.scales.split(",")],
                                  [int(x) for x in args.seeds.split(",")],
                                  [x for x in args.families.split(",") if x])
    command = "python -m benchmarks.anytime " + " ".join(argv or sys.argv[1:])
    rows = run(instances, budgets, sys.stdout, args.seed, args.deterministic,
               after_instance=lambda so_far: write_report(so_far, Path(args.out),
                                                          command.strip()))
    report = write_report(rows, Path(args.out), command.strip())
    print(goal_summary(rows))
    print(f"report: {report}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
