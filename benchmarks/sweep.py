"""What-if sweeps on Dask: ``npu-place sweep GRID [--scheduler ADDRESS] [--out DIR] [--resume]``.

A *grid* names scenarios (files, globs, or benchmark generator cases) and lists of
configuration overrides, engines, time limits, seeds and CP-SAT deterministic times; a
*cell* is one element of their product and one Dask task.  The same runner serves
``npu-place bench`` (the built-in suites are grids of generator cases) and the regression
mode (``compare --suite``; ``sweep --baseline``): one machinery, one comparison.

Grid format (YAML or JSON; paths relative to the grid file)::

    scenarios: [snapshots/a.yaml, "snapshots/day-*.json"]   # globs allowed
    generate:                                              # optional generator cases
      - {family: 950, nodes: 4096, jobs: 8, seeds: [0, 1, 2]}
    overrides:                                             # contract path -> values
      config.reserve-nodes: [0, 2]
      config.prefer-previous-node: [true, false]
      jobs.*.priority: [0, 10]                             # '*' = every list element
    engines: [greedy, cpsat]                               # default [greedy, cpsat]
    time-limits: [1]                                       # seconds; default [10]
    seeds: [0]                                             # CP-SAT seeds; default [0]
    deterministic-time: 5                                  # optional: a number or a list
    cpsat-workers: 1                                       # CP-SAT workers per cell
    events: events.yaml                                    # optional: run simulate

Runner
------
Without a scheduler address a :class:`distributed.LocalCluster` is started on loopback
(one worker process per core, one thread each: a cell's CP-SAT uses one search worker);
with one, the cells run on that cluster.  Scenario files are read once by the driver and
travel with their cells, so remote workers need no shared file system.  Each finished
cell is appended to ``DIR/results.csv`` at once; a cell that raises, or whose worker dies
(``KilledWorker``), is recorded in its row (``status`` ``error``) and the sweep goes on.

Resume
------
Every row carries ``key``, the SHA-256 of (scenario content, overrides, engine, time limit,
deterministic time, seed, CP-SAT workers, events content, project version).  ``--resume``
keeps the rows of ``results.csv`` whose key is still in the grid and reruns only the rest
(and cells whose worker was lost).
"""

from __future__ import annotations

import contextlib
import copy
import csv
import glob
import hashlib
import io
import json
import logging
import math
import os
import re
import statistics
import time
import traceback
import types
import typing
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import IO, Any, TextIO, Union

from pydantic import BaseModel

from benchmarks.common import MemoryProbe, Progress, markdown_table
from benchmarks.generators import FAMILIES, GenParams, case_name, generate_case
from benchmarks.outputs import check_out_dir, open_output, save_figure, write_output
from heuristics.greedy import EngineNotAvailable
from models.check import check
from models.compiled import compile_scenario
from models.documents import read_text
from models.errors import closest_name
from models.io import read_document, scenario_from_data
from models.joblist import job_count
from models.numbers import is_ascii_digits, parse_int
from models.scenario import Scenario
from models.validation import InputError
from solver.doors import extra_hint, require_extra
from solver.facade import ENGINES, InvalidAnswer, Result, solve

#: Keys a grid may have.
GRID_KEYS = ("scenarios", "generate", "overrides", "engines", "time-limits", "seeds",
             "deterministic-time", "cpsat-workers", "events")
#: Top-level keys of the scenario contract (the first part of an override path).
SCENARIO_KEYS = ("now", "config", "nodes", "affinity-cache", "jobs", "running")
#: Keys of a ``generate`` entry besides ``seeds`` (GenParams fields, kebab-case).
GENERATE_KEYS = tuple(f.name.replace("_", "-") for f in fields(GenParams) if f.name != "seed")
_PARAM_TYPES = {f.name: str(f.type) for f in fields(GenParams)}
#: Upper limits of generator sizes in a grid (a typo must not take a worker down).
_PARAM_LIMITS = {"nodes": 65536, "jobs": 1024}

#: Columns of a sweep's ``results.csv`` before the override columns.
HEAD_FIELDS: tuple[str, ...] = ("key", "cell", "scenario", "scenario-sha256")
#: Columns of a sweep's ``results.csv`` after the override columns.
TAIL_FIELDS: tuple[str, ...] = (
    "engine", "time-limit", "deterministic-time", "seed", "cpsat-workers", "status",
    "answer-engine", "valid", "jobs", "placed-jobs", "origin-hits", "origin-candidates",
    "achievable-origin-hits", "hit-rate", "fault-returns", "subhealthy-nodes", "reserve-used",
    "fragment-score", "affinity-spill", "objective", "bound", "gap", "wall-seconds",
    "solver-wall-seconds", "solver-deterministic-seconds", "peak-rss-mb", "peak-delta-mb",
    "nodes", "family", "scale", "mix", "gen-seed", "depth", "history", "sessions", "worker",
    "error", "note",
)
#: Statuses of rows that carry no placement.
NO_RESULT = ("skipped", "error", "invalid")
#: Error text prefix of a cell whose worker was lost (such cells rerun on ``--resume``).
WORKER_LOST = "worker lost"
#: ``--scheduler`` value that runs the cells in this process (one at a time, threads).
INPROCESS = "inprocess"

log = logging.getLogger("npu_place.sweep")


def project_version() -> str:
    """The installed npu-place version (part of every cell's key)."""
    try:
        return metadata.version("npu-place")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


def data_digest(data: Any) -> str:
    """SHA-256 of plain data as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def format_value(value: Any) -> str:
    """An override value as it appears in ``results.csv`` (JSON text, strings bare)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _fmt(value: float | None, digits: int = 6) -> str:
    if value is None:
        return ""
    return f"{value:.{digits}f}".rstrip("0").rstrip(".") if value != 0 else "0"


# --------------------------------------------------------------------------- grid


@dataclass(frozen=True)
class Source:
    """One scenario of a grid.

    Attributes
    ----------
    label
        The ``scenario`` column: the path as written (globs expanded), a generator case
        name, or a stored instance's name.
    kind
        ``file`` or ``inline`` (plain data shipped to the workers) or ``generate``.
    digest
        Content hash (the data's canonical JSON; for ``generate`` the parameters).
    params
        Generator parameters (``generate`` only).
    """

    label: str
    kind: str
    digest: str
    params: dict[str, Any] | None = None


