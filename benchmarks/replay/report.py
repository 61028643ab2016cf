"""What a replay writes: ``summary.csv``, ``sessions.csv``, ``report.md`` and plots.

``summary.csv`` has one row per engine (and per seed, for a many-seed run):

``sessions``, ``pods-placed``
    Sessions of the day; pods placed over the day (a gang counts all its ranks, a
    scale-up its new ranks).
``pulls``, ``pulled-gb``, ``pull-minutes``
    Image pulls (a rank landing on a node without its image; once per node and image),
    their gigabytes, and the node-minutes they take at the spec's bandwidth.
``image-hit-rate``
    Placed pods whose node already held the image: the pulls avoided, whatever the reason
    (an origin return, another job with the same image, an earlier stay).
``origin-hits``, ``origin-candidates``, ``origin-hit-rate``, ``rfc-target-met``
    Placed ranks with a live previous node (not fault ranks), those placed back on it, the
    ratio (the RFC's "pod 回原节点命中率"), and whether it reaches the RFC's 80 %.
``origin-achievable``
    Candidates whose previous node could take them when the session began (healthy, room
    for them): the most hits any engine could get; the rest had their node taken or
    broken.
``pending-p50``, ``pending-p99``
    Jobs left pending after a session (median and 99th percentile over the sessions).
``wait-mean``, ``wait-p99``
    Sessions a job waited before it was placed (each pending episode; jobs still pending
    at the end count with their wait so far).
``evicted-pods``, ``reclaimed-jobs``, ``completed-jobs``, ``gc-deleted``
    Pods released by preempt/reclaim, node faults and pod faults; training gangs reclaimed
    by inference; gangs that ran to completion; images removed by GC.
``fragmentation-end``
    After the last session: the share of the free NPUs of healthy nodes that sit on partly
    used nodes (a whole-node gang rank cannot use them; vNPU nodes not counted).
``vnpu-pods``, ``vnpu-pulls``, ``vnpu-pulled-gb``, ``vnpu-origin-hit-rate``
    The part of ``pods-placed``, ``pulls``, ``pulled-gb`` and the origin hit rate that
    belongs to vNPU jobs (services' slices and training's whole cards on ``vnpu`` pools);
    empty rate without candidates.

Nothing in ``summary.csv`` or ``sessions.csv`` depends on the clock: the same spec, seed
and options give the same files (wall-clock times are in ``report.md`` only).
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import markdown_table
from benchmarks.outputs import open_output, save_figure, write_output
from benchmarks.replay.run import EngineRun, Replay

#: The RFC's target origin hit rate.
RFC_TARGET = 0.8
#: Columns of ``summary.csv`` (after ``seed`` and ``engine``).
SUMMARY_FIELDS: tuple[str, ...] = (
    "sessions", "pods-placed", "pulls", "pulled-gb", "pull-minutes", "image-hit-rate",
    "origin-hits", "origin-candidates", "origin-achievable", "origin-hit-rate",
    "rfc-target-met", "pending-p50",
    "pending-p99", "wait-mean", "wait-p99", "evicted-pods", "reclaimed-jobs",
    "completed-jobs", "gc-deleted", "fragmentation-end", "vnpu-pods", "vnpu-pulls",
    "vnpu-pulled-gb", "vnpu-origin-hit-rate",
)
#: Summary columns a many-seed report gives intervals for.
INTERVAL_FIELDS: tuple[str, ...] = (
    "pulls", "pulled-gb", "pull-minutes", "image-hit-rate", "origin-hit-rate", "pending-p99",
    "wait-mean", "evicted-pods", "fragmentation-end",
)


def _percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else 0.0


def summary_row(run: EngineRun, seed: int) -> dict[str, Any]:
    """One engine's ``summary.csv`` row."""
    hits = int(run.total("hits"))
    candidates = int(run.total("placed_candidates"))
    pods = int(run.total("placed_pods"))
    rate = hits / candidates if candidates else math.nan
    pending = [s.pending_jobs for s in run.sessions]
    return {
        "seed": seed,
        "engine": run.engine,
        "sessions": len(run.sessions),
        "pods-placed": pods,
        "pulls": int(run.total("pulls")),
        "pulled-gb": round(run.total("pulled_gb"), 3),
        "pull-minutes": round(run.total("pull_minutes"), 1),
        "image-hit-rate": round(run.total("image_hits") / pods, 4) if pods else "",
        "origin-hits": hits,
        "origin-candidates": candidates,
        "origin-achievable": int(run.total("achievable")),
        "origin-hit-rate": "" if math.isnan(rate) else round(rate, 4),
        "rfc-target-met": "" if math.isnan(rate) else ("yes" if rate >= RFC_TARGET else "no"),
        "pending-p50": round(_percentile(pending, 50), 2),
        "pending-p99": round(_percentile(pending, 99), 2),
        "wait-mean": round(statistics.fmean(run.waits), 3) if run.waits else 0.0,
        "wait-p99": round(_percentile(run.waits, 99), 2),
        "evicted-pods": int(run.total("evicted_pods")),
        "reclaimed-jobs": int(run.total("reclaimed_jobs")),
        "completed-jobs": int(run.total("completed_jobs")),
        "gc-deleted": run.gc_deleted,
        "fragmentation-end": round(run.fragmentation_end, 4),
        "vnpu-pods": int(run.total("vnpu_pods")),
        "vnpu-pulls": int(run.total("vnpu_pulls")),
        "vnpu-pulled-gb": round(run.total("vnpu_pulled_gb"), 3),
        "vnpu-origin-hit-rate": round(run.total("vnpu_hits") / v, 4)
        if (v := run.total("vnpu_candidates")) else "",
    }


