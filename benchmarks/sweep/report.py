"""A sweep's ``report.md`` and plots, from its ``results.csv`` read back."""

from __future__ import annotations

import contextlib
import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from benchmarks.common import markdown_table
from benchmarks.outputs import save_figure
from benchmarks.sweep.rows import NO_RESULT, int_column, row_failed
from solver.doors import extra_hint


def _rate(num: int, den: int) -> str:
    return f"{100.0 * num / den:.1f} %" if den else "-"


def _ok(rows: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    return [r for r in rows if r.get("status") not in NO_RESULT and r.get("valid") != "no"]


def value_rows(rows: Sequence[dict[str, str]], key: str | None
               ) -> list[tuple[str, str, list[dict[str, str]]]]:
    """(override value, engine, rows) groups in first-seen order (``key`` None: one group)."""
    groups: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in rows:
        value = row.get(key, "") if key else "all"
        groups.setdefault((value, row.get("engine", "")), []).append(row)
    return [(v, e, rs) for (v, e), rs in groups.items()]


def _group_stats(rows: Sequence[dict[str, str]]) -> dict[str, Any]:
    ok = _ok(rows)
    hits = sum(int_column(r, "origin-hits") or 0 for r in ok)
    cand = sum(int_column(r, "origin-candidates") or 0 for r in ok)
    ach = sum(int_column(r, "achievable-origin-hits") or 0 for r in ok)
    proven = [r for r in ok if r.get("status") == "optimal"]
    objectives = [float(r["objective"]) for r in ok if r.get("objective")]
    walls = [float(r["wall-seconds"]) for r in ok if r.get("wall-seconds")]
    return {
        "cells": len(rows), "ok": len(ok), "failed": len(rows) - len(ok),
        "placed": sum(int_column(r, "placed-jobs") or 0 for r in ok),
        "jobs": sum(int_column(r, "jobs") or 0 for r in ok),
        "hit_rate": 100.0 * hits / cand if cand else None, "hits": hits, "cand": cand,
        "achievable": ach, "proven": len(proven),
        "objective": statistics.mean(objectives) if objectives else None,
        "wall": statistics.median(walls) if walls else None,
    }


def render_sweep_report(rows: Sequence[dict[str, str]], override_keys: Sequence[str],
                        meta: dict[str, str], plots: Sequence[Path] = (),
                        baseline: str = "") -> str:
    """The text of a sweep's ``report.md`` (from ``results.csv`` read back).

    ``baseline`` is the full text of a baseline comparison (every note), appended as a
    section of its own.
    """

    failed = [r for r in rows if row_failed(r)]
    parts = ["# npu-place sweep", ""]
    parts += [f"- {k}: {v}" for k, v in meta.items()]
    parts += [f"- cells: {len(rows)} ({len(rows) - len(failed)} ran, {len(failed)} failed)",
              ""]
    parts += ["Hit rate = Σ origin hits / Σ origin candidates over the cells; *achievable* is "
              "the loose upper bound (candidates whose cached node is still usable); "
              "*proven optimal* counts cells where CP-SAT proved its answer optimal for the "
              "objective (for those cells the hits are the exact optimum's). The objective's "
              "automatic weights depend on the scenario and its overrides: compare mean "
              "objectives between engines of the same row group, not across values.", ""]
    header = ("value", "engine", "cells", "failed", "placed jobs", "hit rate", "achievable",
              "proven optimal", "mean objective", "median wall s")
    keys: list[str | None] = [*override_keys] or [None]
    for key in keys:
        table = []
        for value, engine, group in value_rows(rows, key):
            s = _group_stats(group)
            table.append([value, engine, str(s["cells"]), str(s["failed"]),
                          f"{s['placed']}/{s['jobs']}",
                          "-" if s["hit_rate"] is None else f"{s['hit_rate']:.1f} %",
                          _rate(s["achievable"], s["cand"]), f"{s['proven']}/{s['ok']}",
                          "-" if s["objective"] is None else f"{s['objective']:.6g}",
                          "-" if s["wall"] is None else f"{s['wall']:.3f}"])
        parts += [f"## By {'`' + key + '`' if key else 'engine'}", "",
                  markdown_table(header, table), ""]
    if plots:
        parts += ["Plots: " + ", ".join(f"`{p.name}`" for p in plots), ""]
    if failed:
        parts += ["## Failed cells", ""]
        parts += [f"- `{r.get('cell')}`: {r.get('status')}: {r.get('error') or r.get('note')}"
                  for r in failed[:200]]
        if len(failed) > 200:
            parts.append(f"- … and {len(failed) - 200} more (see results.csv)")
        parts.append("")
    if baseline:
        parts += ["## Against the baseline", "", baseline]
    return "\n".join(parts)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-") or "all"


PLOT_HINT = "plots skipped: " + extra_hint("plot", "matplotlib")


def import_plotting() -> None:
    """Import what :func:`write_sweep_plots` draws with (matplotlib: about 0.4 s of CPU),
    if it is installed; a runner calls it in a thread while its last cells run, when a
    core is free, so that the plots after the last cell do not wait for it."""
    with contextlib.suppress(ImportError):
        import matplotlib.backends.backend_agg
        import matplotlib.figure  # noqa: F401


def write_sweep_plots(rows: Sequence[dict[str, str]], override_keys: Sequence[str],
                      out_dir: Path, err: TextIO | None = None) -> list[Path]:
    """One PNG per override key (or one overall): hit rate and mean objective per value,
    engines side by side.  Without matplotlib, prints :data:`PLOT_HINT` to ``err``."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        if err is not None:
            err.write(PLOT_HINT + "\n")
        return []
    written = []
    keys: list[str | None] = [*override_keys] or [None]
    for key in keys:
        groups = value_rows(rows, key)
        values = list(dict.fromkeys(v for v, _, _ in groups))
        engines = list(dict.fromkeys(e for _, e, _ in groups))
        stats = {(v, e): _group_stats(g) for v, e, g in groups}
        if not values or not engines:
            continue
        fig = Figure(figsize=(max(6.0, 1.2 * len(values) * len(engines) + 2), 3.6))
        FigureCanvasAgg(fig)
        ax1, ax2 = fig.subplots(1, 2)
        width = 0.8 / len(engines)
        for j, engine in enumerate(engines):
            xs = [i + (j - (len(engines) - 1) / 2) * width for i in range(len(values))]
            rate = [stats.get((v, engine), {}).get("hit_rate") or 0.0 for v in values]
            obj = [stats.get((v, engine), {}).get("objective") or 0.0 for v in values]
            ax1.bar(xs, rate, width, label=engine)
            ax2.bar(xs, obj, width, label=engine)
        ach = [100.0 * sum(stats.get((v, e), {}).get("achievable", 0) for e in engines[:1])
               / max(1, sum(stats.get((v, e), {}).get("cand", 0) for e in engines[:1]))
               for v in values]
        ax1.plot(range(len(values)), ach, "k_", markersize=20, label="achievable bound")
        for ax in (ax1, ax2):
            ax.set_xticks(range(len(values)))
            ax.set_xticklabels(values, fontsize=8)
            ax.set_xlabel(key or "")
        ax1.set_ylabel("origin hit rate (%)")
        ax1.set_ylim(0, 105)
        ax2.set_ylabel("mean objective")
        ax1.legend(fontsize=7)
        fig.suptitle(f"sweep by {key}" if key else "sweep", fontsize=10)
        fig.tight_layout()
        path = out_dir / f"sweep_{_slug(key or 'all')}.png"
        save_figure(fig, path, dpi=100)
        written.append(path)
    return written