@dataclass
class Grid:
    """A validated grid: scenarios × overrides × engines × limits × seeds."""

    source: str
    sources: list[Source]
    data: dict[str, Any] = field(default_factory=dict)  # label -> scenario data (file/inline)
    overrides: dict[str, list[Any]] = field(default_factory=dict)
    engines: list[str] = field(default_factory=lambda: ["greedy", "cpsat"])
    time_limits: list[float] = field(default_factory=lambda: [10.0])
    seeds: list[int] = field(default_factory=lambda: [0])
    deterministic_times: list[float | None] = field(default_factory=lambda: [None])
    cpsat_workers: int = 1
    events: Any = None
    events_label: str | None = None

    @property
    def override_keys(self) -> list[str]:
        """Override paths in grid order (one ``results.csv`` column each)."""
        return list(self.overrides)

    def fieldnames(self) -> list[str]:
        """The columns of this grid's ``results.csv``."""
        return [*HEAD_FIELDS, *self.override_keys, *TAIL_FIELDS]


def _number(value: Any, where: str, *, integer: bool = False, positive: bool = True
            ) -> float | int:
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok or (isinstance(value, float) and not math.isfinite(value)):
        kind = "an integer" if integer else "a finite number"
        raise InputError([f"{where}: expected {kind}, got {value!r}"])
    if positive and value <= 0:
        raise InputError([f"{where}: must be > 0, got {value!r}"])
    if integer and not 0 <= int(value) < 2**31:
        raise InputError([f"{where}: must be in [0, 2^31), got {value!r}"])
    return value


def _list(data: dict[str, Any], key: str, where: str, default: list[Any]) -> list[Any]:
    value = data.get(key, default)
    if not isinstance(value, list) or not value:
        raise InputError([f"{where}: key '{key}': expected a non-empty list, got {value!r}"])
    return value


def _unwrap(annotation: Any) -> Any:
    """``X`` of ``X | None`` and of ``Annotated[X, ...]``."""
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
            continue
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is Union:
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) == 1:
                annotation = args[0]
                continue
        return annotation


def override_path_error(path: str, model: type[BaseModel] = Scenario) -> str | None:
    """Why ``path`` is not a field of the scenario contract (``None`` when it is).

    The parts are matched against the pydantic models' keys (their aliases); a list is
    entered with an index or ``*``; inside a free mapping (``labels``, ``ranks``,
    ``resource-level-config``) every key is allowed.  The reason names the closest key.
    """
    target: Any = model
    where = "the scenario"
    parts = path.split(".")
    for i, part in enumerate(parts):
        target = _unwrap(target)
        origin = typing.get_origin(target)
        if origin is list:
            if part != "*" and parse_int(part) is None:
                return (f"'{part}' is not an index of the list {where} (a number or '*': "
                        f"did you mean '{'.'.join([*parts[:i], '*', *parts[i:]])}'?)")
            target = typing.get_args(target)[0]
            where = f"an element of {'.'.join(parts[:i])}"
            continue
        if origin is dict:
            return None  # a free mapping: any key (and anything inside it)
        if isinstance(target, type) and issubclass(target, BaseModel):
            keys = {(f.alias or name): f.annotation for name, f in target.model_fields.items()}
            names = {name: f.annotation for name, f in target.model_fields.items()}
            if part not in keys and part not in names:  # populate_by_name: names too
                close = closest_name(part, keys)
                hint = (f"did you mean '{'.'.join([*parts[:i], close])}'?" if close
                        else f"the keys of {where} are {', '.join(keys)}")
                return f"'{part}' is not a key of {where} ({hint})"
            target = keys.get(part, names.get(part))
            where = f"'{'.'.join(parts[:i + 1])}'"
            continue
        return f"{where} is a single value: it has no '{part}' inside"
    return None


def _check_path(path: str, where: str) -> None:
    parts = path.split(".")
    if not path or any(not p for p in parts):
        raise InputError([f"{where}: key 'overrides.{path}': an override key is a dotted "
                          "contract path such as config.reserve-nodes"])
    if parts[0] not in SCENARIO_KEYS:
        close = closest_name(parts[0], SCENARIO_KEYS)
        hint = f"did you mean '{close}'? " if close else ""
        raise InputError([f"{where}: key 'overrides.{path}': '{parts[0]}' is not a scenario "
                          f"key ({hint}one of {', '.join(SCENARIO_KEYS)})"])
    reason = override_path_error(path)
    if reason is not None:
        raise InputError([f"{where}: key 'overrides.{path}': {reason}; every cell would fail"])
    if path in HEAD_FIELDS or path in TAIL_FIELDS:
        raise InputError([f"{where}: key 'overrides.{path}': the name clashes with a "
                          "results.csv column"])


def _generate_entries(value: Any, where: str) -> list[Source]:
    if not isinstance(value, list):
        raise InputError([f"{where}: key 'generate': expected a list of cases, got {value!r}"])
    out: list[Source] = []
    for i, entry in enumerate(value):
        at = f"{where}: key 'generate[{i}]'"
        if not isinstance(entry, dict):
            raise InputError([f"{at}: expected a mapping such as "
                              "{family: 950, nodes: 4096, jobs: 8, seeds: [0, 1]}"])
        unknown = sorted(set(entry) - {*GENERATE_KEYS, "seeds"})
        if unknown:
            raise InputError([f"{at}: unknown key(s) {', '.join(map(str, unknown))} "
                              f"(allowed: {', '.join(GENERATE_KEYS)}, seeds)"])
        if "family" not in entry:
            raise InputError([f"{at}: needs 'family' (one of {', '.join(FAMILIES)})"])
        seeds = _list(entry, "seeds", at, [0])
        kwargs = {k.replace("-", "_"): v for k, v in entry.items() if k != "seeds"}
        kwargs["family"] = str(kwargs["family"])
        for name, value in kwargs.items():
            kind = _PARAM_TYPES[name]
            if value is None and "None" in kind:
                continue
            if kind.startswith("int"):
                _number(value, f"{at}: key '{name.replace('_', '-')}'", integer=True)
            elif kind.startswith("float"):
                _number(value, f"{at}: key '{name.replace('_', '-')}'", positive=False)
            if name in _PARAM_LIMITS and value > _PARAM_LIMITS[name]:
                raise InputError([f"{at}: key '{name}': at most {_PARAM_LIMITS[name]}, got "
                                  f"{value}"])
        for seed in seeds:
            _number(seed, f"{at}: seeds", integer=True, positive=False)
            try:
                params = GenParams(seed=int(seed), **kwargs)
            except (TypeError, ValueError) as exc:
                raise InputError([f"{at}: {exc}"]) from None
            out.append(Source(case_name(params), "generate",
                              data_digest({"generate": params.to_dict()}), params.to_dict()))
    return out