def write_csv(path: Path, rows: Sequence[dict[str, Any]], fields: Sequence[str]) -> None:
    """Write ``rows`` with ``fields`` as the header."""
    with open_output(path) as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fields), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, "") for k in fields})


def dict_table(rows: Sequence[dict[str, Any]], fields: Sequence[str]) -> str:
    """A markdown table of ``fields`` of each row."""
    return markdown_table(fields, [[str(row.get(k, "")) for k in fields] for row in rows])


#: Columns of the compact summary table in ``report.md`` and the README.
BRIEF_FIELDS: tuple[str, ...] = (
    "engine", "pods-placed", "pulls", "pulled-gb", "pull-minutes", "image-hit-rate",
    "origin-hit-rate", "rfc-target-met", "pending-p99", "wait-mean", "evicted-pods",
    "fragmentation-end",
)


def hourly_hit_rates(run: EngineRun) -> list[tuple[int, float | None]]:
    """Origin hit rate per hour of the day (``None`` when no candidate was placed)."""
    hits: dict[int, int] = {}
    cands: dict[int, int] = {}
    for row in run.sessions:
        hour = int(row.hour)
        hits[hour] = hits.get(hour, 0) + row.hits
        cands[hour] = cands.get(hour, 0) + row.placed_candidates
    return [(h, hits[h] / cands[h] if cands[h] else None) for h in sorted(cands)]


def plot_series(replay: Replay) -> dict[str, Any]:
    """The data series the two plots draw, per engine: ``pulled-gb`` (cumulative GB at
    each session's hour, from 0 at hour 0) and ``hit-rate`` (origin hit rate in % per
    hour of the day, the hours with a placed candidate).  :func:`write_plots` draws
    exactly these, so a check of the series is a check of the plots."""
    pulled: dict[str, dict[str, list[float]]] = {}
    rates: dict[str, dict[str, list[float]]] = {}
    for run in replay.runs:
        xs = [0.0] + [float(row.hour) for row in run.sessions]
        ys = np.cumsum([0.0] + [row.pulled_gb for row in run.sessions])
        pulled[run.engine] = {"hour": xs, "gb": [round(float(y), 6) for y in ys]}
        points = [(h, 100.0 * r) for h, r in hourly_hit_rates(run) if r is not None]
        rates[run.engine] = {"hour": [p[0] + 0.5 for p in points],
                             "percent": [round(p[1], 6) for p in points]}
    return {"title": f"{replay.day.settings.name}, seed {replay.day.seed}",
            "pulled-gb": pulled, "hit-rate": rates, "rfc-target-percent": 100.0 * RFC_TARGET}


def write_plots(replay: Replay, out: Path, prefix: str = "") -> list[str]:
    """``pulled-gb.png`` and ``hit-rate.png`` (each name after ``prefix``) from
    :func:`plot_series`; returns the file names written."""
    return draw_plots(plot_series(replay), out, prefix)


