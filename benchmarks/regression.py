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
* an instance the baseline ran can no longer be run (an engine raises);
* a run the baseline proved optimal is not proved now, or its proof needs more than
  :data:`SLOWER_PROOF_FACTOR` × the baseline's deterministic time +
  :data:`SLOWER_PROOF_SLACK` (:func:`compare_proofs`).

The stored scenarios run as a grid on the sweep's Dask runner and are compared by the same
function as ``npu-place sweep --baseline`` (:func:`benchmarks.sweep.compare_rows`).

Only quality and CP-SAT's deterministic time are compared, never wall time.  CP-SAT runs
with one worker, a fixed seed and a *deterministic* time limit (``max_deterministic_time``),
which makes its answer (and the deterministic time it used) the same on every machine
whatever the load; the wall-clock limit is only a generous guard, and a run that reaches
it is reported as possibly noisy.  The settings are stored in the baseline and reused by
the comparison.

A baseline named ``*.gz`` is gzip-compressed (deterministic bytes); the full suite's is
built from a bench run (:func:`baseline_from_bench`, ``--write-baseline --from-bench DIR``)
rather than by running the suite again.

Why this file is long: it is the one regression command, and every part serves it: the
baseline file (gzip, bounded read, atomic write), building a baseline from a run or from a
bench folder, and comparing (quality through :func:`benchmarks.sweep.compare_rows`,
proofs through :func:`compare_proofs`).  The row comparison itself already lives in
:mod:`benchmarks.sweep.compare`; the file is only just over the limit.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import math
import os
import re
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from benchmarks.baseline_checks import check_baseline, impossible_after_run, impossible_figures
from benchmarks.generators import GenParams, generate_case
from benchmarks.outputs import check_out_dir, write_output
from benchmarks.suite import (
    ENGINES,
    NO_RESULT,
    Instance,
    Settings,
    bench_row,
    machine_description,
    read_csv,
    suite_instances,
)
from benchmarks.suite_outputs import write_outputs
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
from models.documents import DocumentError, load_json, read_bytes, read_document, read_text
from models.io import scenario_from_data
from models.joblist import job_count
from models.scenario import Scenario
from models.validation import InputError

BASELINE_VERSION = 1
#: The committed baseline of the quick suite (used when ``--baseline`` is not given).
DEFAULT_BASELINE = Path(__file__).resolve().parent / "baseline" / "quick.json"
#: Where the full suite's baseline is stored (gzip-compressed; built from a bench run with
#: ``compare --suite full --write-baseline --from-bench DIR``), used when ``--baseline`` is
#: not given.
FULL_BASELINE = DEFAULT_BASELINE.with_name("full.json.gz")
#: CP-SAT deterministic time limit of the regression runs (solver "deterministic seconds").
DETERMINISTIC_LIMIT = 5.0
#: Wall-clock guard of one regression CP-SAT run, far above the deterministic limit.
WALL_GUARD = 120.0
#: Metrics stored per engine run.
STORED = ("status", "placed-jobs", "origin-hits", "origin-candidates",
          "achievable-origin-hits", "fault-returns", "subhealthy-nodes", "reserve-used",
          "fragment-score", "affinity-spill", "objective")
_INTS = tuple(k for k in STORED if k != "status")
#: CP-SAT's deterministic time used by a run (seconds), stored when the run recorded it.
DET_USED = "solver-deterministic-seconds"
#: A proof the baseline made is *slower* when it now needs more than this many times the
#: baseline's deterministic time ...
SLOWER_PROOF_FACTOR = 1.25
#: ... plus this many deterministic seconds (tiny proofs vary by a few hundredths).
SLOWER_PROOF_SLACK = 0.05
#: The files ``compare --suite --out DIR`` writes in its folder.
REGRESSION_FILES = ("regression.md", "results.csv", "report.md", "hit_rate_by_scale.png",
                    "wall_time_vs_nodes.png", "objective_improvement.png")
#: Largest baseline read, in bytes of (decompressed) JSON: a full-suite baseline is about
#: 54 MB (1.8 MB gzip-compressed), above the 32 MiB of a scenario file.
BASELINE_MAX_BYTES = 256 * 1024 * 1024
#: Most values (scalars, mappings, lists and keys) a baseline may hold.
BASELINE_MAX_VALUES = 40_000_000