def grid_from_data(data: Any, source: str, base: Path | None = None) -> Grid:
    """Validate plain grid data into a :class:`Grid`.

    Parameters
    ----------
    data
        The parsed grid document.
    source
        The grid's file name (named in every message).
    base
        Directory that relative scenario and events paths start from.

    Raises
    ------
    InputError
        On the first problem, naming the grid file and the key.
    """
    base = base or Path(".")
    if not isinstance(data, dict):
        raise InputError([f"{source}: expected a mapping at the top level"])
    unknown = sorted(set(map(str, data)) - set(GRID_KEYS))
    if unknown:
        raise InputError([f"{source}: unknown key(s) {', '.join(unknown)} "
                          f"(allowed: {', '.join(GRID_KEYS)})"])
    grid = Grid(source=source, sources=[])
    patterns = data.get("scenarios", [])
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise InputError([f"{source}: key 'scenarios': expected a list of paths or globs"])
    for pattern in patterns:
        full = pattern if os.path.isabs(pattern) else str(base / pattern)
        matches = sorted(glob.glob(full)) if glob.has_magic(pattern) else [full]
        if not matches:
            raise InputError([f"{source}: key 'scenarios': '{pattern}' matches no file"])
        for match in matches:
            label = match if os.path.isabs(pattern) else os.path.relpath(match, base)
            if label in grid.data:
                continue
            if not Path(match).is_file():
                raise InputError([f"{source}: key 'scenarios': no such file '{pattern}'"
                                  + (f" ({match})" if match != pattern else "")])
            doc = read_document(match)  # InputError names the scenario file
            if not isinstance(doc, dict):
                raise InputError([f"{match}: expected a scenario mapping at the top level "
                                  f"(listed in {source}, key 'scenarios')"])
            grid.data[label] = doc
            grid.sources.append(Source(label, "file", data_digest(doc)))
    grid.sources += _generate_entries(data.get("generate", []), source)
    if not grid.sources:
        raise InputError([f"{source}: no scenarios: give 'scenarios' (files) and/or "
                          "'generate' (generator cases)"])
    overrides = data.get("overrides", {}) or {}
    if not isinstance(overrides, dict):
        raise InputError([f"{source}: key 'overrides': expected a mapping of contract paths "
                          "to lists of values"])
    for path, values in overrides.items():
        _check_path(str(path), source)
        if not isinstance(values, list) or not values:
            raise InputError([f"{source}: key 'overrides.{path}': expected a non-empty list "
                              f"of values, got {values!r}"])
        grid.overrides[str(path)] = values
    engines = _list(data, "engines", source, ["greedy", "cpsat"])
    for e in engines:
        if e not in ENGINES:
            raise InputError([f"{source}: key 'engines': unknown engine {e!r} "
                              f"(choose from {', '.join(ENGINES)})"])
    grid.engines = [str(e) for e in engines]
    grid.time_limits = [float(_number(v, f"{source}: key 'time-limits'"))
                        for v in _list(data, "time-limits", source, [10.0])]
    grid.seeds = [int(_number(v, f"{source}: key 'seeds'", integer=True, positive=False))
                  for v in _list(data, "seeds", source, [0])]
    det = data.get("deterministic-time")
    if det is not None:
        det_values = det if isinstance(det, list) else [det]
        if not det_values:
            raise InputError([f"{source}: key 'deterministic-time': expected a number or a "
                              "non-empty list"])
        grid.deterministic_times = [float(_number(v, f"{source}: key 'deterministic-time'"))
                                    for v in det_values]
    grid.cpsat_workers = int(_number(data.get("cpsat-workers", 1),
                                     f"{source}: key 'cpsat-workers'", integer=True))
    if grid.cpsat_workers > 64:
        raise InputError([f"{source}: key 'cpsat-workers': at most 64, got "
                          f"{grid.cpsat_workers}"])
    events = data.get("events")
    if events is not None:
        if not isinstance(events, str):
            raise InputError([f"{source}: key 'events': expected a path"])
        path = events if os.path.isabs(events) else str(base / events)
        if not Path(path).is_file():
            raise InputError([f"{source}: key 'events': no such file '{events}'"])
        grid.events = read_document(path)
        grid.events_label = events
    return grid


def load_grid(path: str | os.PathLike[str]) -> Grid:
    """Read and validate a grid file (see the module docstring for the format).

    Raises
    ------
    InputError
        When the file or a key of it is invalid (the message names both).
    """
    return grid_from_data(read_document(path), str(path), Path(path).resolve().parent)


# --------------------------------------------------------------------------- cells


@dataclass(frozen=True)
class Cell:
    """One run: a scenario with overrides, an engine, a limit and a seed."""

    source: Source
    overrides: tuple[tuple[str, Any], ...]
    engine: str
    time_limit: float
    seed: int
    deterministic_time: float | None = None
    cpsat_workers: int = 1
    events_digest: str | None = None
    version: str = ""
    want_scenario: bool = False  # return the generated scenario's data (bench writes it)
    not_after: float | None = None  # epoch seconds: skip the cell if it starts too late

    @property
    def key(self) -> str:
        """Content hash of what determines the cell's result (see the module docstring)."""
        return data_digest({
            "scenario": self.source.digest,
            "overrides": [[k, v] for k, v in self.overrides],
            "engine": self.engine, "time-limit": self.time_limit, "seed": self.seed,
            "deterministic-time": self.deterministic_time, "cpsat-workers": self.cpsat_workers,
            "events": self.events_digest, "version": self.version,
        })

    @property
    def cell_id(self) -> str:
        """A readable, version-independent name (cells of two runs are matched by it)."""
        parts = [self.source.label, *(f"{k}={format_value(v)}" for k, v in self.overrides),
                 self.engine, f"t={_fmt(self.time_limit)}", f"s={self.seed}"]
        if self.deterministic_time is not None:
            parts.append(f"d={_fmt(self.deterministic_time)}")
        return " | ".join(parts)

    @property
    def group_id(self) -> str:
        """The cell's name without the engine (cells differing only in engine share it)."""
        return self.cell_id.replace(f" | {self.engine} | ", " | * | ", 1)


def expand(grid: Grid, version: str | None = None) -> list[Cell]:
    """Every cell of ``grid``: scenarios × override values × limits × seeds × engines."""
    version = project_version() if version is None else version
    combos: list[tuple[tuple[str, Any], ...]] = [()]
    for path, values in grid.overrides.items():
        combos = [(*c, (path, v)) for c in combos for v in values]
    events_digest = data_digest(grid.events) if grid.events is not None else None
    cells = []
    for src in grid.sources:
        for combo in combos:
            for limit in grid.time_limits:
                for det in grid.deterministic_times:
                    for seed in grid.seeds:
                        for engine in grid.engines:
                            cells.append(Cell(src, combo, engine, limit, seed, det,
                                              grid.cpsat_workers, events_digest, version))
    return cells


