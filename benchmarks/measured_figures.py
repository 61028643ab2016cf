"""The manual's measured figures: tables and plots of runs too long to repeat in CI.

A measured figure is one benchmark run kept as one data file, ``docs/figures/NAME.json``:
the command that ran, the code version (git commit) it ran on, when and under what load,
its wall and CPU time, and the rows of its output (``summary.csv``, ``anytime.csv`` or
``results.csv``).  Its table in the page and its plot (``docs/figures/NAME.png``) are both
made from that file, and the PNG carries the file's SHA-256 in a text chunk (matplotlib's
``savefig(metadata=)``), so a test can tell a plot drawn from other numbers without
looking at its pixels::

    python -m benchmarks.doc_figures NAME --measure   # run the benchmark, then as below
    python -m benchmarks.doc_figures NAME             # table and plot from the data file
    python -m benchmarks.doc_figures NAME --check     # exit 1 when they differ from it

``tests/benchmarks/test_doc_figures.py`` checks every table and PNG against its data file,
the plotted series against the table, and re-runs one (seed, engine) row of each
many-seed replay.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.outputs import write_output
from models.documents import read_bytes, read_text

#: The repository root (the parent of this package).
ROOT = Path(__file__).resolve().parent.parent
#: The PNG text chunk holding the hash of the data file a plot was drawn from.
SOURCE_KEY = "Source"
#: Where a measured figure's command writes its output (replaced by a temporary folder).
OUT = "{out}"


@dataclass(frozen=True)
class Measured:
    """How one measured figure is run, stored, tabled and drawn.

    ``argv`` is the benchmark's command line (``{out}`` is its output folder), ``output``
    the CSV file it writes there and ``columns`` the columns of it the data file keeps.
    ``table(rows)`` gives the page's block from the kept rows, ``plot(rows, path,
    metadata)`` draws the PNG from the same rows (``None``: a table only), and
    ``plotted(rows)`` gives the series the plot draws as ``{line: {x: y}}`` and
    ``table_series(table)`` the same series read from the page's table (rows of
    :func:`parse_table`), for the test that compares the two.
    """

    argv: tuple[str, ...]
    output: str
    columns: tuple[str, ...]
    table: Callable[[list[dict[str, str]]], str]
    plot: Callable[[list[dict[str, str]], Path, dict[str, str]], None] | None = None
    plotted: Callable[[list[dict[str, str]]], dict[str, dict[str, float]]] | None = None
    table_series: Callable[[list[dict[str, str]]], dict[str, dict[str, float]]] | None = None
    alt: str = ""

    def command(self) -> str:
        """The command as a user types it (the output folder shown as ``DIR``)."""
        return " ".join(shlex.quote(a) if a != OUT else "DIR" for a in self.argv)


# --------------------------------------------------------------------------- data file


def data_path(name: str, docs: Path) -> Path:
    """``docs/figures/NAME.json``."""
    return docs / "figures" / f"{name}.json"


def png_path(name: str, docs: Path) -> Path:
    """``docs/figures/NAME.png``."""
    return docs / "figures" / f"{name}.png"


def read_data(name: str, docs: Path) -> dict[str, Any]:
    """The stored data file of a measured figure."""
    data: dict[str, Any] = json.loads(read_text(data_path(name, docs)))
    return data


def rows_of(data: dict[str, Any]) -> list[dict[str, str]]:
    """The data file's rows as ``{column: text}`` (as the benchmark's CSV has them)."""
    return [dict(zip(data["columns"], row, strict=True)) for row in data["rows"]]


def data_digest(name: str, docs: Path) -> str:
    """``sha256:HEX`` of the data file's bytes: what its PNG must record."""
    return "sha256:" + hashlib.sha256(read_bytes(data_path(name, docs))).hexdigest()


def png_text(path: Path) -> dict[str, str]:
    """The ``tEXt``, ``zTXt`` and ``iTXt`` chunks of a PNG file, by keyword (read by
    Pillow, which matplotlib brings)."""
    from PIL import Image, PngImagePlugin

    blob = read_bytes(path)
    if blob[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG file")
    with Image.open(io.BytesIO(blob)) as image:
        assert isinstance(image, PngImagePlugin.PngImageFile)
        return {str(key): str(value) for key, value in image.text.items()}


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=False, timeout=60)
    return done.stdout.strip() if done.returncode == 0 else ""