def draw_plots(series: dict[str, Any], out: Path, prefix: str = "",
               metadata: dict[str, str] | None = None) -> list[str]:
    """Draw :func:`plot_series`'s ``series`` as ``pulled-gb.png`` and ``hit-rate.png``
    (each name after ``prefix``; ``metadata``: text chunks of both PNG files); returns
    the file names written."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    title = series["title"]
    fig = Figure(figsize=(7.5, 4.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for engine, line in series["pulled-gb"].items():
        ax.step(line["hour"], line["gb"], where="post",
                label=f"{engine} ({line['gb'][-1]:.0f} GB)")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("hour of the day")
    ax.set_ylabel("image GB pulled (cumulative)")
    ax.set_title(f"Image pulls over the day: {title}")
    ax.legend(loc="upper left", fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, out / f"{prefix}pulled-gb.png", dpi=100, metadata=metadata)

    fig = Figure(figsize=(7.5, 4.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for engine, line in series["hit-rate"].items():
        if line["hour"]:
            ax.plot(line["hour"], line["percent"], marker="o", markersize=3, label=engine)
    ax.axhline(series["rfc-target-percent"], color="tab:green", linestyle="--", linewidth=1,
               label="RFC target 80 %")
    ax.set_ylim(0, 105)
    ax.set_xlabel("hour of the day")
    ax.set_ylabel("origin hit rate (%) of re-placed pods")
    ax.set_title(f"Origin hit rate per hour: {title}")
    ax.legend(loc="lower left", fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, out / f"{prefix}hit-rate.png", dpi=100, metadata=metadata)
    return [f"{prefix}pulled-gb.png", f"{prefix}hit-rate.png"]


def render_report(replay: Replay, rows: Sequence[dict[str, Any]], plots: Sequence[str],
                  command: str | None = None) -> str:
    """``report.md`` of one replayed day."""
    day = replay.day
    settings = day.settings
    opts = replay.options
    det = (f"deterministic time {opts.deterministic_time:g} per session"
           if opts.deterministic_time is not None
           else f"wall clock {opts.time_limit:g} s per session (load-dependent)")
    lines = [f"# Replay of `{settings.name}`, seed {day.seed}", ""]
    if settings.description:
        lines += [settings.description, ""]
    if command:
        lines += ["```", command, "```", ""]
    lines += [
        f"* {len(day.sessions)} sessions, {settings.cadence}; {len(day.scenario.nodes)} nodes "
        f"({settings.cluster}).",
        f"* Images on a {settings.image_disk_gb:g} GB disk per node, GC at "
        f"{settings.gc.high_percent:g} % down to {settings.gc.low_percent:g} % "
        f"(least recently used first); pulls at {settings.pull_gb_per_minute:g} GB/min.",
        f"* Engines: {', '.join(r.engine for r in replay.runs)}; cpsat = engine auto, one "
        f"worker, {det}, seed {opts.solver_seed}.",
        "",
        "## Summary",
        "",
        dict_table(rows, BRIEF_FIELDS),
        "",
        "Full columns in `summary.csv`; one row per session and engine in `sessions.csv`.",
        "",
    ]
    base = next((r for r in rows if r["engine"] == "upstream"), None)
    if base is not None:
        for row in rows:
            if row is base:
                continue
            gb = float(row["pulled-gb"]) - float(base["pulled-gb"])
            minutes = float(row["pull-minutes"]) - float(base["pull-minutes"])
            pulls = int(row["pulls"]) - int(base["pulls"])
            lines.append(f"* `{row['engine']}` minus `upstream`: {pulls:+d} pulls, {gb:+.0f} GB "
                         f"pulled, {minutes:+.0f} node-minutes of pulling (negative: saved).")
        lines.append("")
    if any(int(r["vnpu-pods"]) for r in rows):
        lines += ["## vNPU jobs", "",
                  "Their part of the summary (services' slices and training's whole cards "
                  "on the vnpu pools):", "",
                  dict_table(rows, ("engine", "vnpu-pods", "vnpu-pulls", "vnpu-pulled-gb",
                                    "vnpu-origin-hit-rate")), ""]
    lines += ["## Origin hit rate per hour", "",
              "| hour | " + " | ".join(r.engine for r in replay.runs) + " |",
              "|---|" + "---|" * len(replay.runs)]
    per_engine = [dict(hourly_hit_rates(r)) for r in replay.runs]
    hours = sorted({h for rates in per_engine for h in rates})
    for hour in hours:
        cells = []
        for rates in per_engine:
            rate = rates.get(hour)
            cells.append("-" if rate is None else f"{100 * rate:.0f} %")
        lines.append(f"| {hour:02d} | " + " | ".join(cells) + " |")
    lines.append("")
    if plots:
        lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    lines += ["## Run", ""]
    for run in replay.runs:
        lines.append(f"* `{run.engine}`: {run.wall_seconds:.1f} s wall clock; "
                     f"{run.skipped_events} events skipped (their job had finished in this "
                     "engine's day)")
    lines += ["", "Wall-clock times depend on the machine and its load; every other figure "
              "is a function of the spec, the seed and the options."]
    return "\n".join(lines) + "\n"


def write_replay(replay: Replay, out: Path, plots: bool = True,
                 command: str | None = None) -> list[dict[str, Any]]:
    """Write ``summary.csv``, ``sessions.csv``, plots and ``report.md`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [summary_row(run, replay.day.seed) for run in replay.runs]
    write_csv(out / "summary.csv", rows, ("seed", "engine", *SUMMARY_FIELDS))
    session_rows = [s.to_row() for run in replay.runs for s in run.sessions]
    fields = list(session_rows[0]) if session_rows else ["engine"]
    write_csv(out / "sessions.csv", session_rows, fields)
    names = write_plots(replay, out) if plots else []
    write_output(out / "report.md", render_report(replay, rows, names, command))
    return rows


# --------------------------------------------------------------------------- many seeds


def mean_interval(values: Sequence[float], resamples: int = 2000, level: float = 0.95
                  ) -> tuple[float, float, float]:
    """Mean and a bootstrap percentile interval of the mean (seeded: reproducible)."""
    data = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if data.size == 0:
        return math.nan, math.nan, math.nan
    if data.size == 1:
        return float(data[0]), float(data[0]), float(data[0])
    rng = np.random.default_rng(0)
    means = rng.choice(data, size=(resamples, data.size), replace=True).mean(axis=1)
    tail = (1.0 - level) / 2.0 * 100.0
    return (float(data.mean()), float(np.percentile(means, tail)),
            float(np.percentile(means, 100.0 - tail)))


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


#: The vNPU jobs' columns a many-seed report gives intervals for (days with vNPU pods).
VNPU_INTERVAL_FIELDS: tuple[str, ...] = ("vnpu-pods", "vnpu-pulls", "vnpu-pulled-gb",
                                         "vnpu-origin-hit-rate")


def interval_rows(rows: Sequence[dict[str, Any]], engines: Sequence[str],
                  fields: Sequence[str] = INTERVAL_FIELDS) -> list[dict[str, Any]]:
    """Per engine and column of ``fields``: mean and 95 % interval over the seeds' rows."""
    out = []
    for engine in engines:
        mine = [r for r in rows if r["engine"] == engine]
        row: dict[str, Any] = {"engine": engine, "seeds": len(mine)}
        for key in fields:
            mean, low, high = mean_interval([_number(r.get(key)) for r in mine])
            row[key] = "-" if math.isnan(mean) else f"{mean:.4g} [{low:.4g}, {high:.4g}]"
        met = [r for r in mine if r.get("rfc-target-met") == "yes"]
        row["rfc-target-met"] = f"{len(met)}/{len(mine)}"
        out.append(row)
    return out


#: Columns a many-seed report pairs with ``upstream`` (the same seed's day).
PAIRED_FIELDS: tuple[str, ...] = ("pulls", "pulled-gb", "pull-minutes", "origin-hit-rate")
#: The vNPU jobs' columns paired with ``upstream`` (days with vNPU pods).
VNPU_PAIRED_FIELDS: tuple[str, ...] = ("vnpu-pulls", "vnpu-pulled-gb")


#: Engine pairs the image-locality section of a many-seed report compares.
IMAGE_PAIRS: tuple[tuple[str, str], ...] = (
    ("cpsat", "rfc"), ("cpsat", "upstream"), ("cpsat", "cpsat-no-image"),
    ("rfc", "rfc-no-image"), ("cpsat-no-image", "rfc-no-image"))
#: Their columns.
IMAGE_PAIRED_FIELDS: tuple[str, ...] = ("pulls", "pulled-gb", "pull-minutes",
                                        "origin-hit-rate", "origin-hits")


def paired_rows(rows: Sequence[dict[str, Any]], engines: Sequence[str],
                base: str = "upstream", fields: Sequence[str] = PAIRED_FIELDS
                ) -> list[dict[str, Any]]:
    """Per engine: mean and 95 % interval of (engine - ``base``) over the seeds both ran."""
    by_seed = {int(r["seed"]): r for r in rows if r["engine"] == base}
    out = []
    for engine in engines:
        if engine == base:
            continue
        mine = [r for r in rows if r["engine"] == engine and int(r["seed"]) in by_seed]
        row: dict[str, Any] = {"engine": f"{engine} - {base}", "seeds": len(mine)}
        for key in fields:
            deltas = [_number(r.get(key)) - _number(by_seed[int(r["seed"])].get(key))
                      for r in mine]
            mean, low, high = mean_interval(deltas)
            row[key] = "-" if math.isnan(mean) else f"{mean:+.4g} [{low:+.4g}, {high:+.4g}]"
        out.append(row)
    return out


def render_seeds_report(spec_name: str, rows: Sequence[dict[str, Any]],
                        engines: Sequence[str], failures: Sequence[str],
                        command: str | None = None, runner: str = "") -> str:
    """``report.md`` of a many-seed run: per engine, means with 95 % intervals."""
    seeds = sorted({int(r["seed"]) for r in rows})
    lines = [f"# Replay of `{spec_name}` over {len(seeds)} seeds", ""]
    if command:
        lines += ["```", command, "```", ""]
    if runner:
        lines += [f"Runner: {runner}.", ""]
    lines += ["Mean over the seeds with a 95 % bootstrap interval of the mean "
              "(2,000 resamples, fixed seed); `rfc-target-met` counts the seeds whose day "
              "reached an origin hit rate of 80 %.", "",
              dict_table(interval_rows(rows, engines),
                             ("engine", "seeds", *INTERVAL_FIELDS, "rfc-target-met")), ""]
    if "upstream" in engines and len(engines) > 1:
        lines += ["Paired with `upstream` on the same seed's day (engine minus upstream; "
                  "negative pulls, GB and minutes are saved):", "",
                  dict_table(paired_rows(rows, engines), ("engine", "seeds", *PAIRED_FIELDS)),
                  ""]
    if any(_number(r.get("vnpu-pods")) > 0 for r in rows):
        lines += ["## vNPU jobs", "", "Their part of the figures above (services' slices "
                  "and training's whole cards on the vnpu pools), mean with a 95 % "
                  "interval:", "",
                  dict_table(interval_rows(rows, engines, VNPU_INTERVAL_FIELDS),
                             ("engine", "seeds", *VNPU_INTERVAL_FIELDS)), ""]
        if "upstream" in engines and len(engines) > 1:
            lines += ["Paired with `upstream`:", "",
                      dict_table(paired_rows(rows, engines, fields=VNPU_PAIRED_FIELDS),
                                 ("engine", "seeds", *VNPU_PAIRED_FIELDS)), ""]
    pairs = [(a, b) for a, b in IMAGE_PAIRS if a in engines and b in engines]
    if pairs:
        lines += ["## Image locality", "", "Engine minus engine on the same seed's day "
                  "(mean with a 95 % interval; negative pulls, GB and minutes are saved, a "
                  "negative origin-hit-rate is lost):", "",
                  dict_table([row for a, b in pairs for row in paired_rows(
                      rows, [a], base=b, fields=IMAGE_PAIRED_FIELDS)],
                             ("engine", "seeds", *IMAGE_PAIRED_FIELDS)), ""]
    if failures:
        lines += ["## Failed seeds", ""] + [f"* {f}" for f in failures] + [""]
    lines.append("Per-seed rows are in `summary.csv`.")
    return "\n".join(lines) + "\n"