def apply_overrides(data: dict[str, Any], overrides: Sequence[tuple[str, Any]]
                    ) -> dict[str, Any]:
    """A copy of scenario ``data`` with each ``path = value`` set.

    Intermediate mappings are created when missing; a numeric part indexes a list and
    ``*`` stands for every element of a list.

    Raises
    ------
    InputError
        When a path does not fit the scenario (a list index out of range, a part that
        is not a mapping or a list).
    """
    out = copy.deepcopy(data)

    def put(target: Any, parts: list[str], value: Any, path: str) -> None:
        head, rest = parts[0], parts[1:]
        if isinstance(target, list):
            if head == "*":
                indexes = range(len(target))
            elif (index := parse_int(head)) is not None and index < len(target):
                indexes = range(index, index + 1)
            else:
                raise InputError([f"override '{path}': '{head}' is not an index of a list "
                                  f"of {len(target)} element(s)"])
            for i in indexes:
                if rest:
                    put(target[i], rest, value, path)
                else:
                    target[i] = copy.deepcopy(value)
            return
        if not isinstance(target, dict):
            raise InputError([f"override '{path}': cannot set '{head}' inside a "
                              f"{type(target).__name__}"])
        if not rest:
            target[head] = copy.deepcopy(value)
            return
        if head not in target or target[head] is None:
            target[head] = [] if rest[0] == "*" or is_ascii_digits(rest[0]) else {}
        put(target[head], rest, value, path)

    for path, value in overrides:
        put(out, path.split("."), value, path)
    return out


# --------------------------------------------------------------------------- one cell


def _base_row(cell: Cell) -> dict[str, str]:
    row = {
        "key": cell.key, "cell": cell.cell_id, "scenario": cell.source.label,
        "scenario-sha256": cell.source.digest, "engine": cell.engine,
        "time-limit": _fmt(cell.time_limit), "seed": str(cell.seed),
        "deterministic-time": _fmt(cell.deterministic_time),
        "cpsat-workers": str(cell.cpsat_workers),
    }
    for path, value in cell.overrides:
        row[path] = format_value(value)
    params = cell.source.params
    if params is not None:
        row.update({"family": str(params["family"]), "scale": str(params["nodes"]),
                    "mix": "single" if params["jobs"] == 1 else "batch",
                    "gen-seed": str(params["seed"]), "depth": str(params.get("depth") or "")})
    return row


def failed_row(cell: Cell, status: str, error: str) -> dict[str, str]:
    """The row of a cell that produced no result."""
    return {**_base_row(cell), "status": status, "valid": "no" if status != "skipped" else "",
            "error": error[:500]}


def _ratio(num: int, den: int) -> str:
    return _fmt(num / den, 4) if den else ""


def _result_columns(problem: Any, result: Result) -> dict[str, str]:
    m = result.metrics
    violations = check(problem, result.placement)
    bug = [n for n in result.notes if n.startswith("BUG:")]
    return {
        "answer-engine": result.engine, "status": result.status.value,
        "valid": "no" if violations or bug else "yes",
        "placed-jobs": str(m.placed_jobs), "origin-hits": str(m.origin_hits),
        "origin-candidates": str(m.origin_candidates),
        "achievable-origin-hits": str(m.achievable_origin_hits),
        "hit-rate": _ratio(m.origin_hits, m.origin_candidates),
        "fault-returns": str(m.fault_returns), "subhealthy-nodes": str(m.subhealthy_nodes),
        "reserve-used": str(m.reserve_used), "fragment-score": str(m.fragment_score),
        "affinity-spill": str(m.affinity_spill), "objective": str(result.objective),
        "bound": "" if result.bound is None else str(result.bound), "gap": _fmt(result.gap),
        "solver-wall-seconds": _fmt(result.solver_wall_seconds),
        "solver-deterministic-seconds": _fmt(result.solver_deterministic_seconds),
        "note": "; ".join([str(v) for v in violations[:3]] + bug)[:500],
    }


def _simulate_columns(scenario: Any, events: Any, cell: Cell) -> dict[str, str]:
    from solver.simulate import simulate

    kwargs: dict[str, Any] = {"engine": cell.engine, "time_limit": cell.time_limit,
                              "workers": cell.cpsat_workers, "seed": cell.seed,
                              "scenario_source": cell.source.label,
                              "events_source": "events"}
    if cell.deterministic_time is not None:
        kwargs["deterministic_time"] = cell.deterministic_time
    report = simulate(scenario, events, **kwargs)
    totals = report.totals()
    placed = sum(len(s.placed) for s in report.sessions)
    return {
        "status": "simulated", "answer-engine": cell.engine, "valid": "yes",
        "sessions": str(totals["sessions"]), "placed-jobs": str(placed),
        "origin-hits": str(totals["hits"]), "origin-candidates": str(totals["candidates"]),
        "achievable-origin-hits": str(totals["achievable"]),
        "hit-rate": _ratio(int(totals["hits"]), int(totals["candidates"])),
        "fault-returns": str(totals["fault-returns"]),
        "note": f"pending after the last session: {totals['pending-after-last']}, image "
                f"pulls avoided: {totals['pulls-avoided-gb']} GB",
    }


def run_cell(cell: Cell, data: dict[str, Any] | None = None, events: Any = None
             ) -> dict[str, str]:
    """Run one cell (the Dask task); every failure becomes the row's ``error``.

    Parameters
    ----------
    cell
        What to run.
    data
        The scenario's plain data (``file`` and ``inline`` sources).
    events
        The events document: the cell runs ``simulate`` instead of ``plan``.

    Returns
    -------
    dict
        The ``results.csv`` row (strings); with ``_scenario`` (JSON text of the generated
        scenario) when the cell asks for it.
    """

    row = _base_row(cell)
    with contextlib.suppress(Exception):
        from distributed import get_worker

        row["worker"] = str(get_worker().address)
    if cell.not_after is not None and time.time() + 2 * cell.time_limit > cell.not_after:
        return {**row, "status": "skipped",
                "note": "skipped: the time budget of the run was used up"}
    probe = MemoryProbe()
    started = time.perf_counter()
    try:
        if cell.source.kind == "generate":
            assert cell.source.params is not None
            case = generate_case(GenParams(**cell.source.params))
            row["history"] = case.history_engine
            scenario_data = case.scenario.to_dict()
            if cell.want_scenario:
                row["_scenario"] = json.dumps(scenario_data, indent=1)
        else:
            if data is None:
                raise ValueError(f"no data for scenario '{cell.source.label}'")
            scenario_data = data
        source = cell.source.label
        if cell.overrides:
            scenario_data = apply_overrides(scenario_data, cell.overrides)
            source += " with " + ", ".join(f"{k}={format_value(v)}" for k, v in cell.overrides)
        scenario = scenario_from_data(scenario_data, source)
        row["nodes"] = str(len(scenario.nodes))
        row["jobs"] = str(job_count(scenario))
        if events is not None:
            before = probe.reset()
            started = time.perf_counter()
            row.update(_simulate_columns(scenario, events, cell))
        else:
            problem = compile_scenario(scenario, source)
            before = probe.reset()
            started = time.perf_counter()  # the whole solve call, as the bench always timed
            result = solve(problem, engine=cell.engine, time_limit=cell.time_limit,
                           workers=cell.cpsat_workers, seed=cell.seed,
                           deterministic_time=cell.deterministic_time)
            row.update(_result_columns(problem, result))
        row["wall-seconds"] = _fmt(time.perf_counter() - started)
        peak = probe.peak()
        row["peak-rss-mb"] = _fmt(peak, 1)
        row["peak-delta-mb"] = _fmt(max(0.0, peak - before), 1)
    except EngineNotAvailable as exc:
        row.update({"status": "skipped", "valid": "", "note": str(exc)[:500]})
    except InvalidAnswer as exc:
        row.update({"status": "invalid", "valid": "no", "error": str(exc)[:500],
                    "wall-seconds": _fmt(time.perf_counter() - started)})
    except InputError as exc:
        row.update({"status": "error", "valid": "no",
                    "error": ("invalid input: " + "; ".join(exc.messages[:3]))[:500]})
    except Exception as exc:  # a crashing cell is a result of the sweep, not its end
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        row.update({"status": "error", "valid": "no",
                    "error": f"{type(exc).__name__}: {exc}{where}"[:500],
                    "wall-seconds": _fmt(time.perf_counter() - started)})
    return row