def code_commit() -> str:
    """The commit the code runs from, ``+`` when tracked files outside ``docs/`` differ
    from it (the pages do not change a figure); ``unknown`` outside a git checkout."""
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return "unknown"
    changed = _git("status", "--porcelain", "--untracked-files=no", "--", ".",
                   ":(exclude)docs")
    return commit + ("+" if changed else "")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def measure(name: str, spec: Measured, docs: Path) -> Path:
    """Run the figure's benchmark in a temporary folder and store its data file.

    The command runs in a subprocess with this interpreter (``npu-place`` as
    ``python -m solver.cli``); the data file records it with the commit, the start and
    end, the 1-minute load average at both, and the wall and CPU seconds it took.
    """
    with tempfile.TemporaryDirectory(prefix=f"npu-place-{name}-") as tmp:
        out = Path(tmp) / "out"
        argv = [str(out) if a == OUT else a for a in spec.argv]
        program = (["-m", "solver.cli"] if argv[0] == "npu-place" else argv[1:3])
        rest = argv[1:] if argv[0] == "npu-place" else argv[3:]
        started, load_start, commit = _now(), os.getloadavg()[0], code_commit()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.monotonic()
        done = subprocess.run([sys.executable, *program, *rest], cwd=ROOT, check=False,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.monotonic() - wall
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise RuntimeError(f"{spec.command()}: exit {done.returncode}: "
                               f"{done.stderr.strip()[-2000:]}")
        data = {
            "figure": name, "command": spec.command(), "commit": commit,
            "started": started, "finished": _now(),
            "load-average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
            "wall-seconds": round(wall, 1),
            "cpu-seconds": round(after.ru_utime + after.ru_stime
                                 - before.ru_utime - before.ru_stime, 1),
        }
        return store(name, spec, docs, out, data)


def store(name: str, spec: Measured, docs: Path, out: Path, run: dict[str, Any]) -> Path:
    """Write ``docs/figures/NAME.json``: ``run`` (command, commit, start and end, load,
    wall and CPU seconds) and the kept columns of the run's output in ``out``."""
    data = {**run, **table_of(out / spec.output, spec.columns)}
    path = data_path(name, docs)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_output(path, json.dumps(data, indent=1) + "\n")
    return path


def table_of(csv_path: Path, columns: Sequence[str]) -> dict[str, Any]:
    """``columns`` of a benchmark's CSV as the data file keeps them."""
    with io.StringIO(read_text(csv_path), newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {"columns": list(columns), "rows": [[row[c] for c in columns] for row in rows]}


def draw(name: str, spec: Measured, docs: Path) -> Path:
    """Draw the figure's PNG from its data file, recording the file's hash in it."""
    assert spec.plot is not None
    path = png_path(name, docs)
    spec.plot(rows_of(read_data(name, docs)), path, {SOURCE_KEY: data_digest(name, docs),
                                                     "Title": name})
    return path


def png_is_current(name: str, docs: Path) -> bool:
    """Whether the PNG exists and was drawn from the data file as it is."""
    path = png_path(name, docs)
    return path.is_file() and png_text(path).get(SOURCE_KEY) == data_digest(name, docs)


def made_by(name: str, spec: Measured, data: dict[str, Any]) -> str:
    """The line under a measured figure: how it was made, on which code, when, the load,
    and where its data is."""
    day, start = data["started"][:10], data["started"][11:16]
    end = data["finished"][11:16]
    first, last = (f"{x:.1f}" for x in data["load-average"])
    load = (f"load average {first} at its start and end" if first == last else
            f"load average {first} at its start, {last} at its end")
    made = "The table and the plot are" if spec.plot is not None else "The tables are"
    return (f"*Measured by `python -m benchmarks.doc_figures {name} --measure`, which runs "
            f"`{data['command']}`, at commit `{data['commit'][:12]}` on {day}, "
            f"{start}–{end} UTC, {load} on the 2-core machine "
            f"({_seconds(data['wall-seconds'])} wall, {_seconds(data['cpu-seconds'])} CPU). "
            f"{made} made from its data, [{name}.json](figures/{name}.json); "
            "`tests/benchmarks/test_doc_figures.py` checks them against it.*")


def _seconds(value: float) -> str:
    minutes, seconds = divmod(round(value), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def block(name: str, spec: Measured, docs: Path) -> str:
    """The figure's block: its table (and plot) from the data file, then :func:`made_by`."""
    data = read_data(name, docs)
    parts = [spec.table(rows_of(data))]
    if spec.plot is not None:
        parts.append(f"![{spec.alt or name}](figures/{name}.png)")
    return "\n\n".join([*parts, made_by(name, spec, data)])


# --------------------------------------------------------------------------- replay, many seeds

#: The engines of the many-seed replays: the three of a replay and the two without the
#: image term, so that one run gives both the engine tables and the image-locality pairs.
SEED_ENGINES = ("upstream", "rfc", "rfc-no-image", "cpsat", "cpsat-no-image")
#: Columns of the engine table.
_SEED_TABLE = ("pulls", "pulled-gb", "pull-minutes", "image-hit-rate", "origin-hit-rate",
               "pending-p99", "wait-mean", "evicted-pods")


def replay_seeds(example: str, seeds: str, dask_workers: int) -> Measured:
    """``npu-place replay --example NAME --seeds LIST`` with every engine of
    :data:`SEED_ENGINES`: per-engine means, pairs with upstream and the image pairs."""
    from benchmarks.replay.report import SUMMARY_FIELDS

    return Measured(
        argv=("npu-place", "replay", "--example", example, "--seeds", seeds, "--engines",
              ",".join(SEED_ENGINES), "--dask-workers", str(dask_workers), "--no-progress",
              "--out", OUT),
        output="summary.csv", columns=("seed", "engine", *SUMMARY_FIELDS),
        table=_seeds_table)


def _seeds_table(rows: list[dict[str, str]]) -> str:
    from benchmarks.replay.report import (
        IMAGE_PAIRED_FIELDS,
        IMAGE_PAIRS,
        PAIRED_FIELDS,
        VNPU_INTERVAL_FIELDS,
        VNPU_PAIRED_FIELDS,
        dict_table,
        interval_rows,
        paired_rows,
    )

    engines = [e for e in SEED_ENGINES if any(r["engine"] == e for r in rows)]
    main = [e for e in engines if not e.endswith("-no-image")]
    parts = [
        "Mean over the seeds with a 95 % bootstrap interval of the mean (2,000 resamples, "
        "fixed seed); `rfc-target-met` counts the days that reached an origin hit rate of "
        "80 %:",
        dict_table(interval_rows(rows, engines, _SEED_TABLE),
                   ("engine", "seeds", *_SEED_TABLE, "rfc-target-met")),
        "Paired with `upstream` on the same seed's day (engine minus upstream; negative "
        "pulls, GB and minutes are saved):",
        dict_table(paired_rows(rows, main), ("engine", *PAIRED_FIELDS)),
    ]
    if any(float(r["vnpu-pods"] or 0) > 0 for r in rows):
        parts += ["The vNPU jobs' part of these figures (mean with a 95 % interval), and "
                  "paired with `upstream`:",
                  dict_table(interval_rows(rows, main, VNPU_INTERVAL_FIELDS),
                             ("engine", *VNPU_INTERVAL_FIELDS)),
                  dict_table(paired_rows(rows, main, fields=VNPU_PAIRED_FIELDS),
                             ("engine", *VNPU_PAIRED_FIELDS))]
    pairs = [(a, b) for a, b in IMAGE_PAIRS if a in engines and b in engines
             and b != "upstream"]  # the pairs with upstream are in the table above
    parts += ["Image locality: engine minus engine on the same seed's day (negative pulls, "
              "GB and minutes are saved, a negative origin-hit-rate is lost):",
              dict_table([row for a, b in pairs for row in paired_rows(
                  rows, [a], base=b, fields=IMAGE_PAIRED_FIELDS)],
                         ("engine", *IMAGE_PAIRED_FIELDS))]
    return "\n\n".join(parts)


def seed_row(example: str, seed: int, engine: str) -> dict[str, str]:
    """One (seed, engine) row of a many-seed replay computed now, as its CSV has it."""
    from benchmarks.replay.api import _seed_task, example_path, read_spec
    from benchmarks.replay.run import ReplayOptions

    row = _seed_task(read_spec(example_path(example)), seed, engine,
                     ReplayOptions(engines=SEED_ENGINES))
    return {k: "" if v is None else str(v) for k, v in row.items()}


# --------------------------------------------------------------------------- anytime at scale


def _int(text: str) -> int:
    return int(float(text))


def _anytime_rows(rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    return [{**r, "budget": float(r["budget"]), "deterministic": r["deterministic"] == "True"}
            for r in rows]


def _anytime_table(rows: list[dict[str, str]]) -> str:
    from benchmarks.anytime import add_shares, violations

    typed = add_shares(_anytime_rows(rows))
    budgets = sorted({r["budget"] for r in typed})
    by: dict[str, dict[float, dict[str, Any]]] = {}
    for row in typed:
        by.setdefault(row["instance"], {})[row["budget"]] = row
    header = ["instance", *[f"gain at D = {b:g}" for b in budgets],
              *[f"share at D = {b:g}" for b in budgets],
              *[f"origin hits at D = {b:g}" for b in budgets]]
    body = []
    for name, at in by.items():
        body.append([name, *[f"{_int(at[b]['gain']):+,} ({at[b]['engine']})" for b in budgets],
                     *["-" if at[b]["share-captured"] is None
                       else f"{100 * at[b]['share-captured']:.1f} %" for b in budgets],
                     *[f"{_int(at[b]['origin-hits']):,} / {_int(at[b]['origin-candidates']):,}"
                       for b in budgets]])
    from benchmarks.common import markdown_table

    broken = violations(typed)
    return (markdown_table(header, body) + "\n\nGain: objective over greedy's, and the "
            "engine whose answer it is (origin-first: the construction before the search); "
            "share: of the best gain any budget reached on the instance.  Budgets whose "
            f"answer is worse than a shorter budget's: {len(broken)}.")


def _anytime_plot(rows: list[dict[str, str]], path: Path, metadata: dict[str, str]) -> None:
    from benchmarks.anytime import plot_anytime

    if not plot_anytime(_anytime_rows(rows), path, metadata):
        raise RuntimeError("matplotlib is not installed (pip install 'npu-place[plot]')")


def _anytime_plotted(rows: list[dict[str, str]]) -> dict[str, dict[str, float]]:
    from benchmarks.anytime import anytime_series

    out: dict[str, dict[str, float]] = {}
    for family, line in anytime_series(_anytime_rows(rows)).items():
        for key in ("share", "hit-rate"):
            out[f"{family} {key}"] = dict(zip((f"{b:g}" for b in line["budget"]), line[key],
                                              strict=True))
    return out


def anytime_scale() -> Measured:
    """The deterministic anytime curve at 16,384–65,536 nodes, seed 37."""
    return Measured(
        argv=("python", "-m", "benchmarks.anytime", "--out", OUT, "--scales",
              "65536,16384,32768", "--seeds", "37", "--budgets", "0.2,1,10",
              "--deterministic"),
        output="anytime.csv",
        columns=("instance", "family", "nodes", "jobs", "budget", "engine", "status",
                 "objective", "greedy-objective", "gain", "origin-hits", "origin-candidates",
                 "deterministic"),
        table=_anytime_table, plot=_anytime_plot, plotted=_anytime_plotted,
        table_series=anytime_table_series,
        alt="median share of the best gain and origin hit rate against the deterministic "
            "budget, per family")


def _table_share(cell: str) -> float:
    """``"99.4 %"`` as 99.4; ``-`` as nan."""
    return math.nan if cell == "-" else float(cell.rstrip(" %"))


def anytime_table_series(table: list[dict[str, str]]) -> dict[str, dict[str, float]]:
    """The plotted series as the anytime table gives them: per family and budget, the
    median of the table's shares (``nan`` where no instance of the family has a gain) and
    the mean origin hit rate of its instances' hits and candidates."""
    import statistics

    budgets = [h.removeprefix("share at D = ") for h in table[0] if h.startswith("share at")]
    shares: dict[str, dict[str, list[float]]] = {}
    rates: dict[str, dict[str, list[float]]] = {}
    for row in table:
        line = shares.setdefault(f"{row['instance'].split('-n')[0]} share", {})
        for budget in budgets:
            share = _table_share(row[f"share at D = {budget}"])
            line.setdefault(budget, []).extend([] if math.isnan(share) else [share])
    out = {line: {b: statistics.median(v) if v else math.nan for b, v in points.items()}
           for line, points in shares.items()}
    for row in table:  # the right panel: mean origin hit rate
        family = row["instance"].split("-n")[0]
        for budget in budgets:
            hits, candidates = (int(n.replace(",", "")) for n in
                                row[f"origin hits at D = {budget}"].split(" / "))
            rates.setdefault(f"{family} hit-rate", {}).setdefault(budget, []).append(
                100 * hits / max(1, candidates))
    out.update({line: {b: statistics.mean(v) for b, v in points.items()}
                for line, points in rates.items()})
    return out


# --------------------------------------------------------------------------- the 1-s curve

#: The sizes of the wall-clock curve: 4,096 to 65,536 nodes, no gap a threshold could hide in.
CURVE_SCALES = (4096, 8192, 12288, 16384, 24576, 32768, 65536)
#: The columns of the wall-clock curve's data file.
_CURVE_COLUMNS = ("instance", "family", "nodes", "jobs", "budget", "wall-seconds",
                  "overrun-ms", "engine", "status", "objective", "greedy-objective", "gain",
                  "origin-hits", "origin-candidates", "deterministic", "bound", "gap")
#: Overrun past the budget that counts as late (ms).
LATE_MS = 50.0


def _curve_rows(rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    from benchmarks.anytime import add_shares

    return add_shares([{**r, "budget": float(r["budget"]), "nodes": int(r["nodes"]),
                        "deterministic": r["deterministic"] == "True"} for r in rows])


def _curve_shares(rows: list[dict[str, Any]]) -> dict[tuple[float, str], dict[int, float]]:
    """Per (budget, family): the share of the best gain (%) at each node count; the
    budgets below the longest, the instances with a gain (one seed: one per cell)."""
    import statistics

    longest = max(r["budget"] for r in rows)
    cells: dict[tuple[float, str, int], list[float]] = {}
    for row in rows:
        if row["budget"] < longest and row["share-captured"] is not None:
            cells.setdefault((row["budget"], row["family"], row["nodes"]), []).append(
                100 * float(row["share-captured"]))
    out: dict[tuple[float, str], dict[int, float]] = {}
    for (budget, family, nodes), shares in sorted(cells.items()):
        out.setdefault((budget, family), {})[nodes] = round(statistics.median(shares), 1)
    return out


def _curve_table(rows: list[dict[str, str]]) -> str:
    """The share table (budget × family rows, a column per size, then the median and the
    worst row of each budget), the lateness and monotonicity line per size, and the gap
    table at the largest size."""
    import statistics

    from benchmarks.anytime import violations
    from benchmarks.common import markdown_table

    typed = _curve_rows(rows)
    sizes = sorted({r["nodes"] for r in typed})
    shares = _curve_shares(typed)
    body = []
    for budget in sorted({b for b, _ in shares}):
        lines = {f: v for (b, f), v in shares.items() if b == budget}
        for family, line in lines.items():
            body.append([f"{budget:g} s", family,
                         *[f"{line[n]:.1f} %" if n in line else "-" for n in sizes]])
        for label, pick in (("median", statistics.median), ("worst", min)):
            body.append([f"{budget:g} s", f"**{label}**", *[
                f"**{pick(got):.1f} %**" if (got := [v[n] for v in lines.values() if n in v])
                else "-" for n in sizes]])
    header = ["budget", "family", *[f"{n:,}" for n in sizes]]
    late = [r for r in typed if float(r["overrun-ms"]) > LATE_MS]
    calls = {n: sum(1 for r in typed if r["nodes"] == n) for n in sizes}
    worst = {n: max(float(r["overrun-ms"]) for r in typed if r["nodes"] == n) for n in sizes}
    late_table = markdown_table(
        ["", *[f"{n:,}" for n in sizes]],
        [["calls", *[str(calls[n]) for n in sizes]],
         [f"over budget + {LATE_MS:g} ms", *[str(sum(1 for r in late if r["nodes"] == n))
                                              for n in sizes]],
         ["latest answer (ms past the budget)", *[f"{worst[n]:+.0f}" for n in sizes]]])
    largest = sizes[-1]
    budgets = sorted({r["budget"] for r in typed})
    gap_rows = []
    for family in sorted({r["family"] for r in typed}):
        at = {r["budget"]: r for r in typed if r["family"] == family and r["nodes"] == largest}
        gap_rows.append([family, *["-" if b not in at or not at[b]["gap"]
                                   else f"{100 * float(at[b]['gap']):.3f} %" for b in budgets]])
    broken = violations(typed)
    return "\n\n".join([
        markdown_table(header, body),
        "Share: the answer's gain over greedy as a percentage of the best gain any budget "
        "reached on the instance (the longest budget's, unless a shorter one did better); "
        "\"-\": no budget beat greedy. Budgets whose answer is worse than a shorter "
        f"budget's: {len(broken)}.",
        late_table,
        f"Gap to the bound of each answer at {largest:,} nodes (`(bound - objective) / "
        "bound`; \"-\": the answer carried no bound):",
        markdown_table(["family", *[f"{b:g} s" for b in budgets]], gap_rows)])


def _curve_plotted(rows: list[dict[str, str]]) -> dict[str, dict[str, float]]:
    return {f"{family} {budget:g} s": {f"{n:,}": v for n, v in line.items()}
            for (budget, family), line in _curve_shares(_curve_rows(rows)).items()}


def curve_table_series(table: list[dict[str, str]]) -> dict[str, dict[str, float]]:
    """The plotted series as the share table gives them: per family and budget, the share
    at each size (the median and worst rows are not plotted)."""
    out: dict[str, dict[str, float]] = {}
    for row in table:
        if row["family"].startswith("**"):
            continue
        line = out.setdefault(f"{row['family']} {row['budget']}", {})
        for column, cell in row.items():
            if column not in ("budget", "family") and cell != "-":
                line[column] = _table_share(cell)
    return out


def _curve_plot(rows: list[dict[str, str]], path: Path, metadata: dict[str, str]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as missing:
        raise RuntimeError("matplotlib is not installed (pip install 'npu-place[plot]')") \
            from missing
    from benchmarks.outputs import save_figure

    shares = _curve_shares(_curve_rows(rows))
    budgets = sorted({b for b, _ in shares})
    fig, axes = plt.subplots(1, len(budgets), figsize=(4.2 * len(budgets), 4), sharey=True)
    for ax, budget in zip(list(getattr(axes, "flat", [axes])), budgets, strict=True):
        for (b, family), line in shares.items():
            if b == budget:
                ax.plot(list(line), list(line.values()), marker="o", label=family)
        ax.set_xscale("log", base=2)
        sizes = sorted({n for line in shares.values() for n in line})
        ax.set_xticks(sizes, [f"{n // 1024}k" for n in sizes])
        ax.minorticks_off()
        ax.set_xlabel("nodes")
        ax.set_title(f"{budget:g}-s answer (wall clock)")
        ax.grid(True, alpha=0.3)
    first = next(iter(getattr(axes, "flat", [axes])))
    first.set_ylabel("% of the best gain over greedy")
    first.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=110, metadata=metadata)
    plt.close(fig)


def curve_scale() -> Measured:
    """The wall-clock anytime curve over seven sizes, every family, one seed nobody tuned
    on: the share of the best gain at each short budget, lateness, and gaps."""
    return Measured(
        argv=("python", "-m", "benchmarks.anytime", "--out", OUT, "--scales",
              ",".join(str(n) for n in CURVE_SCALES), "--seeds", "5309", "--budgets",
              "0.2,0.5,1,10"),
        output="anytime.csv", columns=_CURVE_COLUMNS, table=_curve_table, plot=_curve_plot,
        plotted=_curve_plotted, table_series=curve_table_series,
        alt="share of the best gain over greedy against the cluster size, per family, at "
            "each short wall-clock budget")


# --------------------------------------------------------------------------- bench at scale

_BENCH_COLUMNS = ("instance", "family", "scale", "nodes", "jobs", "engine", "status",
                  "objective", "placed-jobs", "origin-hits", "origin-candidates",
                  "achievable-origin-hits")


def _bench_series(rows: list[dict[str, str]]) -> dict[str, dict[str, list[float]]]:
    from benchmarks.suite import pairs
    from benchmarks.suite_outputs import hit_rate_series

    return hit_rate_series(pairs(rows))


def _bench_table(rows: list[dict[str, str]]) -> str:
    from benchmarks.common import markdown_table
    from benchmarks.suite import pairs

    body = []
    for p in pairs(rows):
        cand = int(p.greedy["origin-candidates"])
        proven = p.cpsat["status"] == "optimal"
        body.append([p.family, f"{p.scale:,}",
                     *[f"{100 * int(r['origin-hits']) / cand:.1f} %" if cand else "-"
                       for r in (p.greedy, p.cpsat)],
                     f"{100 * int(p.greedy['achievable-origin-hits']) / cand:.1f} %"
                     if cand else "-", "optimal" if proven else p.cpsat["status"],
                     f"{int(p.cpsat['objective']) - int(p.greedy['objective']):+,}"])
    return markdown_table(("family", "scale", "greedy hits", "cpsat hits", "achievable bound",
                           "CP-SAT status", "objective over greedy"), body)


def _bench_plot(rows: list[dict[str, str]], path: Path, metadata: dict[str, str]) -> None:
    from benchmarks.suite_outputs import plot_hit_rate_by_scale

    plot_hit_rate_by_scale(_bench_series(rows), path, metadata)


def _bench_plotted(rows: list[dict[str, str]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for family, line in _bench_series(rows).items():
        for key in ("greedy", "cpsat", "achievable", "optimum"):
            out[f"{family} {key}"] = {f"{s:,.0f}": round(v, 1)
                                      for s, v in zip(line["scale"], line[key], strict=True)}
    return out


def bench_table_series(table: list[dict[str, str]]) -> dict[str, dict[str, float]]:
    """The plotted series as the bench table gives them: hit rates per family and scale
    (the proven optimum: CP-SAT's where it proved optimality, one instance per cell)."""
    out: dict[str, dict[str, float]] = {}
    for row in table:
        for key, column in (("greedy", "greedy hits"), ("cpsat", "cpsat hits"),
                            ("achievable", "achievable bound")):
            out.setdefault(f"{row['family']} {key}", {})[row["scale"]] = _table_share(
                row[column])
        out.setdefault(f"{row['family']} optimum", {})[row["scale"]] = (
            _table_share(row["cpsat hits"]) if row["CP-SAT status"] == "optimal" else math.nan)
    return out


def bench_scale() -> Measured:
    """``bench --suite scale`` at deterministic time 1: one 16-job batch per family at
    16,384, 32,768 and 65,536 nodes."""
    return Measured(
        argv=("npu-place", "bench", "--suite", "scale", "--deterministic-time", "1",
              "--time-limit", "120", "--dask-workers", "1", "--out", OUT),
        output="results.csv", columns=_BENCH_COLUMNS, table=_bench_table, plot=_bench_plot,
        plotted=_bench_plotted, table_series=bench_table_series,
        alt="origin hit rate of greedy and CP-SAT and the achievable bound by scale, per "
            "family")


def parse_table(text: str) -> list[dict[str, str]]:
    """The first markdown table of ``text`` as rows of ``{header: cell}``."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    header = [c.strip() for c in lines[first].strip("|").split("|")]
    rows = []
    for line in lines[first + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (c.strip() for c in line.strip("|").split("|")),
                             strict=True)))
    return rows