__all__ = ["DEFAULT_BASELINE", "FULL_BASELINE", "Finding", "baseline_from_bench",
           "compare_baseline", "compare_proofs", "compare_runs", "load_baseline",
           "read_baseline_file", "scenario_digest", "write_baseline", "write_baseline_file"]


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
    used = cols.get(DET_USED, "")
    if used != "":  # CP-SAT runs only, and only rows that recorded it
        out[DET_USED] = round(float(used), 6)
    return out


def is_compressed(path: Path) -> bool:
    """A baseline written and read gzip-compressed (its name ends in ``.gz``)."""
    return path.name.endswith(".gz")


def write_baseline_file(path: Path, data: dict[str, Any]) -> None:
    """Write baseline ``data`` to ``path``: JSON text, gzip-compressed when ``path`` ends
    in ``.gz``.

    The compressed bytes are deterministic: no file name and modification time 0 in the
    gzip header, compression level 9, so the same data gives the same file.  The file is
    written next to its place and renamed over it, so a failed write leaves the old one.
    """
    raw = (dump_baseline(data) + "\n").encode("utf-8")
    if is_compressed(path):
        raw = gzip.compress(raw, compresslevel=9, mtime=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(raw)
    os.replace(tmp, path)


def read_baseline_file(path: Path) -> str:
    """The JSON text of baseline ``path`` (decompressed when it ends in ``.gz``).

    At most :data:`BASELINE_MAX_BYTES` bytes of text are read (of decompressed text for a
    compressed file: a small file that expands past the limit is refused there).

    Raises
    ------
    InputError
        Naming the file: missing, unreadable, not gzip, truncated, too large, not UTF-8.
    """
    if not is_compressed(path):
        return read_text(path, BASELINE_MAX_BYTES)
    if not path.exists():
        raise InputError([f"{path}: cannot read: no such file (write a baseline with "
                          "--write-baseline)"])
    if path.is_dir():
        raise InputError([f"{path}: is a directory, not a baseline file"])
    compressed = read_bytes(path, BASELINE_MAX_BYTES)  # bounded, as the text
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(compressed), mode="rb") as stream:
            raw = stream.read(BASELINE_MAX_BYTES + 1)
    except (gzip.BadGzipFile, zlib.error):
        raise InputError([f"{path}: not a gzip-compressed file (a name ending in .gz is read "
                          "as gzip)"]) from None
    except EOFError:
        raise InputError([f"{path}: the compressed file is truncated"]) from None
    except OSError as exc:
        raise InputError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    if len(raw) > BASELINE_MAX_BYTES:
        raise InputError([f"{path}: more than {BASELINE_MAX_BYTES} bytes once decompressed"])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError([f"{path}: not UTF-8 text once decompressed (byte {exc.start})"]
                         ) from None


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


def _stored_results(name: str, runs: dict[str, dict[str, str]],
                    problems: list[str]) -> dict[str, Any]:
    """Each engine's stored quality of instance ``name``; a run that is not valid is
    added to ``problems`` (then no baseline is written)."""
    for engine, cols in runs.items():
        if cols.get("valid") != "yes":
            problems.append(f"{name} [{engine}]: {cols.get('status')} "
                            f"{cols.get('error') or cols.get('note', '')}")
    return {engine: _quality(cols) for engine, cols in runs.items()}


