"""The PNG of a ``simulate`` run: hit rate and pending jobs per session (matplotlib)."""

from __future__ import annotations

import math
from pathlib import Path

from solver.simulate.report import SimulationReport, rate_text


def plot_report(report: SimulationReport, path: str | Path) -> None:
    """Write a PNG: hit rate (line, left axis) and pending jobs (bars, right axis) per session.

    Raises
    ------
    ImportError
        When matplotlib is not installed.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(6.0, 0.7 * len(report.sessions) + 3.0), 4.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    xs = [s.index for s in report.sessions]
    rates = [math.nan if s.hit_rate is None else 100.0 * s.hit_rate for s in report.sessions]
    pending = [len(s.pending) for s in report.sessions]
    ax2 = ax.twinx()
    ax2.bar(xs, pending, width=0.5, color="tab:red", alpha=0.3, label="pending jobs")
    ax2.set_ylabel("pending jobs")
    ax2.set_ylim(0, max([*pending, 1]) * 1.5)
    ax.plot(xs, rates, marker="o", color="tab:blue", label="origin hit rate (%)")
    ax.axhline(80.0, color="tab:green", linestyle="--", linewidth=1, label="RFC target 80 %")
    ax.set_ylim(0, 105)
    ax.set_xlabel("session")
    ax.set_ylabel("hit rate (%) of re-placed pods with a previous node")
    ax.set_xticks(xs)
    ax.set_xticklabels([str(x) for x in xs])
    ax.set_zorder(ax2.get_zorder() + 1)
    ax.patch.set_visible(False)
    lines, labels = ax.get_legend_handles_labels()
    lines2, labels2 = ax2.get_legend_handles_labels()
    ax.legend(lines + lines2, labels + labels2, loc="lower left", fontsize="small")
    overall = rate_text(report.hit_rate)
    ax.set_title(f"simulate ({report.engine}): overall hit rate {overall}")
    fig.tight_layout()
    fig.savefig(str(path), dpi=100)
