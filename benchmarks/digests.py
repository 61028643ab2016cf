"""Digests of what the engines do, to prove a refactoring changed nothing.

::

    python -m benchmarks.digests --out before.json [--set quick|large|deep|all]
    python -m benchmarks.digests --compare before.json [--set ...]

For every case (the bundled examples, the ``quick`` suite and, in set ``large``/``all``,
a 4,096-node 16-job batch per family for seeds 7 and 8; in set ``deep``/``all``, four
families' 4,096-node batches of seed 9 under deterministic time 9, where the whole-batch
phase runs after the neighbourhoods) every engine (``greedy``, ``cpsat``, ``auto``) runs
under a deterministic budget (``--deterministic-time``, default 0.5) with one worker and a
fixed seed, and the tool records

- ``answer``: the SHA-256 of the answer's placement file (JSON, sorted keys, its
  ``wall-seconds`` left out), with its engine, status and objective;
- ``protos``: the SHA-256 of every CP-SAT model handed to the solver, in order, hints
  included (the ``CpModelProto`` in text format).

``--compare`` recomputes them and prints each case and engine whose answer or protos
differ (exit 1), or ``OK`` (exit 0).  Run it twice on the same code first: a case that
differs then is not deterministic, and the tool says so rather than blaming a change.

The inputs are checked before any case runs (exit 2, naming the file and the field): the
``--compare`` file must be a digests file (an object of cases, each an object of engines
with their fields), ``--out`` a file in an existing folder, ``--deterministic-time`` a
positive finite number.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.generators import GenParams, case_name, generate_case
from benchmarks.suite import quick_suite
from models.documents import read_text
from models.errors import InputError
from models.io import load_scenario
from models.limits import LimitError, check_deterministic_time, escape_text
from models.scenario import Scenario
from solver.facade import solve
from solver.proto_digests import recording_proto_digests

__all__ = ["case_digests", "cases", "check_out_file", "compare", "main", "read_digests"]

EXAMPLES = Path(__file__).resolve().parent.parent / "models" / "examples"
ENGINES = ("greedy", "cpsat", "auto")
LARGE_FAMILIES = ("950", "a3", "850", "multilevel", "ordinary")
LARGE_SEEDS = (7, 8)
#: set ``deep`` runs these families' 4,096-node batches (seed 9) under
#: :data:`DEEP_DETERMINISTIC_TIME`: long enough for the whole-batch phase after the
#: neighbourhoods, which the default 0.5 s never reaches
DEEP_FAMILIES = ("950", "a3", "multilevel", "ordinary")
DEEP_DETERMINISTIC_TIME = 9.0


def cases(which: str) -> Iterator[tuple[str, Scenario]]:
    """The cases of set ``quick`` (examples + quick suite), ``large`` (4,096-node
    batches), ``deep`` (the phases a short budget never reaches) or ``all``."""
    if which in ("quick", "all"):
        for path in sorted(EXAMPLES.glob("*.yaml")):
            if path.name.endswith(".events.yaml"):
                continue
            yield f"example:{path.stem}", load_scenario(path)
        for instance in quick_suite():
            yield f"quick:{instance.name}", generate_case(instance.params).scenario
    if which in ("large", "all"):
        for seed in LARGE_SEEDS:
            for family in LARGE_FAMILIES:
                params = GenParams(family, nodes=4096, seed=seed, jobs=16)
                yield f"large:{case_name(params)}", generate_case(params).scenario
    if which in ("deep", "all"):
        for family in DEEP_FAMILIES:
            params = GenParams(family, nodes=4096, seed=9, jobs=16)
            yield f"deep:{case_name(params)}", generate_case(params).scenario


def case_digests(scenario: Scenario, deterministic_time: float) -> dict[str, Any]:
    """Each engine's answer digest and CP-SAT proto digests on one scenario."""
    out: dict[str, Any] = {}
    for engine in ENGINES:
        with recording_proto_digests() as protos:
            result = solve(scenario, engine=engine, time_limit=600.0, workers=1, seed=0,
                           deterministic_time=deterministic_time)
        doc = json.loads(result.placement.model_dump_json(by_alias=True))
        del doc["wall-seconds"]  # the placement file's one wall-clock field
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
        out[engine] = {
            "engine": result.engine, "status": str(result.status),
            "objective": result.objective,
            "answer": hashlib.sha256(text.encode()).hexdigest()[:16],
            "protos": list(protos),
        }
    return out