def _store_baseline(path: Path, suite: str, settings: dict[str, Any],
                    records: list[dict[str, Any]], problems: Sequence[str], out: TextIO,
                    extra: dict[str, Any] | None = None) -> bool:
    """Write the baseline of ``records`` to ``path`` (``extra`` fields before the
    instances); with ``problems`` write nothing, list them on ``out`` and return False."""
    if problems:
        out.write("not writing a baseline: some placements are invalid or failed:\n")
        out.write("".join(f"  {p}\n" for p in problems))
        return False
    data = {"version": BASELINE_VERSION, "suite": suite, "written": time.strftime("%Y-%m-%d"),
            "settings": settings, **(extra or {}), "instances": records}
    write_baseline_file(path, data)
    return True


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
    problems: list[str] = []
    for record in records:
        runs = {e: by[(record["name"], e)] for e in ENGINES if (record["name"], e) in by}
        skipped = [r.get("note", "") for r in runs.values() if r.get("status") == "skipped"]
        if skipped or len(runs) != len(ENGINES):
            record["results"] = None
            record["skipped"] = skipped[0] if skipped else "not run"
            out.write(f"{record['name']}: skipped ({record['skipped']})\n")
        else:
            record["results"] = _stored_results(record["name"], runs, problems)
            g, c = runs["greedy"], runs["cpsat"]
            out.write(f"{record['name']}: greedy objective {g.get('objective')}, "
                      f"CP-SAT objective {c.get('objective')} ({c.get('status')})\n")
        record["scenario"] = record.pop("scenario")  # keep the scenario last in the file
    recorded = {"deterministic-limit": settings.deterministic_time or DETERMINISTIC_LIMIT,
                "time-limit": settings.time_limit, "workers": settings.workers,
                "seed": settings.seed}
    if not _store_baseline(path, suite, recorded, records, problems, out):
        return 1
    ran = sum(1 for r in records if r["results"] is not None)
    out.write(f"wrote baseline {path}: {len(records)} instances ({ran} with results)\n")
    return 0


#: The note of a bench row skipped because the run's time budget was used up.
_BUDGET_SKIP = "time budget"


def _bench_settings(bench_dir: Path, rows: Sequence[dict[str, str]]) -> dict[str, Any]:
    """The CP-SAT settings a bench run recorded: deterministic time, time limit, workers and
    seed, each the same on every CP-SAT row (``deterministic-time`` from the column, or,
    for a run made before the column existed, from ``report.md``'s settings line)."""
    csv_name = bench_dir / "results.csv"
    runs = [r for r in rows if r.get("engine") == "cpsat" and r.get("status") not in NO_RESULT]
    if not runs:
        raise InputError([f"{csv_name}: no CP-SAT run with a result"])

    def one(column: str) -> str | None:
        values = {r.get(column) or "" for r in runs}
        if len(values) > 1:
            raise InputError([f"{csv_name}: column '{column}' differs between CP-SAT runs "
                              f"({', '.join(sorted(values))}): not one bench run"])
        value = values.pop()
        return value or None

    report = bench_dir / "report.md"
    line = ""
    if report.is_file():
        line = next((x for x in read_text(report).splitlines()
                     if x.startswith("- settings:")), "")
    det = one("deterministic-time")
    if det is None:
        match = re.search(r"deterministic time ([0-9.eE+-]+)", line)
        det = match.group(1) if match else None
    if det is None:
        raise InputError([f"{bench_dir}: the run's deterministic time is not recorded (no "
                          f"'deterministic-time' column in results.csv and none in "
                          f"{report.name}'s settings line); a baseline needs a run made with "
                          "bench --deterministic-time D"])
    values: dict[str, Any] = {}
    for key, column, kind in (("time-limit", "time-limit", float), ("workers", "workers", int),
                              ("seed", "seed", int)):
        text = one(column)
        if text is None:
            raise InputError([f"{csv_name}: column '{column}' is empty: the run's {key} is "
                              "not recorded"])
        try:
            values[key] = kind(text)
        except ValueError:
            raise InputError([f"{csv_name}: column '{column}': not a number: {text!r}"]
                             ) from None
    try:
        limit = float(det)
    except ValueError:
        raise InputError([f"{bench_dir}: deterministic time {det!r} is not a number"]) from None
    return {"deterministic-limit": limit, **values}


def _bench_suite(bench_dir: Path) -> str | None:
    """The suite named in a bench run's ``report.md`` title (``None``: no report)."""
    report = bench_dir / "report.md"
    if not report.is_file():
        return None
    match = re.search(r"suite `([^`]+)`", read_text(report).split("\n", 1)[0])
    return match.group(1) if match else None


