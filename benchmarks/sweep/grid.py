"""The sweep's grid: its format validated into a :class:`Grid`, and its cells.

A :class:`Grid` names scenarios (files, globs, generator cases) and lists of overrides,
engines, time limits, seeds and deterministic times (the format is in
:mod:`benchmarks.sweep`); :func:`expand` makes it the list of :class:`Cell` (one run each,
keyed by the content hash that ``--resume`` matches), and :func:`apply_overrides` sets a
cell's override values in its scenario's data.  The columns of ``results.csv`` are named
here too, because a grid's overrides become columns between them.
"""

from __future__ import annotations

import copy
import glob
import hashlib
import json
import math
import os
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import Any, Union

from pydantic import BaseModel

from benchmarks.generators import FAMILIES, GenParams, case_name
from models.errors import closest_name
from models.io import read_document
from models.numbers import is_ascii_digits, parse_int
from models.scenario import Scenario
from models.validation import InputError
from solver.facade import ENGINES

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
#: Most scenarios (files and generator cases, every seed counted) in one grid.
MAX_GRID_SCENARIOS = 100_000
#: Most cells one grid expands to (scenarios x override values x limits x seeds x
#: engines): counted before anything is expanded, so that a typo of a few list entries
#: cannot fill the memory.
MAX_GRID_CELLS = 1_000_000

#: Columns of a sweep's ``results.csv`` before the override columns.
HEAD_FIELDS: tuple[str, ...] = ("key", "cell", "scenario", "scenario-sha256")
#: Columns of a sweep's ``results.csv`` after the override columns.
TAIL_FIELDS: tuple[str, ...] = (
    "engine", "time-limit", "deterministic-time", "seed", "cpsat-workers", "status",
    "answer-engine", "valid", "jobs", "placed-jobs", "origin-hits", "origin-candidates",
    "achievable-origin-hits", "hit-rate", "fault-returns", "subhealthy-nodes", "reserve-used",
    "fragment-score", "affinity-spill", "objective", "bound", "gap", "wall-seconds",
    "solver-wall-seconds", "solver-deterministic-seconds", "peak-rss-mb", "peak-delta-mb",
    "cell-cpu-seconds", "solve-cpu-seconds", "nodes", "family", "scale", "mix", "gen-seed",
    "depth", "history", "sessions", "worker", "error", "note",
)


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


def format_number(value: float | None, digits: int = 6) -> str:
    """``value`` with at most ``digits`` decimals, trailing zeros cut ("" for None)."""
    if value is None:
        return ""
    return f"{value:.{digits}f}".rstrip("0").rstrip(".") if value != 0 else "0"


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


def generator_kwargs(entry: dict[str, Any], at: str) -> dict[str, Any]:
    """The :class:`GenParams` keyword arguments of a generator entry (without ``seed``
    and ``seeds``), each checked for its type and the grid's size limits.

    Raises
    ------
    InputError
        Naming ``at`` and the key: an unknown key, a missing family, a value of the wrong
        type, a size above :data:`_PARAM_LIMITS`.
    """
    unknown = sorted(set(entry) - {*GENERATE_KEYS, "seeds", "seed"})
    if unknown:
        raise InputError([f"{at}: unknown key(s) {', '.join(map(str, unknown))} "
                          f"(allowed: {', '.join(GENERATE_KEYS)}, seeds)"])
    if "family" not in entry:
        raise InputError([f"{at}: needs 'family' (one of {', '.join(FAMILIES)})"])
    kwargs = {k.replace("-", "_"): v for k, v in entry.items() if k not in ("seeds", "seed")}
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
    return kwargs


def _generate_entries(value: Any, where: str) -> list[Source]:
    if not isinstance(value, list):
        raise InputError([f"{where}: key 'generate': expected a list of cases, got {value!r}"])
    out: list[Source] = []
    total = sum(len(e["seeds"]) if isinstance(e, dict) and isinstance(e.get("seeds"), list)
                else 1 for e in value)
    if total > MAX_GRID_SCENARIOS:
        raise InputError([f"{where}: key 'generate': {total} generator cases (seeds counted); "
                          f"a grid holds at most {MAX_GRID_SCENARIOS} scenarios"])
    for i, entry in enumerate(value):
        at = f"{where}: key 'generate[{i}]'"
        if not isinstance(entry, dict):
            raise InputError([f"{at}: expected a mapping such as "
                              "{family: 950, nodes: 4096, jobs: 8, seeds: [0, 1]}"])
        if "seed" in entry:
            raise InputError([f"{at}: key 'seed': a generate entry takes 'seeds' (a list)"])
        seeds = _list(entry, "seeds", at, [0])
        kwargs = generator_kwargs(entry, at)
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
    _check_size(grid, source)
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


def grid_cells(grid: Grid) -> int:
    """How many cells :func:`expand` makes of ``grid`` (counted, nothing expanded)."""
    count = (len(grid.sources) * len(grid.time_limits) * len(grid.deterministic_times)
             * len(grid.seeds) * len(grid.engines))
    for values in grid.overrides.values():
        count *= len(values)
    return count


def _check_size(grid: Grid, source: str) -> None:
    if len(grid.sources) > MAX_GRID_SCENARIOS:
        raise InputError([f"{source}: {len(grid.sources)} scenarios; a grid holds at most "
                          f"{MAX_GRID_SCENARIOS}"])
    cells = grid_cells(grid)
    if cells > MAX_GRID_CELLS:
        sizes = [f"{len(grid.sources)} scenario(s)",
                 *(f"{len(v)} value(s) of overrides.{k}" for k, v in grid.overrides.items()),
                 f"{len(grid.time_limits)} time limit(s)",
                 f"{len(grid.deterministic_times)} deterministic time(s)",
                 f"{len(grid.seeds)} seed(s)", f"{len(grid.engines)} engine(s)"]
        raise InputError([f"{source}: the grid makes {cells:,} cells ({' x '.join(sizes)}); "
                          f"a sweep runs at most {MAX_GRID_CELLS:,}"])


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
                 self.engine, f"t={format_number(self.time_limit)}", f"s={self.seed}"]
        if self.deterministic_time is not None:
            parts.append(f"d={format_number(self.deterministic_time)}")
        return " | ".join(parts)

    @property
    def group_id(self) -> str:
        """The cell's name without the engine (cells differing only in engine share it)."""
        return self.cell_id.replace(f" | {self.engine} | ", " | * | ", 1)


def expand(grid: Grid, version: str | None = None) -> list[Cell]:
    """Every cell of ``grid``: scenarios × override values × limits × seeds × engines."""
    _check_size(grid, grid.source)
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
