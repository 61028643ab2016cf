"""What ``npu-place bench`` writes: ``results.csv``, ``report.md`` and the plots (the origin
hit rate by scale per family, the wall time against nodes, and the distribution of
CP-SAT's improvement over greedy).

They read the suite's rows (:func:`benchmarks.suite.pairs`) and need matplotlib (the
``plot`` extra); :func:`write_plots` prints :data:`~benchmarks.sweep.PLOT_HINT` without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from benchmarks.generators import FAMILIES
from benchmarks.outputs import save_figure, write_output
from benchmarks.suite import Pair, pairs, read_csv, render_report, write_csv
from benchmarks.sweep import PLOT_HINT


def hit_rate_series(ps: Sequence[Pair]) -> dict[str, dict[str, list[float]]]:
    """What ``hit_rate_by_scale.png`` draws, per family: the scales and, at each, the
    origin hit rate (%) of greedy, CP-SAT, the achievable bound and the proven optimum
    over the instances CP-SAT proved optimal (``nan`` where none was)."""
    out: dict[str, dict[str, list[float]]] = {}
    for family in [f for f in FAMILIES if any(p.family == f for p in ps)]:
        scales = sorted({p.scale for p in ps if p.family == family})
        series: dict[str, list[float]] = {"scale": [float(s) for s in scales], "greedy": [],
                                          "cpsat": [], "achievable": [], "optimum": []}
        for scale in scales:
            cell = [p for p in ps if p.family == family and p.scale == scale]
            cand = sum(int(p.greedy["origin-candidates"]) for p in cell) or 1
            series["greedy"].append(100 * sum(int(p.greedy["origin-hits"]) for p in cell) / cand)
            series["cpsat"].append(100 * sum(int(p.cpsat["origin-hits"]) for p in cell) / cand)
            proven = [p for p in cell if p.cpsat["status"] == "optimal"]
            pcand = sum(int(p.cpsat["origin-candidates"]) for p in proven)
            series["optimum"].append(100 * sum(int(p.cpsat["origin-hits"]) for p in proven)
                                     / pcand if pcand else float("nan"))
            series["achievable"].append(
                100 * sum(int(p.greedy["achievable-origin-hits"]) for p in cell) / cand)
        out[family] = series
    return out


def plot_hit_rate_by_scale(series: dict[str, dict[str, list[float]]], path: Path,
                           metadata: dict[str, str] | None = None) -> None:
    """``hit_rate_by_scale.png``: :func:`hit_rate_series` of each family in a panel;
    ``metadata``: text chunks of the PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(series), figsize=(3.2 * len(series), 3.2),
                             squeeze=False, sharey=True)
    for ax, (family, line) in zip(axes[0], series.items(), strict=True):
        scales = line["scale"]
        ax.plot(scales, line["achievable"], "k--", label="achievable")
        ax.plot(scales, line["greedy"], "o-", label="greedy")
        ax.plot(scales, line["cpsat"], "s-", label="CP-SAT")
        ax.plot(scales, line["optimum"], "kx", label="proven optimum (proven inst.)")
        ax.set_xscale("log", base=2)
        ax.set_title(family)
        ax.set_xlabel("nodes (scale)")
        ax.set_ylim(0, 105)
    axes[0][0].set_ylabel("origin hit rate (%)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110, metadata=metadata)
    plt.close(fig)


def write_plots(rows: Sequence[dict[str, str]], out_dir: Path, err: TextIO | None = None
                ) -> list[Path]:
    """Write the three PNG plots; return their paths.

    Without matplotlib (the ``plot`` extra) no plot is written and
    :data:`~benchmarks.sweep.PLOT_HINT` is printed to ``err``.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        if err is not None:
            err.write(PLOT_HINT + "\n")
        return []
    ps = pairs(rows)
    if not ps:
        return []
    written: list[Path] = []

    # 1. hit rate vs the achievable bound, by scale, per family
    path = out_dir / "hit_rate_by_scale.png"
    plot_hit_rate_by_scale(hit_rate_series(ps), path)
    written.append(path)

    # 2. wall time vs nodes, log-log
    fig, ax = plt.subplots(figsize=(5, 4))
    for engine, marker in (("greedy", "o"), ("cpsat", "s")):
        xs = [p.nodes for p in ps]
        ys = [max(1e-4, float(getattr(p, engine)["wall-seconds"])) for p in ps]
        ax.scatter(xs, ys, marker=marker, alpha=0.7, label="CP-SAT" if engine == "cpsat"
                   else "greedy")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("nodes")
    ax.set_ylabel("wall time (s)")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path = out_dir / "wall_time_vs_nodes.png"
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    written.append(path)

    # 3. distribution of the objective improvement (and of extra origin hits)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8, 3.4))
    rel = [100.0 * p.objective_delta() / max(1, abs(int(p.greedy["objective"]))) for p in ps]
    ax1.hist(rel, bins=20, color="tab:green")
    ax1.set_xlabel("CP-SAT objective improvement over greedy (%)")
    ax1.set_ylabel("instances")
    ax1.set_title(f"{sum(1 for p in ps if p.objective_delta() == 0)} of {len(ps)} "
                  "instances tie", fontsize=9)
    ax2.hist([p.hits_delta() for p in ps], bins=20, color="tab:blue")
    ax2.set_xlabel("extra origin hits (CP-SAT − greedy)")
    ax2.set_title(f"{sum(1 for p in ps if p.hits_delta() == 0)} of {len(ps)} instances tie",
                  fontsize=9)
    fig.tight_layout()
    path = out_dir / "objective_improvement.png"
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written


# --------------------------------------------------------------------------- command


def write_outputs(rows: Sequence[dict[str, str]], out_dir: Path, meta: dict[str, str],
                  err: TextIO | None = None) -> tuple[Path, Path, list[Path]]:
    """Write ``results.csv``, then ``report.md`` from the CSV read back, then the plots."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "results.csv"
    write_csv(rows, csv_path)
    back = read_csv(csv_path)
    plots = write_plots(back, out_dir, err)
    meta = dict(meta)
    if plots:
        meta["plots"] = ", ".join(f"`{p.name}`" for p in plots)
    else:
        meta["plots"] = "none (matplotlib is not installed, or no instance ran)"
    report = out_dir / "report.md"
    write_output(report, render_report(back, meta))
    return csv_path, report, plots