def baseline_from_bench(suite: str, bench_dir: Path, path: Path, out: TextIO,
                        instances: Sequence[Instance] | None = None) -> int:
    """Write baseline ``path`` of ``suite`` from an ``npu-place bench`` run, running nothing.

    Reads ``bench_dir/results.csv`` (the quality and status of every run) and the
    scenarios the run wrote (``bench_dir/scenarios/<instance>.json``, stored as they ran).
    The run's settings must be recorded (:func:`_bench_settings`) and every instance of
    the suite present with both engines and its scenario; a run with an invalid placement
    or a failed engine writes nothing (exit 1), as :func:`write_baseline`; ``instances``
    default to the suite's.  Rows without a
    ``solver-deterministic-seconds`` column (runs made before it existed) store the status
    only: :func:`compare_proofs` then checks that a proof is still made, not its cost.

    Raises
    ------
    InputError
        Naming the folder or file: no results, settings not recorded, another suite,
        instances missing or cut by the run's time budget, a scenario file unreadable.
    """
    csv_path = bench_dir / "results.csv"
    if not csv_path.is_file():
        raise InputError([f"{csv_path}: no such file (give the --out folder of an "
                          "npu-place bench run)"])
    try:
        rows = read_csv(csv_path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError([f"{csv_path}: cannot read: {exc}"]) from None
    if not rows or not {"instance", "engine", "status"} <= set(rows[0]):
        raise InputError([f"{csv_path}: not a bench results.csv (needs the columns instance, "
                          "engine and status, and rows)"])
    named = _bench_suite(bench_dir)
    if named is not None and named != suite:
        raise InputError([f"{bench_dir / 'report.md'}: a run of suite '{named}', not '{suite}'"])
    settings = _bench_settings(bench_dir, rows)
    by = {(r["instance"], r["engine"]): r for r in rows}
    if instances is None:
        instances = suite_instances(suite)
    names = {inst.name for inst in instances}
    foreign = sorted({r["instance"] for r in rows} - names)
    if foreign:
        raise InputError([f"{csv_path}: {len(foreign)} instance(s) not in suite '{suite}' "
                          f"(first: {foreign[0]}): a run of another suite?"])
    missing: list[str] = []
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    for inst in instances:
        runs = {e: by[(inst.name, e)] for e in ENGINES if (inst.name, e) in by}
        budget = [r for r in runs.values()
                  if r.get("status") == "skipped" and _BUDGET_SKIP in r.get("note", "")]
        if len(runs) != len(ENGINES) or budget:
            missing.append(inst.name + (" (skipped: the run's time budget was used up)"
                                        if budget else ""))
            continue
        file = bench_dir / "scenarios" / f"{inst.name}.json"
        if file.is_file():
            scenario = scenario_from_data(read_document(file), str(file))
        else:
            missing.append(f"{inst.name} (no scenarios/{inst.name}.json)")
            continue
        record: dict[str, Any] = {
            "name": inst.name, "params": inst.params.to_dict(),
            "history": runs["greedy"].get("history", ""),
            "scenario-sha256": scenario_digest(scenario),
        }
        record["results"] = _stored_results(inst.name, runs, problems)
        record["scenario"] = scenario.model_dump(by_alias=True, mode="json",
                                                 exclude_defaults=True)
        records.append(record)
    if missing:
        raise InputError([f"{bench_dir}: {len(missing)} instance(s) of suite '{suite}' are "
                          f"missing or incomplete: " + ", ".join(missing[:5])
                          + (" ..." if len(missing) > 5 else "")])
    timed = sum(1 for r in records for q in (r["results"] or {}).values() if DET_USED in q)
    if not _store_baseline(path, suite, settings, records, problems, out, {
            "from-bench": {"dir": str(bench_dir), "runs with deterministic time used": timed}}):
        return 1
    proved = sum(1 for r in records if (r["results"] or {}).get("cpsat", {}).get("status")
                 == "optimal")
    out.write(f"wrote baseline {path} from {bench_dir}: {len(records)} instances, "
              f"{proved} proved optimal, deterministic time used recorded for {timed} "
              f"CP-SAT run(s) (deterministic limit {settings['deterministic-limit']:g}, time "
              f"limit {settings['time-limit']:g} s, {settings['workers']} worker(s), seed "
              f"{settings['seed']})\n")
    return 0


def load_baseline(path: Path) -> dict[str, Any]:
    """Read and sanity-check a baseline file.

    Raises
    ------
    InputError
        When the file is missing or not a baseline.
    """
    # the bounded readers of scenario files: size (/dev/zero is refused one byte past the
    # limit), depth, values, integer range, duplicate keys; a baseline's own size limits
    text = read_baseline_file(path)
    try:
        data = load_json(text, max_values=BASELINE_MAX_VALUES)
    except DocumentError as exc:
        raise InputError([f"{path}: {exc}"]) from None
    except json.JSONDecodeError as exc:
        raise InputError([f"{path}: malformed JSON at line {exc.lineno}, column {exc.colno}: "
                          f"{exc.msg}"]) from None
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


def compare_proofs(old_rows: Sequence[dict[str, str]], new_rows: Sequence[dict[str, str]],
                   limit: float) -> list[Finding]:
    """Proofs the baseline made that this run lost or made slower (cells matched by name).

    Both fail the comparison; only deterministic time is measured, never the clock:

    * a run the baseline proved optimal that is not proved now, at the same deterministic
      budget ``limit``;
    * a proof that needs more than :data:`SLOWER_PROOF_FACTOR` × the baseline's
      deterministic time + :data:`SLOWER_PROOF_SLACK`, when both rows recorded it (a
      baseline made from a bench run without the column holds the status only).

    Failed, skipped and invalid runs are left to :func:`benchmarks.sweep.compare_rows`.
    """
    old = {r["cell"]: r for r in old_rows if r.get("cell")}
    found: list[Finding] = []
    for row in new_rows:
        cell, engine = row.get("cell", ""), row.get("engine", "")
        base = old.get(cell)
        if (base is None or base.get("status") != "optimal" or row.get("status") in NO_RESULT
                or row.get("valid") == "no"):
            continue
        if row.get("status") != "optimal":
            found.append(Finding(cell, engine, f"the baseline proved it optimal at "
                                 f"deterministic time {limit:g}; not proved now (status "
                                 f"{row.get('status')})", True))
            continue
        then, now = _seconds(base.get(DET_USED)), _seconds(row.get(DET_USED))
        if then is None or now is None:
            continue
        allowed = SLOWER_PROOF_FACTOR * then + SLOWER_PROOF_SLACK
        if now > allowed:
            found.append(Finding(cell, engine, f"slower proof: {now:.3f} deterministic s, "
                                 f"baseline {then:.3f} (allowed {SLOWER_PROOF_FACTOR:g} x "
                                 f"{then:.3f} + {SLOWER_PROOF_SLACK:g} = {allowed:.3f})",
                                 True))
    return found


def _seconds(value: str | None) -> float | None:
    try:
        seconds = float(value) if value not in (None, "") else None
    except ValueError:
        return None
    return seconds if seconds is not None and math.isfinite(seconds) else None


def _suite_columns(record: dict[str, Any]) -> dict[str, str]:
    """The bench columns of a stored instance (family, scale, mix, seed, depth, history)."""
    params = record.get("params")
    if not isinstance(params, dict):
        return {}
    jobs = params.get("jobs", 1)
    return {"family": str(params.get("family", "")), "scale": str(params.get("nodes", "")),
            "mix": "single" if jobs == 1 else "batch", "gen-seed": str(params.get("seed", "")),
            "depth": str(params.get("depth") or ""), "history": str(record.get("history", ""))}


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
    check_baseline(path, data)  # settings, generator sizes, figures: before any work
    settings = _settings(data.get("settings"))
    findings: list[Finding] = []
    stored = []
    impossible: list[str] = []
    for i, record in enumerate(data["instances"]):
        name = str(record["name"])
        try:
            scenario = scenario_from_data(record["scenario"], f"{path}: instances[{i}] ({name})")
        except InputError as exc:
            findings.append(Finding(name, "-", "stored scenario is invalid: "
                                    + "; ".join(exc.messages[:3]), True))
            impossible += impossible_figures(path, i, record, None)
            continue
        impossible += impossible_figures(path, i, record, job_count(scenario))
        stored.append((name, scenario, record))
    if impossible:
        raise InputError(impossible)
    for name, scenario, record in stored:
        _generator_note(record, scenario, name, findings)
    started = time.perf_counter()
    cells, rows, where = _run_grid(stored_grid([(n, s, r["scenario"]) for n, s, r in stored],
                                               settings), scheduler, workers)
    impossible = impossible_after_run(path, data, rows)
    if impossible:
        raise InputError(impossible)
    old = baseline_rows(data, cells)
    findings += compare_rows(old, rows)
    findings += compare_proofs(old, rows, settings.deterministic_time
                               or DETERMINISTIC_LIMIT)
    names = {r["cell"]: r.get("scenario", "") for r in rows if r.get("cell")}
    for finding in findings:  # the instance's name: the settings are in the title
        finding.cell = names.get(finding.cell, finding.cell)
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
        # the bench's results.csv, report.md and plots from the same rows, so that the gap
        # table and the figures come from the run that was compared
        columns = {str(r["name"]): _suite_columns(r) for r in data["instances"]}
        bench = [{**bench_row(r), **columns.get(r.get("scenario", ""), {})} for r in rows]
        meta = {
            "suite": str(data.get("suite")),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "machine": machine_description(),
            "settings": (f"time limit {settings.time_limit:g} s per CP-SAT run, "
                         f"{settings.workers} worker(s), CP-SAT seed {settings.seed}, "
                         f"deterministic time {settings.deterministic_time:g}"),
            "runner": where,
            "scenarios": f"stored in the baseline {path}",
            "suite wall time": f"{elapsed:.0f} s",
        }
        write_outputs(bench, out_dir, meta)
        write_output(out_dir / "regression.md", report)
    return 1 if any(f.failure for f in findings) else 0


def _generator_note(record: dict[str, Any], scenario: Scenario, name: str,
                    findings: list[Finding]) -> None:
    """Note when the generator would now produce a different scenario for the params."""
    params = record.get("params")
    if not isinstance(params, dict):
        return
    try:
        fresh = generate_case(GenParams(**params)).scenario
    except (TypeError, ValueError) as exc:
        findings.append(Finding(name, "-", f"cannot regenerate from the stored params: {exc}",
                                False))
        return
    if scenario_digest(fresh) != scenario_digest(scenario):
        findings.append(Finding(name, "-", "the generator now produces a different scenario "
                                "for these parameters; the stored one was used", False))


def run_regression(args: argparse.Namespace, out: TextIO) -> int:
    """``npu-place compare --suite S --baseline FILE [--write-baseline [--from-bench DIR]]
    [--out DIR] [--scheduler ADDRESS]``."""
    suite = str(args.suite)
    baseline = getattr(args, "baseline", None)
    scheduler = getattr(args, "scheduler", None)
    from_bench = getattr(args, "from_bench", None)
    if from_bench and not getattr(args, "write_baseline", False):
        raise InputError(["--from-bench DIR needs --write-baseline (it writes a baseline)"])
    if getattr(args, "write_baseline", False):
        if not baseline:
            raise InputError(["--write-baseline needs --baseline FILE (where to write it)"])
        if from_bench:
            return baseline_from_bench(suite, Path(from_bench), Path(baseline), out)
        return write_baseline(suite, Path(baseline), out, scheduler=scheduler)
    if baseline:
        path = Path(baseline)
    elif suite == "quick":
        path = DEFAULT_BASELINE
    elif suite == "full" and FULL_BASELINE.is_file():
        path = FULL_BASELINE
    else:
        raise InputError([f"no committed baseline for suite '{suite}' ({FULL_BASELINE} "
                          "does not exist): give --baseline FILE (write one from a bench run "
                          "with --write-baseline --from-bench DIR)"])
    out_dir = Path(args.out) if getattr(args, "out", None) else None
    if out_dir is not None:  # before the suite runs: a file, or a folder in use, fails now
        check_out_dir(out_dir, force=bool(getattr(args, "force", False)),
                      files=REGRESSION_FILES)
    return compare_baseline(path, out, out_dir, suite, scheduler)