# --------------------------------------------------------------------------- runner


@contextlib.contextmanager
def dask_client(scheduler: str | None = None, workers: int | None = None,
                option: str = "--dask-workers") -> Iterator[Any]:
    """A :class:`distributed.Client` for the sweep, closed (with its cluster) on exit.

    Parameters
    ----------
    scheduler
        ``None``: a new :class:`distributed.LocalCluster` on loopback, ``workers`` worker
        processes (default: the cores), one thread each.  ``"inprocess"``: one worker
        thread in this process (no parallelism; for debugging and tests).  Otherwise the
        address of a running Dask scheduler (``tcp://host:8786``).
    workers
        Worker processes of the local cluster (at most four per core, at least 8).
    option
        The command-line option that gave ``workers`` (named in the error message).

    Raises
    ------
    InputError
        When the scheduler cannot be reached.
    CliError
        When Dask is not installed (the ``sweep`` extra; exit 2).
    """
    require_extra("sweep", "the Dask runner (sweep, bench, compare --suite, replay --seeds)")
    import dask
    from distributed import Client, LocalCluster

    cores = os.cpu_count() or 1
    if workers is not None and not 1 <= workers <= max(8, 4 * cores):
        raise InputError([f"{option} {workers}: a local cluster takes 1 to {max(8, 4 * cores)} "
                          f"worker processes on this machine ({cores} cores); give a "
                          "--scheduler address for more"])
    if scheduler not in (None, INPROCESS):
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise InputError([f"--scheduler {scheduler}: cannot reach the Dask scheduler: "
                              f"{exc}"]) from None
        try:
            yield client
        finally:
            client.close()
        return
    # a cell that kills its worker is retried once elsewhere, then recorded as lost; a
    # worker holds only the cell it runs, so no innocent cell dies with it
    with dask.config.set({"distributed.scheduler.allowed-failures": 1,
                          "distributed.scheduler.worker-saturation": 1.0}):
        try:
            if scheduler == INPROCESS:
                cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                       dashboard_address="127.0.0.1:0",
                                       silence_logs=logging.ERROR)
            else:
                cluster = LocalCluster(n_workers=workers or cores,
                                       threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address="127.0.0.1:0",
                                       silence_logs=logging.ERROR)
            client = Client(cluster)
        except KeyboardInterrupt:
            _abandon_starting_clusters()
            raise
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def _abandon_starting_clusters() -> None:
    """Ctrl-C while a local cluster starts: stop what has started, quietly.

    The interrupt leaves half-started nannies behind; distributed's own exit hook then
    tries to close them and prints an ``AssertionError: Status.init`` traceback, and the
    nannies' failed start tasks print "Nanny failed to start" tracebacks: noise that
    looks like a crash after the CLI's one "interrupted" line.  The worker processes are
    daemonic children and end with this process.
    """
    import atexit

    from distributed.deploy.spec import SpecCluster, close_clusters

    for name in ("distributed", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    for cluster in list(SpecCluster._instances):
        with contextlib.suppress(Exception):  # a half-started cluster cannot close cleanly
            cluster.close(timeout=5)
    atexit.unregister(close_clusters)


def describe_client(client: Any) -> str:
    """Workers and threads of a connected client (for reports)."""
    try:
        threads = client.nthreads()
        address = client.scheduler.address
        return (f"Dask scheduler {address}: {len(threads)} worker(s), "
                f"{sum(threads.values())} thread(s)")
    except Exception:  # pragma: no cover - informational only
        return "Dask"


#: The task a runner submits (tests substitute their own).
Task = Callable[[Cell, Any, Any], dict[str, str]]


def _threads(client: Any) -> int:
    try:
        return max(1, sum(client.nthreads().values()))
    except Exception:  # pragma: no cover - a scheduler without the usual info
        return 1


def run_cells(client: Any, cells: Sequence[Cell], data: dict[str, Any] | None = None,
              events: Any = None, on_row: Callable[[dict[str, str]], None] | None = None,
              task: Task = run_cell, window: int | None = None) -> list[dict[str, str]]:
    """Run ``cells`` on ``client``'s cluster; return their rows in completion order.

    Cells are submitted in grid order, at most ``window`` at a time (default: four per
    worker thread, at least 8), so the scheduler never holds the whole grid; each task
    carries its scenario's data, so a worker that dies loses nothing another worker
    cannot redo (scattered data would be lost with it).  Each row is handed to
    ``on_row`` as soon as it arrives.  A cell whose task fails (its worker died, or the
    task raised despite :func:`run_cell`'s guard) is recorded with status ``error``.
    """
    from distributed import as_completed

    data = data or {}
    window = window or max(8, 4 * _threads(client))
    pending = iter(enumerate(cells))
    futures: dict[Any, Cell] = {}

    def submit_next(done: Any) -> bool:
        item = next(pending, None)
        if item is None:
            return False
        i, cell = item
        future = client.submit(task, cell, data.get(cell.source.label), events, pure=False,
                               priority=-i, key=f"npu-cell-{i}-{cell.key[:16]}")
        futures[future] = cell
        done.add(future)
        return True

    rows: list[dict[str, str]] = []
    done = as_completed()
    try:
        for _ in range(window):
            if not submit_next(done):
                break
        for future in done:
            cell = futures.pop(future)
            try:
                # a result lost with its worker before it was fetched is recomputed (the
                # future is still wanted): result() waits for that
                row = future.result()
            except Exception as exc:  # the task failed: KilledWorker, cancelled, ...
                row = failed_row(cell, "error", f"{WORKER_LOST}: {type(exc).__name__}: {exc}")
            future.release()
            rows.append(row)
            submit_next(done)
            if on_row is not None:
                on_row(row)
    finally:
        for future in futures:
            future.cancel()
    return rows


# --------------------------------------------------------------------------- results


class ResultsFile:
    """``results.csv`` written one row at a time (flushed, so a crash loses no row)."""

    def __init__(self, path: Path, fieldnames: Sequence[str],
                 keep: Sequence[dict[str, str]] = ()) -> None:
        self.path = path
        self.fieldnames = list(fieldnames)
        self.handle: IO[Any] = open_output(path)
        self.writer = csv.DictWriter(self.handle, fieldnames=self.fieldnames,
                                     extrasaction="ignore")
        self.writer.writeheader()
        for row in keep:
            self.write(row)

    def write(self, row: dict[str, str]) -> None:
        """Append one row."""
        self.writer.writerow({k: row.get(k, "") for k in self.fieldnames})
        self.handle.flush()

    def close(self) -> None:
        """Close the file."""
        self.handle.close()


def read_results(path: Path) -> list[dict[str, str]]:
    """Rows of a ``results.csv`` (a last line cut by a crash is dropped).

    Raises
    ------
    InputError
        When the file cannot be read or is not a sweep's ``results.csv``.
    """
    text = read_text(path)  # bounded: /dev/zero is refused one byte past the limit
    try:
        with io.StringIO(text, newline="") as handle:
            reader = csv.DictReader(handle)
            names = reader.fieldnames or []
            missing = [k for k in ("cell", "engine", "status") if k not in names]
            if missing:
                raise InputError([f"{path}: not a sweep results.csv (missing column(s) "
                                  f"{', '.join(missing)})"])
            rows = []
            for row in reader:
                if None in row or any(v is None for v in row.values()):
                    continue  # a line cut short (or too long): the cell reruns
                rows.append(row)
            return rows
    except csv.Error as exc:
        raise InputError([f"{path}: not a readable CSV file: {exc}"]) from None


def sort_results(path: Path, cells: Sequence[Cell]) -> list[dict[str, str]]:
    """Rewrite ``results.csv`` in grid order (rows arrive in completion order); return it.

    The file is replaced atomically, so an interruption leaves either order intact.
    """
    with io.StringIO(read_text(path), newline="") as handle:  # bounded
        names = next(csv.reader(handle), [])
    order = {c.key: i for i, c in enumerate(cells)}
    rows = read_results(path)
    rows.sort(key=lambda r: order.get(r.get("key", ""), len(order)))
    tmp = path.with_name(path.name + ".tmp")
    writer = ResultsFile(tmp, names, rows)
    writer.close()
    os.replace(tmp, path)
    return rows


# --------------------------------------------------------------------------- regression


@dataclass
class Finding:
    """One line of a regression comparison: a failure or an informational note."""

    cell: str
    engine: str
    text: str
    failure: bool


def _int(row: dict[str, str], key: str) -> int | None:
    value = row.get(key, "")
    try:
        return int(value) if value not in ("", None) else None
    except ValueError:
        return None


def _failed(row: dict[str, str]) -> bool:
    return row.get("status") in ("error", "invalid") or row.get("valid") == "no"


def compare_rows(old_rows: Sequence[dict[str, str]], new_rows: Sequence[dict[str, str]]
                 ) -> list[Finding]:
    """Every regression of ``new_rows`` against ``old_rows``, cell by cell.

    Failures: an invalid or failed cell; fewer placed jobs, a lower objective, or fewer
    origin hits without more placed jobs than the baseline's cell (matched by ``cell``);
    a cell the baseline ran that cannot run any more; CP-SAT below greedy on the same
    scenario, overrides, limit and seed.  A changed scenario (``scenario-sha256``) or a
    cell missing from either side is a note.
    """
    old = {r["cell"]: r for r in old_rows if r.get("cell")}
    found: list[Finding] = []
    groups: dict[str, dict[str, dict[str, str]]] = defaultdict(dict)
    for row in new_rows:
        cell, engine = row.get("cell", ""), row.get("engine", "")
        if _failed(row):
            found.append(Finding(cell, engine, f"invalid or failed run: status "
                                 f"{row.get('status')}; {row.get('error') or row.get('note')}",
                                 True))
            continue
        base = old.get(cell)
        if row.get("status") == "skipped":
            ran_before = base is not None and base.get("status") not in NO_RESULT
            found.append(Finding(cell, engine, f"cannot run: {row.get('note', '')}", ran_before))
            continue
        group = row["cell"].replace(f" | {engine} | ", " | * | ", 1)
        groups[group][engine] = row
        if base is None:
            found.append(Finding(cell, engine, "not in the baseline", False))
            continue
        if base.get("status") in NO_RESULT:
            continue
        if (base.get("scenario-sha256") and row.get("scenario-sha256")
                and base["scenario-sha256"] != row["scenario-sha256"]):
            found.append(Finding(cell, engine, "the scenario changed since the baseline; "
                                 "not compared", False))
            continue
        now_p, old_p = _int(row, "placed-jobs"), _int(base, "placed-jobs")
        now_h, old_h = _int(row, "origin-hits"), _int(base, "origin-hits")
        now_o, old_o = _int(row, "objective"), _int(base, "objective")
        worse = []
        if now_p is not None and old_p is not None and now_p < old_p:
            worse.append(f"placed jobs {now_p} < {old_p}")
        if (now_h is not None and old_h is not None and now_h < old_h
                and (now_p or 0) <= (old_p or 0)):
            worse.append(f"origin hits {now_h} < {old_h}")
        if now_o is not None and old_o is not None and now_o < old_o:
            worse.append(f"objective {now_o} < {old_o}")
        if worse:
            found.append(Finding(cell, engine, "below the baseline: " + ", ".join(worse), True))
        elif now_o is not None and old_o is not None and now_o > old_o:
            found.append(Finding(cell, engine, f"better than the baseline (objective {now_o} "
                                 f"> {old_o})", False))
    seen = {r.get("cell") for r in new_rows}
    missing = [cell for cell in old if cell not in seen]
    if missing:
        found.append(Finding(missing[0], "-", f"{len(missing)} cell(s) of the baseline are not "
                             "in this run (first shown)", False))
    for runs in groups.values():
        g, c = runs.get("greedy"), runs.get("cpsat")
        if g is None or c is None:
            continue
        go, co = _int(g, "objective"), _int(c, "objective")
        if go is not None and co is not None and co < go:
            found.append(Finding(c["cell"], "cpsat", f"CP-SAT loses to greedy: objective "
                                 f"{co} < {go}", True))
    return found


@dataclass(frozen=True)
class Coverage:
    """How many cells of a run a baseline comparison actually compared.

    Attributes
    ----------
    compared
        Cells of this run whose baseline cell (same ``cell`` name) produced a result on
        the same scenario content: the cells whose numbers were compared.
    cells
        Cells of this run.
    baseline_only
        Cells of the baseline this run does not have.
    first_unmatched, first_baseline_only
        The first cell name of this run missing from the baseline, and the first baseline
        cell missing from this run ("" when none): they show why keys do not match.
    """

    compared: int
    cells: int
    baseline_only: int
    first_unmatched: str = ""
    first_baseline_only: str = ""

    @property
    def complete(self) -> bool:
        """Every cell of both runs was compared (and there was at least one)."""
        return self.cells > 0 and self.compared == self.cells and self.baseline_only == 0

    def text(self) -> str:
        """``compared N of M cell(s) ...`` with the reason when not complete."""
        line = f"compared {self.compared} of {self.cells} cell(s) with the baseline"
        if self.baseline_only:
            line += f"; {self.baseline_only} baseline cell(s) are not in this run"
        if self.first_unmatched:
            line += f"; first cell not in the baseline: '{self.first_unmatched}'"
        if self.first_baseline_only:
            line += f"; first baseline cell not in this run: '{self.first_baseline_only}'"
        return line


def baseline_coverage(old_rows: Sequence[dict[str, str]],
                      new_rows: Sequence[dict[str, str]]) -> Coverage:
    """Count the cells of ``new_rows`` that :func:`compare_rows` compared with ``old_rows``.

    A cell is compared when the baseline has a cell of the same name that produced a
    result (its status is not one of :data:`NO_RESULT`) on the same scenario content
    (``scenario-sha256``, when both rows carry it).  Cells are matched by name, which
    holds the scenario, the override values, the engine, the time limit, the seed and
    the deterministic time: a baseline swept with another time limit matches nothing.
    """
    old = {r["cell"]: r for r in old_rows if r.get("cell")}
    seen = {r.get("cell", "") for r in new_rows}
    compared = 0
    first_unmatched = ""
    for row in new_rows:
        base = old.get(row.get("cell", ""))
        if base is None:
            first_unmatched = first_unmatched or row.get("cell", "")
            continue
        if base.get("status") in NO_RESULT:
            continue
        if (base.get("scenario-sha256") and row.get("scenario-sha256")
                and base["scenario-sha256"] != row["scenario-sha256"]):
            continue
        compared += 1
    baseline_only = [cell for cell in old if cell not in seen]
    return Coverage(compared, len(new_rows), len(baseline_only), first_unmatched,
                    baseline_only[0] if baseline_only else "")


def regression_text(title: str, new_rows: Sequence[dict[str, str]],
                    old_rows: Sequence[dict[str, str]], findings: Sequence[Finding],
                    full_table: bool = True, coverage: Coverage | None = None,
                    notes_in: str | None = None) -> str:
    """The comparison's text: a table (every cell, or only the regressions), then verdict.

    Parameters
    ----------
    title, new_rows, old_rows, findings
        What was compared and what the comparison found.
    full_table
        Every cell in the table and every note; else only the regressions.
    coverage
        When given, the verdict says how many cells were compared and fails unless
        :attr:`Coverage.complete`.
    notes_in
        Where the notes left out (``full_table`` false) are written, named in the text.
    """

    old = {r["cell"]: r for r in old_rows if r.get("cell")}
    failing = {(f.cell, f.engine) for f in findings if f.failure}
    table = []
    for row in new_rows:
        key = (row.get("cell", ""), row.get("engine", ""))
        if not full_table and key not in failing:
            continue
        base = old.get(row.get("cell", ""), {})
        table.append([row.get("scenario", ""), row.get("engine", ""), row.get("status", ""),
                      f"{row.get('placed-jobs', '')} ({base.get('placed-jobs', '-')})",
                      f"{row.get('origin-hits', '')} ({base.get('origin-hits', '-')})",
                      f"{row.get('objective', '')} ({base.get('objective', '-')})",
                      row.get("wall-seconds", "")])
    text = [title, ""]
    if table:
        text += [markdown_table(("scenario", "engine", "status", "placed (baseline)",
                                 "hits (baseline)", "objective (baseline)", "wall s"), table),
                 ""]
    for f in findings:
        if f.failure or full_table:
            text.append(f"{'REGRESSION' if f.failure else 'note'}: {f.cell} [{f.engine}]: "
                        f"{f.text}")
    if not full_table:
        notes = sum(1 for f in findings if not f.failure)
        if notes:
            where = f"; they are in {notes_in}" if notes_in else ""
            text.append(f"({notes} note(s) not shown here: cells new, changed or better than "
                        f"the baseline{where})")
    if coverage is not None:
        text.append(coverage.text())
    text.append(regression_verdict(findings, coverage))
    return "\n".join(text) + "\n"


def regression_verdict(findings: Sequence[Finding], coverage: Coverage | None = None) -> str:
    """``OK: ...`` or ``FAILED: ...``: the last line of a comparison."""
    failures = sum(1 for f in findings if f.failure)
    if failures:
        return f"FAILED: {failures} regression(s)"
    if coverage is not None and not coverage.complete:
        if coverage.compared == 0:
            return ("FAILED: nothing was compared (no cell of this run matches a baseline "
                    "cell that ran: another grid, time limit, seed or deterministic time?)")
        return (f"FAILED: only {coverage.compared} of {coverage.cells} cell(s) were compared"
                + (f" and {coverage.baseline_only} baseline cell(s) were not run"
                   if coverage.baseline_only else "")
                + "; no regression among those")
    return "OK: no regression"


def regression_failed(findings: Sequence[Finding], coverage: Coverage | None = None) -> bool:
    """True when a finding is a failure or ``coverage`` is not complete."""
    return (any(f.failure for f in findings)
            or (coverage is not None and not coverage.complete))


# --------------------------------------------------------------------------- report


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
    hits = sum(_int(r, "origin-hits") or 0 for r in ok)
    cand = sum(_int(r, "origin-candidates") or 0 for r in ok)
    ach = sum(_int(r, "achievable-origin-hits") or 0 for r in ok)
    proven = [r for r in ok if r.get("status") == "optimal"]
    objectives = [float(r["objective"]) for r in ok if r.get("objective")]
    walls = [float(r["wall-seconds"]) for r in ok if r.get("wall-seconds")]
    return {
        "cells": len(rows), "ok": len(ok), "failed": len(rows) - len(ok),
        "placed": sum(_int(r, "placed-jobs") or 0 for r in ok),
        "jobs": sum(_int(r, "jobs") or 0 for r in ok),
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

    failed = [r for r in rows if _failed(r)]
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


# --------------------------------------------------------------------------- command


def run_sweep(grid_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
              out: TextIO, err: TextIO, resume: bool = False,
              baseline: str | os.PathLike[str] | None = None,
              deterministic_time: float | None = None, scheduler: str | None = None,
              workers: int | None = None, show_progress: bool = True,
              workers_option: str = "--dask-workers", force: bool = False) -> int:
    """Run (or resume) a what-if sweep and write its results, report and plots.

    Parameters
    ----------
    grid_path
        The grid file.
    out_dir
        Where ``results.csv``, ``report.md`` and the plots go; a folder that is not empty
        is refused unless ``resume`` (continue its ``results.csv``) or ``force`` (start
        over, writing over the files of the same names) is given.
    out, err
        The headline and the progress bar go to ``out`` (the bar only on a terminal),
        notes and the interruption message to ``err``.
    resume
        Continue the sweep in ``out_dir``; finished cells are not rerun, and when every
        cell is finished no Dask cluster is started.
    baseline
        An earlier sweep's ``results.csv`` to compare cell by cell; the comparison fails
        unless every cell of both runs was compared (:class:`Coverage`).  Its notes go to
        ``report.md``.
    deterministic_time
        Replaces the grid's ``deterministic-time`` for every cell.
    scheduler, workers
        A Dask scheduler address, or the worker processes of a local cluster.
    show_progress
        Show the progress bar (on a terminal).
    workers_option
        The command-line option that gave ``workers`` (named in its error message).
    force
        Write into a folder that is not empty (see ``out_dir``).

    Returns
    -------
    int
        1 when a cell failed or the baseline comparison failed, 130 when interrupted
        (Ctrl-C: the message is written here, once), else 0.
    """

    grid = load_grid(grid_path)
    if deterministic_time is not None:
        grid.deterministic_times = [float(deterministic_time)]
    baseline_rows = None
    if baseline:
        baseline_rows = read_results(Path(baseline))
    out_dir = Path(out_dir)
    check_out_dir(out_dir, force=force, resume=resume)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = out_dir / "results.csv"
    cells = expand(grid)
    keep: list[dict[str, str]] = []
    if results.exists() and resume:
        with io.StringIO(read_text(results), newline="") as handle:  # bounded
            header = next(csv.reader(handle), [])
        if header and header != grid.fieldnames():
            raise InputError([f"{results}: its columns are not this grid's (different "
                              "overrides); choose another --out"])
        wanted = {c.key for c in cells}
        old = read_results(results)
        keep = [r for r in old if r.get("key") in wanted
                and not r.get("error", "").startswith(WORKER_LOST)]
        stale = [r for r in old if r.get("key") not in wanted]
        if stale:  # another grid or another npu-place version: set aside, never lost
            aside = out_dir / "results.stale.csv"
            ResultsFile(aside, header, stale).close()
            err.write(f"note: {len(stale)} row(s) of {results} are not cells of this grid "
                      f"(the grid or the npu-place version changed); moved to {aside}\n")
    done = {r["key"] for r in keep}
    todo = [c for c in cells if c.key not in done]

    tty = bool(getattr(out, "isatty", lambda: False)())
    count = len(keep)
    started = time.perf_counter()
    if not todo:  # every cell is finished: no cluster to start
        where = "no runner (every cell was already in results.csv)"
        ready = started
        ResultsFile(results, grid.fieldnames(), keep).close()
    else:
        progress = Progress(out, len(cells), tty and show_progress)
        with contextlib.ExitStack() as stack:
            try:
                client = stack.enter_context(dask_client(scheduler, workers, workers_option))
            except KeyboardInterrupt:  # Ctrl-C while the cluster starts: one message
                progress.close()
                err.write(f"interrupted while the Dask cluster started: no cell was run "
                          f"({count} of {len(cells)} cells were finished before)\n")
                return 130
            where = describe_client(client)
            ready = time.perf_counter()
            writer = ResultsFile(results, grid.fieldnames(), keep)

            def on_row(row: dict[str, str]) -> None:
                nonlocal count
                writer.write(row)
                count += 1
                progress.update(count, row.get("cell", "")[:60])

            try:
                progress.update(count, f"{len(todo)} cell(s) to run")
                run_cells(client, todo, grid.data, grid.events, on_row)
            except KeyboardInterrupt:
                progress.close()
                err.write(f"interrupted: {count} of {len(cells)} cells are in {results}; add "
                          "--resume to continue\n")
                return 130
            finally:
                writer.close()
        progress.close()
    elapsed = time.perf_counter() - started
    rows = sort_results(results, cells)
    plots = write_sweep_plots(rows, grid.override_keys, out_dir, err)
    meta = {"grid": str(grid_path), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "runner": where, "project version": project_version(),
            "wall time": f"{elapsed:.1f} s for {len(todo)} cell(s) "
                         f"({len(keep)} kept from an earlier run), of which "
                         f"{ready - started:.1f} s to start or reach the cluster"}
    report = out_dir / "report.md"
    comparison = baseline_text = ""
    failed_comparison = False
    if baseline_rows is not None:
        findings = compare_rows(baseline_rows, rows)
        coverage = baseline_coverage(baseline_rows, rows)
        title = f"against baseline {baseline}:"
        comparison = regression_text(title, rows, baseline_rows, findings, full_table=False,
                                     coverage=coverage, notes_in=str(report))
        failed_comparison = regression_failed(findings, coverage)
        baseline_text = regression_text(title, rows, baseline_rows, findings,
                                        full_table=True, coverage=coverage)
    write_output(report, render_sweep_report(rows, grid.override_keys, meta, plots,
                                             baseline_text))
    failed = [r for r in rows if _failed(r)]
    out.write(f"sweep {grid_path}: {len(rows)} cells ({len(todo)} run now, {len(keep)} kept, "
              f"{len(failed)} failed) in {elapsed:.1f} s ({ready - started:.1f} s to start or "
              f"reach the cluster) on {where}\n"
              f"wrote {results}, {report}" + "".join(f", {p}" for p in plots) + "\n")
    out.write(failure_lines(failed, results))
    out.write(comparison)
    return 1 if failed or failed_comparison else 0


#: Failed cells whose reason the sweep's summary prints (the rest are counted).
FAILURES_SHOWN = 10


def failure_lines(failed: Sequence[dict[str, str]], results: Path) -> str:
    """The summary's lines of the failed cells: cell, engine, status and reason (the
    ``error`` column, or the validator's ``note``), at most :data:`FAILURES_SHOWN`."""
    from models.limits import escape_text

    lines = []
    for row in failed[:FAILURES_SHOWN]:
        reason = row.get("error") or row.get("note") or "no reason recorded"
        lines.append(f"  failed: {row.get('cell', '?')} [{row.get('engine', '?')}] "
                     f"{row.get('status', '?')}: {escape_text(reason, 500)}\n")
    hidden = len(failed) - FAILURES_SHOWN
    if hidden > 0:
        lines.append(f"  ... and {hidden} more failed cell(s): see {results}\n")
    return "".join(lines)
