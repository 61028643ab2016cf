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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from benchmarks.generators import GenParams, generate_case
from benchmarks.suite import (
    ENGINES,
    Instance,
    MemoryProbe,
    Settings,
    markdown_table,
    run_engine,
    suite_instances,
    write_csv,
)
from heuristics.greedy import EngineNotAvailable
from models.compiled import compile_scenario
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


@dataclass
class Finding:
    """One line of the comparison: a failure or an informational note."""

    instance: str
    engine: str
    text: str
    failure: bool


def _settings(data: dict[str, Any] | None = None) -> Settings:
    data = data or {}
    return Settings(
        time_limit=float(data.get("time-limit", WALL_GUARD)),
        workers=int(data.get("workers", 1)),
        seed=int(data.get("seed", 0)),
        deterministic_time=float(data.get("deterministic-limit", DETERMINISTIC_LIMIT)),
        write_scenarios=False,
    )


def _run(scenario: Scenario, name: str, settings: Settings, probe: MemoryProbe
         ) -> dict[str, dict[str, str]] | str:
    """Both engines on one scenario: engine → row columns, or the unavailability reason."""
    problem = compile_scenario(scenario, name)
    rows: dict[str, dict[str, str]] = {}
    for engine in ENGINES:
        try:
            _, cols = run_engine(problem, engine, settings, probe)
        except EngineNotAvailable as exc:
            return str(exc)
        rows[engine] = cols
    return rows


def _quality(cols: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"status": cols.get("status", "")}
    for key in _INTS:
        out[key] = int(cols[key]) if cols.get(key, "") != "" else None
    return out


def write_baseline(suite: str, path: Path, out: TextIO, settings: Settings | None = None,
                   instances: Sequence[Instance] | None = None) -> int:
    """Run ``suite`` and store its scenarios and results in ``path``.

    ``settings`` default to one worker, seed 0 and a deterministic limit of
    :data:`DETERMINISTIC_LIMIT`; ``instances`` default to the suite's.  Nothing is written
    (exit 1) when a placement is invalid or an engine fails.
    """
    settings = settings or _settings()
    probe = MemoryProbe()
    records = []
    problems = []
    for inst in instances if instances is not None else suite_instances(suite):
        case = generate_case(inst.params)
        runs = _run(case.scenario, inst.name, settings, probe)
        record: dict[str, Any] = {
            "name": inst.name,
            "params": inst.params.to_dict(),
            "history": case.history_engine,
            "scenario-sha256": scenario_digest(case.scenario),
        }
        if isinstance(runs, str):
            record["results"] = None
            record["skipped"] = runs
            out.write(f"{inst.name}: skipped ({runs})\n")
        else:
            for engine, cols in runs.items():
                if cols.get("valid") != "yes":
                    problems.append(f"{inst.name} [{engine}]: {cols.get('status')} "
                                    f"{cols.get('note', '')}")
            record["results"] = {engine: _quality(cols) for engine, cols in runs.items()}
            g, c = runs["greedy"], runs["cpsat"]
            out.write(f"{inst.name}: greedy objective {g.get('objective')}, "
                      f"CP-SAT objective {c.get('objective')} ({c.get('status')})\n")
        # defaults left out: the file stays small and reloads to the same scenario
        record["scenario"] = case.scenario.model_dump(by_alias=True, mode="json",
                                                      exclude_defaults=True)
        records.append(record)
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
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError([f"{path}: cannot read the baseline: {exc.strerror}"]) from None
    except json.JSONDecodeError as exc:
        raise InputError([f"{path}: malformed JSON at line {exc.lineno}: {exc.msg}"]) from None
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
    """Every finding for one instance's fresh runs against its baseline results."""
    found: list[Finding] = []
    for engine, cols in runs.items():
        if cols.get("valid") != "yes":
            found.append(Finding(name, engine, f"invalid or failed run: status "
                                 f"{cols.get('status')}; {cols.get('note', '')}", True))
    if any(f.failure for f in found):
        return found
    g, c = runs["greedy"], runs["cpsat"]
    if int(c["objective"]) < int(g["objective"]):
        found.append(Finding(name, "cpsat", f"CP-SAT loses to greedy: objective "
                             f"{c['objective']} < {g['objective']}", True))
    if base is None:
        found.append(Finding(name, "-", "not in the baseline yet (it was skipped when the "
                             "baseline was written); regenerate it with --write-baseline",
                             False))
        return found
    for engine, cols in runs.items():
        old = base.get(engine)
        if not old:
            continue
        now = _quality(cols)
        worse = []
        if now["placed-jobs"] < old["placed-jobs"]:
            worse.append(f"placed jobs {now['placed-jobs']} < {old['placed-jobs']}")
        if (now["origin-hits"] < old["origin-hits"]
                and now["placed-jobs"] <= old["placed-jobs"]):
            worse.append(f"origin hits {now['origin-hits']} < {old['origin-hits']}")
        if now["objective"] < old["objective"]:
            worse.append(f"objective {now['objective']} < {old['objective']}")
        if worse:
            found.append(Finding(name, engine, "quality below the baseline: " + ", ".join(worse),
                                 True))
        elif now["objective"] > old["objective"]:
            found.append(Finding(name, engine, f"better than the baseline (objective "
                                 f"{now['objective']} > {old['objective']}); consider "
                                 "--write-baseline", False))
    return found


