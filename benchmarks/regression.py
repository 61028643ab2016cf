"""Regression mode: ``npu-place compare --suite quick --baseline FILE [--write-baseline]``.

The baseline file stores, for every instance of a suite, the generator parameters, the
generated scenario itself and each engine's quality (placed jobs, origin hits, objective
and the other metrics).  Comparing re-runs the *stored* scenarios — not freshly generated
ones — so that a change in the generators or in the greedy engine that produced a
scenario's cache cannot hide or fake a regression; a note says when the generator would
now produce a different scenario.

The comparison fails (exit 1) when

* any placement is invalid (the independent validator finds a violation, an engine raises,
  or the facade had to discard an invalid CP-SAT answer);
* an engine's quality drops below the baseline: fewer placed jobs, a lower objective, or
  fewer origin hits with no more placed jobs (placing one more job may cost hits: the
  objective is lexicographic);
* CP-SAT's objective is below greedy's on an instance;
* an instance the baseline ran can no longer be run (``EngineNotAvailable``).

The stored scenarios run as a grid on the sweep's Dask runner and are compared by the same
function as ``npu-place sweep --baseline`` (:func:`benchmarks.sweep.compare_rows`).

Only quality is compared, never time.  CP-SAT runs with one worker, a fixed seed and a
*deterministic* time limit (``max_deterministic_time``), which makes its answer the same
on every machine whatever the load; the wall-clock limit is only a generous guard, and a
run that reaches it is reported as possibly noisy.  The settings are stored in the
baseline and reused by the comparison.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from benchmarks.generators import GenParams, generate_case
from benchmarks.suite import ENGINES, Instance, Settings, bench_row, suite_instances, write_csv
from benchmarks.sweep import (
    Cell,
    Finding,
    Grid,
    Source,
    compare_rows,
    dask_client,
    describe_client,
    expand,
    regression_text,
    run_cells,
)
from heuristics.greedy import EngineNotAvailable
from models.documents import parse_text, read_text
from models.io import scenario_from_data
from models.scenario import Scenario
from models.validation import InputError

BASELINE_VERSION = 1
#: The committed baseline of the quick suite (used when ``--baseline`` is not given).
DEFAULT_BASELINE = Path(__file__).resolve().parent / "baseline" / "quick.json"
#: CP-SAT deterministic time limit of the regression runs (solver "deterministic seconds").
DETERMINISTIC_LIMIT = 5.0
#: Wall-clock guard of one regression CP-SAT run, far above the deterministic limit.
WALL_GUARD = 120.0
#: Metrics stored per engine run.
STORED = ("status", "placed-jobs", "origin-hits", "origin-candidates",
          "achievable-origin-hits", "fault-returns", "subhealthy-nodes", "reserve-used",
          "fragment-score", "affinity-spill", "objective")
_INTS = tuple(k for k in STORED if k != "status")

__all__ = ["DEFAULT_BASELINE", "Finding", "compare_baseline", "compare_runs", "load_baseline",
           "scenario_digest", "write_baseline"]


def scenario_digest(scenario: Scenario) -> str:
    """SHA-256 of a scenario's canonical JSON (contract key names, sorted keys)."""
    text = json.dumps(scenario.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def dump_baseline(data: Any, indent: int = 0) -> str:
    """JSON text with one line per flat object or list (compact yet diff-friendly)."""
    def flat(value: Any) -> bool:
        if isinstance(value, dict):
            return all(not isinstance(v, dict | list) or (isinstance(v, dict) and flat(v))
                       for v in value.values())
        if isinstance(value, list):
            return all(not isinstance(v, dict | list) for v in value)
        return True

    pad = "  " * indent
    if flat(data) or not isinstance(data, dict | list):
        return json.dumps(data, separators=(", ", ": "))
    inner = "  " * (indent + 1)
    if isinstance(data, dict):
        items = [f"{inner}{json.dumps(k)}: {dump_baseline(v, indent + 1)}"
                 for k, v in data.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    items = [f"{inner}{dump_baseline(v, indent + 1)}" for v in data]
    return "[\n" + ",\n".join(items) + "\n" + pad + "]"


def _settings(data: dict[str, Any] | None = None) -> Settings:
    data = data or {}
    return Settings(
        time_limit=float(data.get("time-limit", WALL_GUARD)),
        workers=int(data.get("workers", 1)),
        seed=int(data.get("seed", 0)),
        deterministic_time=float(data.get("deterministic-limit", DETERMINISTIC_LIMIT)),
        write_scenarios=False,
    )


def stored_grid(scenarios: Sequence[tuple[str, Scenario, dict[str, Any]]], settings: Settings
                ) -> Grid:
    """A grid of stored scenarios (``inline`` sources) with both engines and ``settings``.

    ``scenarios`` holds (name, validated scenario, the plain data to ship).
    """
    grid = Grid(source="<baseline>", sources=[], engines=list(ENGINES),
                time_limits=[settings.time_limit], seeds=[settings.seed],
                deterministic_times=[settings.deterministic_time],
                cpsat_workers=settings.workers)
    for name, scenario, data in scenarios:
        grid.sources.append(Source(name, "inline", scenario_digest(scenario)))
        grid.data[name] = data
    return grid


def _run_grid(grid: Grid, scheduler: str | None, workers: int | None
              ) -> tuple[list[Cell], list[dict[str, str]], str]:
    """Run every cell of ``grid``; rows in cell order."""
    cells = expand(grid)
    order = {c.key: i for i, c in enumerate(cells)}
    with dask_client(scheduler, workers) as client:
        where = describe_client(client)
        rows = run_cells(client, cells, grid.data)
    rows.sort(key=lambda r: order.get(r.get("key", ""), len(order)))
    return cells, rows, where


def _quality(cols: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"status": cols.get("status", "")}
    for key in _INTS:
        out[key] = int(cols[key]) if cols.get(key, "") != "" else None
    return out


def baseline_rows(data: dict[str, Any], cells: Sequence[Cell]) -> list[dict[str, str]]:
    """The stored results of a baseline as sweep rows (matched to ``cells`` by name)."""
    results = {str(r["name"]): r.get("results") or {} for r in data["instances"]}
    rows = []
    for cell in cells:
        stored = results.get(cell.source.label, {}).get(cell.engine)
        if stored:
            rows.append({"cell": cell.cell_id, "engine": cell.engine,
                         "scenario": cell.source.label,
                         **{k: "" if v is None else str(v) for k, v in stored.items()}})
    return rows


def write_baseline(suite: str, path: Path, out: TextIO, settings: Settings | None = None,
                   instances: Sequence[Instance] | None = None,
                   scheduler: str | None = None, workers: int | None = None) -> int:
    """Run ``suite`` and store its scenarios and results in ``path``.

    ``settings`` default to one worker, seed 0 and a deterministic limit of
    :data:`DETERMINISTIC_LIMIT`; ``instances`` default to the suite's.  The scenarios are
    generated here, stored, and run as a grid of stored scenarios on Dask (``scheduler``
    as in :func:`benchmarks.sweep.dask_client`), exactly as the comparison will run them.
    Nothing is written (exit 1) when a placement is invalid or an engine fails.
    """
    settings = settings or _settings()
    records: list[dict[str, Any]] = []
    stored = []
    for inst in instances if instances is not None else suite_instances(suite):
        case = generate_case(inst.params)
        # defaults left out: the file stays small and reloads to the same scenario
        dumped = case.scenario.model_dump(by_alias=True, mode="json", exclude_defaults=True)
        records.append({
            "name": inst.name,
            "params": inst.params.to_dict(),
            "history": case.history_engine,
            "scenario-sha256": scenario_digest(case.scenario),
            "scenario": dumped,
        })
        stored.append((inst.name, case.scenario, dumped))
    _, rows, _ = _run_grid(stored_grid(stored, settings), scheduler, workers)
    by = {(r["scenario"], r["engine"]): r for r in rows}
    problems = []
    for record in records:
        runs = {e: by[(record["name"], e)] for e in ENGINES if (record["name"], e) in by}
        skipped = [r.get("note", "") for r in runs.values() if r.get("status") == "skipped"]
        if skipped or len(runs) != len(ENGINES):
            record["results"] = None
            record["skipped"] = skipped[0] if skipped else "not run"
            out.write(f"{record['name']}: skipped ({record['skipped']})\n")
        else:
            for engine, cols in runs.items():
                if cols.get("valid") != "yes":
                    problems.append(f"{record['name']} [{engine}]: {cols.get('status')} "
                                    f"{cols.get('error') or cols.get('note', '')}")
            record["results"] = {engine: _quality(cols) for engine, cols in runs.items()}
            g, c = runs["greedy"], runs["cpsat"]
            out.write(f"{record['name']}: greedy objective {g.get('objective')}, "
                      f"CP-SAT objective {c.get('objective')} ({c.get('status')})\n")
        record["scenario"] = record.pop("scenario")  # keep the scenario last in the file
    if problems:
        out.write("not writing a baseline: some placements are invalid or failed:\n")
        out.write("".join(f"  {p}\n" for p in problems))
        return 1
    data = {
        "version": BASELINE_VERSION,
        "suite": suite,
        "written": time.strftime("%Y-%m-%d"),
        "settings": {"deterministic-limit": settings.deterministic_time or DETERMINISTIC_LIMIT,
                     "time-limit": settings.time_limit, "workers": settings.workers,
                     "seed": settings.seed},
        "instances": records,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_baseline(data) + "\n", encoding="utf-8")
    ran = sum(1 for r in records if r["results"] is not None)
    out.write(f"wrote baseline {path}: {len(records)} instances ({ran} with results)\n")
    return 0


def load_baseline(path: Path) -> dict[str, Any]:
    """Read and sanity-check a baseline file.

    Raises
    ------
    InputError
        When the file is missing or not a baseline.
    """
    # the bounded readers of scenario files: size (/dev/zero is refused one byte past the
    # limit), depth, values, integer range, duplicate keys
    data = parse_text(read_text(path), str(path), "json")
    if not isinstance(data, dict) or data.get("version") != BASELINE_VERSION:
        raise InputError([f"{path}: not a version-{BASELINE_VERSION} baseline file "
                          "(write one with --write-baseline)"])
    if not isinstance(data.get("instances"), list):
        raise InputError([f"{path}: field 'instances' must be a list"])
    for i, record in enumerate(data["instances"]):
        if not isinstance(record, dict) or "name" not in record or "scenario" not in record:
            raise InputError([f"{path}: instances[{i}]: needs 'name' and 'scenario'"])
    return data


def compare_runs(name: str, runs: dict[str, dict[str, str]],
                 base: dict[str, dict[str, Any]] | None) -> list[Finding]:
    """Every finding for one instance's fresh runs against its stored results.

    A thin adapter over :func:`benchmarks.sweep.compare_rows` (the one comparison of the
    project): ``runs`` maps engine → row columns, ``base`` engine → stored quality.
    """
    def cell(engine: str) -> str:
        return f"{name} | {engine} | stored"

    new = [{**cols, "cell": cell(engine), "engine": engine} for engine, cols in runs.items()]
    old = [{"cell": cell(engine), "engine": engine,
            **{k: "" if v is None else str(v) for k, v in (quality or {}).items()}}
           for engine, quality in (base or {}).items()]
    found = compare_rows(old, new)
    for f in found:
        f.cell = name
    return found


def compare_baseline(path: Path, out: TextIO, out_dir: Path | None = None,
                     suite: str | None = None, scheduler: str | None = None,
                     workers: int | None = None) -> int:
    """Re-run the scenarios stored in baseline ``path``; return 0 (no regression) or 1.

    The stored scenarios form a grid (:func:`stored_grid`) run by the sweep's Dask runner
    (``scheduler`` as in :func:`benchmarks.sweep.dask_client`); the rows are compared with
    the stored results by :func:`benchmarks.sweep.compare_rows`, as ``sweep --baseline``
    compares two sweeps.
    """
    data = load_baseline(path)
    if suite is not None and data.get("suite") not in (None, suite):
        raise InputError([f"{path}: the baseline is for suite '{data.get('suite')}', "
                          f"not '{suite}'"])
    settings = _settings(data.get("settings"))
    findings: list[Finding] = []
    stored = []
    for i, record in enumerate(data["instances"]):
        name = str(record["name"])
        try:
            scenario = scenario_from_data(record["scenario"], f"{path}: instances[{i}] ({name})")
        except InputError as exc:
            findings.append(Finding(name, "-", "stored scenario is invalid: "
                                    + "; ".join(exc.messages[:3]), True))
            continue
        _generator_note(record, scenario, name, findings)
        stored.append((name, scenario, record["scenario"]))
    started = time.perf_counter()
    cells, rows, where = _run_grid(stored_grid(stored, settings), scheduler, workers)
    old = baseline_rows(data, cells)
    findings += compare_rows(old, rows)
    for row in rows:
        if (row.get("engine") == "cpsat" and row.get("solver-wall-seconds")
                and float(row["solver-wall-seconds"]) >= 0.95 * settings.time_limit):
            findings.append(Finding(row["cell"], "cpsat", "CP-SAT reached the wall-clock "
                                    "guard: its answer may depend on machine load", False))
    elapsed = time.perf_counter() - started
    title = (f"regression suite '{data.get('suite')}' against {path} "
             f"(CP-SAT: deterministic limit {settings.deterministic_time:g}, "
             f"{settings.workers} worker(s), seed {settings.seed}); {elapsed:.1f} s on {where}")
    report = regression_text(title, rows, old, findings)
    out.write(report)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "regression.md").write_text(report, encoding="utf-8")
        write_csv([bench_row(r) for r in rows], out_dir / "results.csv")
    return 1 if any(f.failure for f in findings) else 0


def _generator_note(record: dict[str, Any], scenario: Scenario, name: str,
                    findings: list[Finding]) -> None:
    """Note when the generator would now produce a different scenario for the params."""
    params = record.get("params")
    if not isinstance(params, dict):
        return
    try:
        fresh = generate_case(GenParams(**params)).scenario
    except (TypeError, ValueError, EngineNotAvailable) as exc:
        findings.append(Finding(name, "-", f"cannot regenerate from the stored params: {exc}",
                                False))
        return
    if scenario_digest(fresh) != scenario_digest(scenario):
        findings.append(Finding(name, "-", "the generator now produces a different scenario "
                                "for these parameters; the stored one was used", False))


def run_regression(args: argparse.Namespace, out: TextIO) -> int:
    """``npu-place compare --suite S --baseline FILE [--write-baseline] [--out DIR]
    [--scheduler ADDRESS]``."""
    suite = str(args.suite)
    baseline = getattr(args, "baseline", None)
    scheduler = getattr(args, "scheduler", None)
    if getattr(args, "write_baseline", False):
        if not baseline:
            raise InputError(["--write-baseline needs --baseline FILE (where to write it)"])
        return write_baseline(suite, Path(baseline), out, scheduler=scheduler)
    if baseline:
        path = Path(baseline)
    elif suite == "quick":
        path = DEFAULT_BASELINE
    else:
        raise InputError([f"no committed baseline for suite '{suite}': give --baseline FILE "
                          "(write one with --write-baseline)"])
    out_dir = Path(args.out) if getattr(args, "out", None) else None
    return compare_baseline(path, out, out_dir, suite, scheduler)