def compare(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Lines naming each case and engine whose digests differ."""
    lines = []
    for case in sorted(set(before) | set(now)):
        a, b = before.get(case), now.get(case)
        if a is None or b is None:
            lines.append(f"{case}: only in {'now' if a is None else 'before'}")
            continue
        for engine in ENGINES:
            x, y = a.get(engine, {}), b.get(engine, {})
            for key in ("engine", "status", "objective", "answer"):
                if x.get(key) != y.get(key):
                    lines.append(f"{case} {engine}: {key} {x.get(key)} -> {y.get(key)}")
            px, py = x.get("protos", []), y.get("protos", [])
            if px != py:
                first = next((i for i, (p, q) in enumerate(zip(px, py, strict=False))
                              if p != q), min(len(px), len(py)))
                lines.append(f"{case} {engine}: protos differ ({len(px)} -> {len(py)} "
                             f"models, first difference at model {first})")
    return lines


#: The fields of one engine's digests, and the type each must have in a digests file.
_FIELDS: dict[str, tuple[type, ...]] = {
    "engine": (str,), "status": (str,), "objective": (int, float, type(None)),
    "answer": (str,), "protos": (list,)}


def read_digests(path: Path) -> dict[str, Any]:
    """A digests file written by ``--out``, checked field by field.

    Raises
    ------
    InputError
        Naming the file and the field: missing, unreadable, not JSON, not an object of
        cases each holding an object per engine with the fields ``--out`` writes.
    """
    text = read_text(path)  # InputError: missing, a folder, too large, not UTF-8
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError([f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: "
                          f"{exc.msg})"]) from None
    if not isinstance(data, dict):
        raise InputError([f"{path}: expected an object of cases (as --out writes), got a "
                          f"{type(data).__name__}"])
    for case, engines in data.items():
        where = f"{path}: case '{escape_text(case, 80)}'"
        if not isinstance(engines, dict):
            raise InputError([f"{where}: expected an object of engines, got a "
                              f"{type(engines).__name__}"])
        for engine in ENGINES:
            entry = engines.get(engine)
            if not isinstance(entry, dict):
                raise InputError([f"{where}, engine '{engine}': missing or not an object"])
            for field, kinds in _FIELDS.items():
                value = entry.get(field)
                if field not in entry or not isinstance(value, kinds) or isinstance(value, bool):
                    raise InputError([f"{where}, engine '{engine}', field '{field}': "
                                      f"missing or not {' or '.join(k.__name__ for k in kinds)}"])
            if not all(isinstance(p, str) for p in entry["protos"]):
                raise InputError([f"{where}, engine '{engine}', field 'protos': expected a "
                                  "list of digests (strings)"])
    return data


def check_out_file(path: Path) -> None:
    """Refuse an ``--out`` that cannot take the digests file, before any case runs.

    Raises
    ------
    InputError
        When ``path`` is a folder or not a regular file, or its folder does not exist.
    """
    if path.is_dir():
        raise InputError([f"--out {path}: a folder; give the digests file's name "
                          f"(such as {path / 'digests.json'})"])
    if path.exists() and not path.is_file():
        raise InputError([f"--out {path}: not a regular file"])
    folder = path.parent
    if not folder.is_dir():
        raise InputError([f"--out {path}: the folder {folder} does not exist"])


def _budget(text: str) -> float:
    """``--deterministic-time``: a positive finite number (argparse's exit 2 otherwise)."""
    try:
        return check_deterministic_time(float(text))
    except (ValueError, LimitError) as exc:
        message = str(exc) if isinstance(exc, LimitError) else f"not a number: {text!r}"
        raise argparse.ArgumentTypeError(message) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.digests",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", default="quick", choices=("quick", "large", "deep", "all"))
    parser.add_argument("--deterministic-time", type=_budget, default=0.5)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", type=Path, help="write the digests to this JSON file")
    group.add_argument("--compare", type=Path, help="compare with this JSON file")
    args = parser.parse_args(argv)
    try:  # before any case runs
        before = read_digests(args.compare) if args.compare is not None else None
        if args.out is not None:
            check_out_file(args.out)
    except InputError as exc:
        for message in exc.messages:
            print(f"error: {message}", file=sys.stderr)
        return 2
    now: dict[str, Any] = {}
    for name, scenario in cases(args.set):
        budget = (max(args.deterministic_time, DEEP_DETERMINISTIC_TIME)
                  if name.startswith("deep:") else args.deterministic_time)
        now[name] = case_digests(scenario, budget)
        print(f"{name}: " + ", ".join(f"{e} {now[name][e]['objective']} "
                                      f"({len(now[name][e]['protos'])} models)"
                                      for e in ENGINES), file=sys.stderr, flush=True)
    if before is None:
        try:
            args.out.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        except OSError as exc:
            print(f"error: --out {args.out}: cannot write: {exc.strerror}", file=sys.stderr)
            return 2
        return 0
    lines = compare(before, now)
    for line in lines:
        print(line)
    if not lines:
        print(f"OK: {len(now)} cases, engines {', '.join(ENGINES)}: answers and CP-SAT "
              "protos identical")
    return 1 if lines else 0


if __name__ == "__main__":
    raise SystemExit(main())