def compare_baseline(path: Path, out: TextIO, out_dir: Path | None = None,
                     suite: str | None = None) -> int:
    """Re-run the scenarios stored in baseline ``path``; return 0 (no regression) or 1."""
    data = load_baseline(path)
    if suite is not None and data.get("suite") not in (None, suite):
        raise InputError([f"{path}: the baseline is for suite '{data.get('suite')}', "
                          f"not '{suite}'"])
    settings = _settings(data.get("settings"))
    probe = MemoryProbe()
    findings: list[Finding] = []
    table = []
    csv_rows = []
    started = time.perf_counter()
    for i, record in enumerate(data["instances"]):
        name = str(record["name"])
        try:
            scenario = scenario_from_data(record["scenario"], f"{path}: instances[{i}] ({name})")
        except InputError as exc:
            findings.append(Finding(name, "-", "stored scenario is invalid: "
                                    + "; ".join(exc.messages[:3]), True))
            continue
        _generator_note(record, scenario, name, findings)
        runs = _run(scenario, name, settings, probe)
        base = record.get("results")
        if isinstance(runs, str):
            findings.append(Finding(name, "-", f"cannot run: {runs}", base is not None))
            continue
        findings += compare_runs(name, runs, base)
        for engine, cols in runs.items():
            old = (base or {}).get(engine) or {}
            if (engine == "cpsat" and cols.get("solver-wall-seconds")
                    and float(cols["solver-wall-seconds"]) >= 0.95 * settings.time_limit):
                findings.append(Finding(name, engine, "CP-SAT reached the wall-clock guard: "
                                        "its answer may depend on machine load", False))
            table.append([name, engine, cols.get("status", ""), cols.get("placed-jobs", ""),
                          cols.get("origin-hits", ""), cols.get("objective", ""),
                          str(old.get("objective", "-")), cols.get("wall-seconds", "")])
            csv_rows.append({"instance": name, "engine": engine, **cols})
    failures = [f for f in findings if f.failure]
    elapsed = time.perf_counter() - started
    header = ("instance", "engine", "status", "placed", "hits", "objective",
              "baseline objective", "wall s")
    text = [f"regression suite '{data.get('suite')}' against {path} "
            f"(CP-SAT: deterministic limit {settings.deterministic_time:g}, "
            f"{settings.workers} worker(s), seed {settings.seed}); {elapsed:.1f} s", ""]
    text.append(markdown_table(header, table))
    text.append("")
    for f in findings:
        text.append(f"{'REGRESSION' if f.failure else 'note'}: {f.instance} [{f.engine}]: "
                    f"{f.text}")
    text.append(f"FAILED: {len(failures)} regression(s)" if failures else "OK: no regression")
    report = "\n".join(text) + "\n"
    out.write(report)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "regression.md").write_text(report, encoding="utf-8")
        write_csv(csv_rows, out_dir / "results.csv")
    return 1 if failures else 0


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
    """``npu-place compare --suite S --baseline FILE [--write-baseline] [--out DIR]``."""
    suite = str(args.suite)
    baseline = getattr(args, "baseline", None)
    if getattr(args, "write_baseline", False):
        if not baseline:
            raise InputError(["--write-baseline needs --baseline FILE (where to write it)"])
        return write_baseline(suite, Path(baseline), out)
    if baseline:
        path = Path(baseline)
    elif suite == "quick":
        path = DEFAULT_BASELINE
    else:
        raise InputError([f"no committed baseline for suite '{suite}': give --baseline FILE "
                          "(write one with --write-baseline)"])
    out_dir = Path(args.out) if getattr(args, "out", None) else None
    return compare_baseline(path, out, out_dir, suite)
