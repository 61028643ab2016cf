"""The deterministic figures of the manual, each made by a named command.

::

    python -m benchmarks.doc_figures [NAME ...] [--check] [--fast] [--list] [--docs DIR]

A figure is a block of a page of ``docs/`` between two marker comments::

    <!-- figure NAME: python -m benchmarks.doc_figures NAME -->
    ...
    <!-- end of figure NAME -->

and :data:`FIGURES` says how each is made: the replay tables of the bundled days (every
engine's day replayed under the default deterministic budget) and their plots, the
recorded-day table, the plan table of a bundled example, the bundled example scenarios
planned by greedy and CP-SAT under a deterministic budget, the quick regression suite's
stored results, and the transcript of the import walkthrough (the commands run as a user
runs them, wall times elided).  Every block ends with the command and the code version
that made it.

A *measured* figure (:mod:`benchmarks.measured_figures`: the many-seed replays, the
anytime curve and the benchmark table at scale) is a run too long to repeat on every
change: ``--measure`` runs it and stores its rows, command, commit, date and load in
``docs/figures/NAME.json``; without ``--measure`` its table and plot are made again from
that file (the PNG records the file's hash), and ``--check`` compares them with it.

A figure with plots draws them from one replay with its table and stores the data series
the plots draw beside the PNG files (``docs/figures/NAME.json``), so that a test compares
the series, not the pixels.  Without ``--check`` the blocks, series and PNG files are
rewritten; with it nothing is written and the exit code is 1 when a block or a series
differs from what its command gives now (``tests/benchmarks/test_doc_figures.py`` runs
the same comparison).  Every figure is a function of the code and the bundled inputs:
none depends on the machine or its load.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from benchmarks import measured_figures
from benchmarks.measured_figures import Measured
from benchmarks.outputs import write_output
from benchmarks.regression import read_baseline_file
from models.documents import read_bytes, read_text

#: The repository root (the parent of this package).
ROOT = Path(__file__).resolve().parent.parent
#: The manual's pages.
DOCS = ROOT / "docs"
#: The bundled kubectl dumps of the import walkthrough.
KUBE_EXAMPLES = ROOT / "models" / "kube" / "examples"
#: Deterministic time of the bundled examples' CP-SAT runs (1 worker, seed 0).
EXAMPLE_DETERMINISTIC_TIME = 5.0

_BEGIN = "<!-- figure {name}: python -m benchmarks.doc_figures {name} -->"
_END = "<!-- end of figure {name} -->"
_BLOCK = re.compile(r"<!-- figure ([\w-]+): [^\n]*-->\n(.*?)<!-- end of figure \1 -->",
                    re.DOTALL)


@dataclass(frozen=True)
class Figure:
    """One generated block: its page, whether it is slow to make, and how it is made.

    A figure with ``series`` has plots too: ``series()`` gives the data the plots draw,
    stored beside them as ``docs/figures/NAME.json`` (checked like the block), and
    ``draw(folder)`` writes the PNG files from the same data.  A ``measured`` figure's
    block and plot are made from its stored run (:mod:`benchmarks.measured_figures`).
    """

    name: str
    page: str
    slow: bool
    make: Callable[[], str]
    about: str
    series: Callable[[], dict[str, Any]] | None = None
    draw: Callable[[Path], list[str]] | None = None
    measured: Measured | None = None
    plots: tuple[str, ...] = ()


def code_version() -> str:
    """The version of the code that makes the figures (the installed npu-place's)."""
    from importlib import metadata

    try:
        return metadata.version("npu-place")
    except metadata.PackageNotFoundError:  # pragma: no cover - a bare checkout
        return "unknown"


def made_by(figure: Figure) -> str:
    """The line under every figure: the command and code version that made it, and the
    test that keeps it true."""
    data = (f"; the plots' data series are in [{figure.name}.json](figures/{figure.name}.json)"
            if figure.series is not None else "")
    return (f"*Made by `python -m benchmarks.doc_figures {figure.name}` with npu-place "
            f"{code_version()}{data}; `tests/benchmarks/test_doc_figures.py` compares it with "
            "what the code gives, on every CI run.*")


def block_text(figure: Figure, docs: Path = DOCS) -> str:
    """What the figure's block holds: the figure, then :func:`made_by` (a measured
    figure's from its data file in ``docs/figures``)."""
    if figure.measured is not None:
        return measured_figures.block(figure.name, figure.measured, docs)
    return figure.make() + "\n\n" + made_by(figure)


def series_file(figure: Figure, docs: Path = DOCS) -> Path:
    """Where the figure's plot series are stored: ``docs/figures/NAME.json``."""
    return docs / "figures" / f"{figure.name}.json"


def plots_drawn_from_series(figure: Figure, docs: Path = DOCS) -> bool:
    """Whether every PNG of the figure records the hash of its stored series file (it
    was drawn from that file as it is)."""
    stored = series_file(figure, docs)
    if not stored.is_file():
        return False
    digest = "sha256:" + hashlib.sha256(read_bytes(stored)).hexdigest()
    return all((docs / "figures" / name).is_file() and measured_figures.png_text(
        docs / "figures" / name).get(measured_figures.SOURCE_KEY) == digest
        for name in figure.plots)


def series_text(figure: Figure) -> str:
    """The JSON of ``docs/figures/NAME.json``: command, code version and series."""
    assert figure.series is not None
    data = {"command": f"python -m benchmarks.doc_figures {figure.name}",
            "npu-place": code_version(), "series": figure.series()}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table, ``|---|`` separators."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# --------------------------------------------------------------------------- replay


@functools.lru_cache(maxsize=4)
def _replay(example: str) -> Any:
    """``npu-place replay --example NAME`` with the default options (every engine,
    deterministic time 1 per session, seed 0); kept, so that a day's table and its plots
    come from one replay."""
    from benchmarks.replay.api import example_path, read_spec
    from benchmarks.replay.generate import generate_day
    from benchmarks.replay.run import ReplayOptions, replay_day

    return replay_day(generate_day(read_spec(example_path(example)), 0), ReplayOptions())


def _day_series(example: str) -> dict[str, Any]:
    from benchmarks.replay.report import plot_series

    series: dict[str, Any] = plot_series(_replay(example))
    return series


def _draw_day(example: str, folder: Path) -> list[str]:
    """The day's two plots drawn from its stored series (``folder/replay-NAME.json``),
    each PNG recording that file's hash (:data:`measured_figures.SOURCE_KEY`)."""
    from benchmarks.replay.report import draw_plots
    from benchmarks.replay.run import ReplayOptions

    stored = folder / f"replay-{example}.json"
    series = json.loads(read_text(stored))["series"]
    order = {engine: i for i, engine in enumerate(ReplayOptions().engines)}
    for key in ("pulled-gb", "hit-rate"):  # the table's engine order (the file's is sorted)
        series[key] = dict(sorted(series[key].items(), key=lambda kv: order.get(kv[0], 99)))
    digest = "sha256:" + hashlib.sha256(read_bytes(stored)).hexdigest()
    return draw_plots(series, folder, prefix=f"replay-{example}-",
                      metadata={measured_figures.SOURCE_KEY: digest})


def _plot_links(example: str) -> str:
    return (f"![cumulative GB pulled, {example}](figures/replay-{example}-pulled-gb.png)\n"
            f"![hit rate per hour, {example}](figures/replay-{example}-hit-rate.png)")


def _replay_rows(example: str | None = None, snapshots: Path | None = None
                 ) -> list[dict[str, Any]]:
    """The summary rows of ``npu-place replay --example NAME`` (or ``--snapshots DIR``)
    with the default options: every engine, deterministic time 1 per session, seed 0."""
    from benchmarks.replay.report import summary_row
    from benchmarks.replay.run import ReplayOptions, replay_day

    if example is not None:
        return [summary_row(run, 0) for run in _replay(example).runs]
    from benchmarks.replay.snapshots import series_day

    assert snapshots is not None
    replay = replay_day(series_day(snapshots, interval=300), ReplayOptions())
    return [summary_row(run, 0) for run in replay.runs]


def _fixed(value: Any, digits: int) -> str:
    """``value`` with ``digits`` decimals, halves rounded up (2140.5 -> 2141), as a reader
    rounds; ``-`` for an empty value (a rate without candidates)."""
    if value == "":
        return "-"
    exact = value if isinstance(value, Decimal) else Decimal(str(value))
    return str(exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def _rate(value: Any) -> str:
    return _fixed(value, 3)


def _ratio(hits: int, candidates: int) -> str:
    """``hits / candidates`` with 3 decimals, from the counts (not the CSV's rounded rate)."""
    return "-" if not candidates else _fixed(Decimal(hits) / Decimal(candidates), 3)


def _day_table(example: str) -> str:
    rows = _replay_rows(example)
    header = ("engine", "pods-placed", "pulls", "pulled-gb", "pull-minutes", "image-hit-rate",
              "origin-hits / candidates (achievable)", "origin-hit-rate", "rfc-target-met",
              "pending-p99", "wait-mean", "evicted-pods", "fragmentation-end")
    return markdown_table(header, [[
        r["engine"], r["pods-placed"], r["pulls"], _fixed(r["pulled-gb"], 0),
        _fixed(r["pull-minutes"], 0), _rate(r["image-hit-rate"]),
        f"{r['origin-hits']} / {r['origin-candidates']} ({r['origin-achievable']})",
        _ratio(r["origin-hits"], r["origin-candidates"]), r["rfc-target-met"] or "-",
        f"{r['pending-p99']:g}", _fixed(r["wait-mean"], 2), r["evicted-pods"],
        _rate(r["fragmentation-end"])]
        for r in rows]) + "\n\n" + _plot_links(example)


def _vnpu_day_table() -> str:
    rows = _replay_rows("vnpu-inference-day")
    header = ("engine", "pods-placed", "pulls", "pulled-gb", "pull-minutes", "image-hit-rate",
              "origin-hit-rate", "vnpu-pods", "vnpu-pulls", "vnpu-pulled-gb",
              "vnpu-origin-hit-rate")
    return markdown_table(header, [[
        r["engine"], r["pods-placed"], r["pulls"], _fixed(r["pulled-gb"], 0),
        _fixed(r["pull-minutes"], 0), _rate(r["image-hit-rate"]),
        _ratio(r["origin-hits"], r["origin-candidates"]), r["vnpu-pods"], r["vnpu-pulls"],
        _fixed(r["vnpu-pulled-gb"], 0), _rate(r["vnpu-origin-hit-rate"])] for r in rows]
    ) + "\n\n" + _plot_links("vnpu-inference-day")


def _recorded_day_table() -> str:
    rows = _replay_rows(snapshots=KUBE_EXAMPLES / "superpod-850")
    header = ("engine", "pods-placed", "pulls", "pulled-gb", "image-hit-rate",
              "origin-hit-rate", "evicted-pods")
    return markdown_table(header, [[
        r["engine"], r["pods-placed"], r["pulls"], _fixed(r["pulled-gb"], 0),
        _rate(r["image-hit-rate"]), _ratio(r["origin-hits"], r["origin-candidates"]),
        r["evicted-pods"]]
        for r in rows])


# --------------------------------------------------------------------------- examples


def _examples_table() -> str:
    """Every bundled example scenario planned by greedy and by CP-SAT (``npu-place compare
    --example NAME --deterministic-time 5``: 1 worker, seed 0)."""
    from solver.doors import example_names, example_path, load_problem
    from solver.facade import solve

    rows = []
    for name in example_names():
        problem = load_problem(example_path(name))
        jobs = len(problem.scenario.jobs) + len(problem.scenario.vnpu_jobs)
        greedy = solve(problem, engine="greedy", time_limit=60.0, workers=1, seed=0)
        cpsat = solve(problem, engine="cpsat", time_limit=120.0, workers=1, seed=0,
                      deterministic_time=EXAMPLE_DETERMINISTIC_TIME)
        cells: list[Any] = [f"`{name}`", problem.num_nodes, jobs]
        for result in (greedy, cpsat):
            metrics = result.placement.metrics
            assert metrics is not None  # solve() always scores its answer
            cells += [f"{metrics.placed_jobs} / {jobs}",
                      f"{metrics.origin_hits} / {metrics.origin_candidates}",
                      result.objective]
        cells.insert(6, cpsat.status)
        rows.append(cells)
    header = ("example", "nodes", "jobs", "greedy placed", "greedy hits", "greedy objective",
              "CP-SAT status", "CP-SAT placed", "CP-SAT hits", "CP-SAT objective")
    return markdown_table(header, rows)


# --------------------------------------------------------------------------- quick suite


def _quick_suite_table() -> str:
    """The stored results of the quick regression suite (``benchmarks/baseline/quick.json``,
    which ``npu-place compare --suite quick`` re-runs and CI checks)."""
    data = json.loads(read_text(ROOT / "benchmarks" / "baseline" / "quick.json"))
    settings = data["settings"]
    rows = []
    for instance in data["instances"]:
        greedy = instance["results"]["greedy"]
        cpsat = instance["results"]["cpsat"]
        rows.append([f"`{instance['name']}`", greedy["objective"],
                     f"{greedy['origin-hits']} / {greedy['origin-candidates']}",
                     cpsat["status"], cpsat["objective"],
                     f"{cpsat['origin-hits']} / {cpsat['origin-candidates']}"])
    header = ("instance", "greedy objective", "greedy hits", "CP-SAT status",
              "CP-SAT objective", "CP-SAT hits")
    note = (f"Deterministic time {settings['deterministic-limit']:g} per instance, "
            f"{settings['workers']} worker, seed {settings['seed']}.")
    return markdown_table(header, rows) + "\n\n" + note


def _percent(part: int, whole: int) -> str:
    return _fixed(Decimal(100 * part) / Decimal(whole), 1) + " %"


def _full_suite_table() -> str:
    """The quality figures of the full suite's stored answers
    (``benchmarks/baseline/full.json.gz``: the run ``npu-place compare --suite full``
    re-runs and compares)."""
    data = json.loads(read_baseline_file(ROOT / "benchmarks" / "baseline" / "full.json.gz"))
    pairs = [(i["results"]["greedy"], i["results"]["cpsat"], i["params"]["jobs"] == 1)
             for i in data["instances"]]

    def versus(key: str) -> str:
        win = sum(c[key] > g[key] for g, c, _s in pairs)
        tie = sum(c[key] == g[key] for g, c, _s in pairs)
        return f"{win} / {tie} / {len(pairs) - win - tie}"

    def rates(chosen: list[tuple[dict[str, Any], dict[str, Any], bool]]) -> str:
        candidates = sum(g["origin-candidates"] for g, _c, _s in chosen)
        return " / ".join(_percent(sum(r[key] for r in rows), candidates) for key, rows in (
            ("origin-hits", [g for g, _c, _s in chosen]),
            ("origin-hits", [c for _g, c, _s in chosen]),
            ("achievable-origin-hits", [g for g, _c, _s in chosen])))

    proved = [x for x in pairs if x[1]["status"] == "optimal"]
    singles = [x for x in pairs if x[2]]
    batches = [x for x in pairs if not x[2]]
    most = max(c.get("solver-deterministic-seconds") or 0.0 for _g, c, _s in singles)
    rows = [
        ["CP-SAT vs greedy, objective (win / tie / loss)", versus("objective")],
        ["CP-SAT vs greedy, origin hits (win / tie / loss)", versus("origin-hits")],
        ["origin hit rate: greedy / CP-SAT / achievable bound", rates(pairs)],
        [f"on the {len(proved)} instances CP-SAT proved optimal: greedy / proven optimum / "
         "achievable bound", rates(proved)],
        ["single jobs proven optimal (64–8,192 nodes)",
         f"{sum(c['status'] == 'optimal' for _g, c, _s in singles)} / {len(singles)}, at most "
         f"{_fixed(most, 1)} deterministic s"],
        ["batches proven optimal",
         f"{sum(c['status'] == 'optimal' for _g, c, _s in batches)} / {len(batches)}"],
    ]
    settings = data["settings"]
    note = (f"{len(pairs)} instances, deterministic time {settings['deterministic-limit']:g}, "
            f"{settings['workers']} worker, seed {settings['seed']}; baseline written "
            f"{data['written']}.")
    return markdown_table(("measure", "value"), rows) + "\n\n" + note


# --------------------------------------------------------------------------- import walkthrough

#: The walkthrough's commands, by block: each a shell line as the page shows it.
WALKTHROUGH: dict[str, tuple[str, ...]] = {
    "import": (
        "npu-place import $E/superpod-850/t0 --now 1764400000 --output s0.yaml",
        "npu-place import $E/superpod-850/t1 --now 1764401800 --previous s0.yaml "
        "--output s1.yaml",
        "sed -n '/^jobs:/,/^running:/p' s1.yaml",
    ),
    "plan": (
        "npu-place validate s1.yaml",
        "npu-place plan s1.yaml --deterministic-time 5",
        "npu-place compare s1.yaml --deterministic-time 5",
    ),
    "simulate": (
        "npu-place simulate s1.yaml $E/superpod-850/events.yaml --engine greedy",
    ),
}
#: Lines of a command's output kept in the page (the rest is cut with ``...``).
_KEEP_LINES = {"simulate": 8}
_WALL = re.compile(r"^(wall-seconds\s+)\S+$", re.MULTILINE)
_WALL_COLUMN = re.compile(r"(\s)[0-9]+\.[0-9]+$", re.MULTILINE)


def _run_line(line: str, cwd: Path) -> str:
    """Run one walkthrough line in ``cwd`` as a user would (``npu-place`` is this code's
    command line in a subprocess; ``sed -n '/a/,/b/p'`` is done here)."""
    words = shlex.split(line.replace("$E", str(KUBE_EXAMPLES)))
    if words[0] == "sed":
        start, stop = re.fullmatch(r"/\^(\w+):/,/\^(\w+):/p", words[2]).groups()  # type: ignore[union-attr]
        lines = read_text(cwd / words[3]).splitlines()
        first = next(i for i, t in enumerate(lines) if t.startswith(f"{start}:"))
        last = next(i for i, t in enumerate(lines) if i > first and t.startswith(f"{stop}:"))
        return "\n".join(lines[first:last + 1]) + "\n"
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    done = subprocess.run([sys.executable, "-m", "solver.cli", *words[1:]], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{line}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stderr + done.stdout


def _walkthrough(block: str) -> str:
    """One block of the import walkthrough: ``$ command`` lines and their output, paths
    shown relative to the repository and wall times elided (``…``)."""
    with tempfile.TemporaryDirectory(prefix="npu-place-figures-") as tmp:
        cwd = Path(tmp)
        for earlier in WALKTHROUGH:  # the files the block's commands read
            if earlier == block:
                break
            for line in WALKTHROUGH[earlier]:
                if line.startswith("npu-place import"):
                    _run_line(line, cwd)
        out = ["```"] + (["$ E=models/kube/examples"] if block == "import" else [])
        for line in WALKTHROUGH[block]:
            text = _run_line(line, cwd).replace(str(KUBE_EXAMPLES), "models/kube/examples")
            if line.startswith(("npu-place plan", "npu-place compare")):
                text = _WALL.sub(r"\1…", text)
                if line.startswith("npu-place compare"):
                    head, _sep, rows = text.partition("\n")
                    text = head + "\n" + _WALL_COLUMN.sub(r"\1…", rows)
            lines = text.rstrip("\n").splitlines()
            keep = _KEEP_LINES.get(block)
            if keep is not None and len(lines) > keep:
                lines = [*lines[:keep], "..."]
            out += [f"$ {line}", *lines]
    return "\n".join([*out, "```"])


# --------------------------------------------------------------------------- plan table

#: The command of the plan table of ``docs/plan-output.md``.
PLAN_TABLE = "npu-place plan --example superpod-850 --deterministic-time 5"


def _plan_table() -> str:
    """``npu-place plan`` of a bundled example as a user sees it (wall time elided)."""
    with tempfile.TemporaryDirectory(prefix="npu-place-figures-") as tmp:
        text = _WALL.sub(r"\1…", _run_line(PLAN_TABLE, Path(tmp)))
    return "\n".join(["```", f"$ {PLAN_TABLE}", *text.rstrip("\n").splitlines(), "```"])


# --------------------------------------------------------------------------- registry


def measured(name: str, page: str, spec: Measured) -> Figure:
    """A measured figure: made from ``docs/figures/NAME.json`` (fast), measured again by
    ``--measure`` (slow)."""
    def make() -> str:
        return measured_figures.block(name, spec, DOCS)

    return Figure(name, page, False, make, f"measured: {spec.command()}", measured=spec)


def _figures() -> dict[str, Figure]:
    def day(example: str, make: Callable[[], str]) -> Figure:
        return Figure(f"replay-{example}", "replay.md", True, make,
                      f"npu-place replay --example {example} (summary table and plots)",
                      series=lambda: _day_series(example),
                      draw=lambda folder: _draw_day(example, folder),
                      plots=tuple(f"replay-{example}-{plot}.png"
                                  for plot in ("pulled-gb", "hit-rate")))

    figures = [
        day("sharing-850", lambda: _day_table("sharing-850")),
        day("faults-950-multilevel", lambda: _day_table("faults-950-multilevel")),
        day("vnpu-inference-day", _vnpu_day_table),
        Figure("replay-recorded-850", "replay.md", False, _recorded_day_table,
               "npu-place replay --snapshots models/kube/examples/superpod-850"),
        Figure("plan-table", "plan-output.md", True, _plan_table, PLAN_TABLE),
        Figure("examples", "examples.md", False, _examples_table,
               "every bundled example: npu-place compare --example NAME "
               "--deterministic-time 5"),
        Figure("full-suite", "benchmarks.md", False, _full_suite_table,
               "the full suite's stored answers (benchmarks/baseline/full.json.gz)"),
        Figure("quick-suite", "benchmarks.md", False, _quick_suite_table,
               "the quick suite's stored results (benchmarks/baseline/quick.json)"),
        *(Figure(f"import-walkthrough-{block}", "import.md", True,  # subprocesses
                 lambda block=block: _walkthrough(block),  # type: ignore[misc]
                 f"the import walkthrough: {'; '.join(WALKTHROUGH[block])}")
          for block in WALKTHROUGH),
        *(measured(f"replay-seeds-{example}", "replay-figures.md",
                   measured_figures.replay_seeds(example, seeds, 2))
          for example, seeds in (("sharing-850", "0-31"), ("faults-950-multilevel", "0-31"),
                                 ("vnpu-inference-day", "0-15"))),
        measured("scale-anytime", "scale.md", measured_figures.anytime_scale()),
        measured("scale-bench", "scale.md", measured_figures.bench_scale()),
        measured("scale-curve", "scale.md", measured_figures.curve_scale()),
    ]
    return {f.name: f for f in figures}


#: Every figure of the manual, by name.
FIGURES: dict[str, Figure] = _figures()


def blocks(text: str) -> dict[str, str]:
    """The figure blocks of a page: name -> content (between the markers, stripped)."""
    return {m.group(1): m.group(2).strip("\n") for m in _BLOCK.finditer(text)}


def replace_block(text: str, name: str, content: str) -> str:
    """``text`` with the block ``name`` holding ``content``.

    Raises
    ------
    KeyError
        When the page has no block of that name.
    """
    begin, end = _BEGIN.format(name=name), _END.format(name=name)
    pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise KeyError(f"no figure block '{name}' ({begin})")
    return pattern.sub(lambda _m: f"{begin}\n\n{content}\n\n{end}", text, count=1)


def _measured_files(figure: Figure, spec: Measured, docs: Path, measure: bool,
                    check: bool) -> int:
    """Run a measured figure's benchmark (``measure``) and draw its PNG from the data
    file when the PNG was drawn from other data; 1 when the PNG differed."""
    if measure:
        print(f"{figure.name}: running {spec.command()} ...", flush=True)
        stored = measured_figures.measure(figure.name, spec, docs)
        print(f"{figure.name}: {stored} written")
    if spec.plot is None or measured_figures.png_is_current(figure.name, docs):
        return 0
    if check:
        print(f"{figure.name}: {measured_figures.png_path(figure.name, docs)} was not drawn "
              f"from {measured_figures.data_path(figure.name, docs)} as it is")
    else:
        print(f"{figure.name}: {measured_figures.draw(figure.name, spec, docs)} drawn")
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite (or check) the figure blocks of the manual."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.doc_figures",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="figures to make (default: all)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when a block differs from its command")
    parser.add_argument("--fast", action="store_true", help="skip the slow figures")
    parser.add_argument("--measure", action="store_true",
                        help="run the named measured figures' benchmarks again (minutes to "
                             "an hour each) and store their data before making them")
    parser.add_argument("--list", action="store_true", help="list the figures and exit")
    parser.add_argument("--docs", type=Path, default=DOCS, help="the manual's folder")
    args = parser.parse_args(argv)
    if args.list:
        for figure in FIGURES.values():
            print(f"{figure.name:32} docs/{figure.page:14} {'slow' if figure.slow else 'fast'}"
                  f"  {figure.about}")
        return 0
    unknown = [n for n in args.names if n not in FIGURES]
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(unknown)}; known: {', '.join(FIGURES)}")
    chosen = [FIGURES[n] for n in args.names] if args.names else [
        f for f in FIGURES.values() if not (args.fast and f.slow)]
    if args.measure:
        unmeasured = [f.name for f in chosen if f.measured is None]
        if not args.names or unmeasured or args.check:
            parser.error("--measure: name measured figures only, without --check (measured: "
                         f"{', '.join(n for n, f in FIGURES.items() if f.measured)})")
    differ = 0
    for figure in chosen:
        page = args.docs / figure.page
        if figure.measured is not None:
            differ += _measured_files(figure, figure.measured, args.docs, args.measure,
                                      args.check)
        made = block_text(figure, args.docs)
        text = read_text(page)  # after the (slow) make: edits meanwhile are kept
        new = replace_block(text, figure.name, made)
        if figure.series is not None:
            data, stored = series_text(figure), series_file(figure, args.docs)
            rewritten = not stored.is_file() or read_text(stored) != data
            if rewritten:
                differ += 1
                if args.check:
                    print(f"{figure.name}: {stored} differs from the series the code gives")
                else:
                    stored.parent.mkdir(parents=True, exist_ok=True)
                    write_output(stored, data)  # no symbolic link followed
                    print(f"{figure.name}: {stored} rewritten")
            if rewritten or not plots_drawn_from_series(figure, args.docs):
                differ += 0 if rewritten else 1
                if args.check:
                    print(f"{figure.name}: {', '.join(figure.plots)} not drawn from {stored}")
                else:
                    assert figure.draw is not None
                    print(f"{figure.name}: {', '.join(figure.draw(stored.parent))} drawn")
        if new == text:
            print(f"{figure.name}: unchanged")
            continue
        differ += 1
        if args.check:
            print(f"{figure.name}: docs/{figure.page} differs from what the code gives now:\n"
                  f"{made}")
        else:
            page.write_text(new, "utf-8")
            print(f"{figure.name}: docs/{figure.page} rewritten")
    return 1 if args.check and differ else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
