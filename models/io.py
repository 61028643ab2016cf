"""Loading and saving scenario and placement files (YAML or JSON, the contract's keys).

Every failure raises :class:`models.errors.InputError` carrying one message per
problem, each naming the file, the job or node, and the field.  The bounded document
readers themselves live in :mod:`models.documents`; their names are re-exported here.
"""

from __future__ import annotations

import os
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from models.documents import (
    DocumentError,
    dump_data,
    format_for_path,
    load_json,
    load_yaml,
    parse_text,
    paused_gc,
    read_document,
)
from models.errors import closest_name
from models.limits import escape_text
from models.placement import PlacementFile
from models.scenario import Scenario
from models.validation import InputError, validate_scenario

__all__ = [
    "EXAMPLES_DIR",
    "EXAMPLE_PREFIX",
    "DocumentError",
    "InputError",
    "best_effort_messages",
    "bundled_example_names",
    "bundled_example_path",
    "document_kind",
    "dump_data",
    "format_for_path",
    "load_json",
    "load_placement",
    "load_scenario",
    "load_yaml",
    "model_from_data",
    "parse_text",
    "pydantic_messages",
    "read_document",
    "save_placement",
    "save_scenario",
    "scenario_from_data",
    "scenario_model",
]

M = TypeVar("M", bound=BaseModel)

_SECTION_NAMES = {"nodes": "node", "jobs": "job", "running": "running job"}


def _describe_location(data: Any, loc: tuple[Any, ...]) -> tuple[str, str]:
    """Turn a pydantic error location into ``(item, field)`` words."""
    if not loc:
        return "document", "(top level)"
    head = loc[0]
    if head in _SECTION_NAMES and len(loc) >= 2 and isinstance(loc[1], int):
        index = loc[1]
        name = None
        if isinstance(data, dict):
            items = data.get(head)
            if isinstance(items, list) and index < len(items) and isinstance(items[index], dict):
                name = items[index].get("name")
        shown = escape_text(str(name), 80) if name else ""
        item = (f"{_SECTION_NAMES[head]} '{shown}' ({head}[{index}])" if name
                else f"{head}[{index}]")
        field = escape_text(".".join(str(p) for p in loc[2:]), 80) or "(the item)"
        return item, field
    if head == "affinity-cache" and len(loc) >= 3 and loc[1] == "entries":
        field = ".".join(str(p) for p in loc[3:]) or "(the entry)"
        return f"affinity-cache entries[{loc[2]}]", field
    head_text = escape_text(str(head), 80)
    return head_text, escape_text(".".join(str(p) for p in loc[1:]), 80) or head_text


def _unwrap(annotation: Any) -> Any:
    """``X`` of ``X | None`` and of ``Annotated[X, ...]``."""
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
            continue
        if (isinstance(annotation, types.UnionType)
                or typing.get_origin(annotation) is typing.Union):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) == 1:
                annotation = args[0]
                continue
        return annotation


def known_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys (contract spelling) of the object at ``loc`` inside ``model``'s data: what
    an unknown key at ``loc + (key,)`` could have meant; ``[]`` when ``loc`` is not an
    object of the models (a free mapping such as ``labels``)."""
    target: Any = model
    for part in loc:
        target = _unwrap(target)
        origin = typing.get_origin(target)
        if origin in (list, tuple):
            target = typing.get_args(target)[0]
        elif origin is dict:
            target = typing.get_args(target)[1]
        elif isinstance(target, type) and issubclass(target, BaseModel):
            field = next((f for name, f in target.model_fields.items()
                          if part in (name, f.alias)), None)
            if field is None:
                return []
            target = field.annotation
        else:
            return []
    target = _unwrap(target)
    if isinstance(target, type) and issubclass(target, BaseModel):
        return [f.alias or name for name, f in target.model_fields.items()]
    return []


def unknown_key_text(key: str, keys: list[str], what: str = "field") -> str:
    """``unknown field; did you mean 'nodes'?`` (or the known keys when none is close)."""
    close = closest_name(key, keys)
    if close is not None:
        return f"unknown {what}; did you mean '{close}'?"
    if keys:
        return f"unknown {what}; the {what}s here are {', '.join(keys)}"
    return f"unknown {what}"


def pydantic_messages(exc: ValidationError, data: Any, source: str,
                      model: type[BaseModel] | None = None) -> list[str]:
    """Format every pydantic error as a message naming file, item and field; an unknown
    key of ``model``'s data names the closest known key (did you mean ...?)."""
    messages = []
    for error in exc.errors():
        item, field = _describe_location(data, tuple(error["loc"]))
        text = error["msg"]
        if error["type"] == "extra_forbidden":
            loc = tuple(error["loc"])
            keys = known_keys(model, loc[:-1]) if model is not None and loc else []
            text = unknown_key_text(str(loc[-1]), keys) if loc else "unknown field"
        elif error["type"] == "value_error":
            text = text.removeprefix("Value error, ")
        elif "input" in error and error["type"] not in ("missing",):
            value = error["input"]
            big = isinstance(value, (list, dict)) and len(value) > 20
            shown = "..." * 30 if big else repr(value)  # no repr of a 10^6-item list
            if len(shown) <= 60:
                text = f"{text} (got {shown})"
        messages.append(escape_text(f"{source}: {item}: field '{field}': {text}", 2000))
    return messages


def model_from_data(model: type[M], data: Any, source: str) -> M:
    """Validate plain data into ``model``, raising :class:`InputError` with all messages."""
    if not isinstance(data, dict):
        kind = type(data).__name__ if data is not None else "an empty document"
        raise InputError([f"{source}: expected a mapping at the top level, got {kind}"])
    try:
        with paused_gc():
            return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(pydantic_messages(exc, data, source, model)) from None


#: Top-level keys only a scenario has (a placement has ``jobs`` too, with ``placed``).
_SCENARIO_ONLY_KEYS = frozenset({"nodes", "config", "affinity-cache", "running", "now"})
#: Top-level keys only a placement (an engine's answer) has.
_PLACEMENT_ONLY_KEYS = frozenset({"engine", "status", "objective", "bound", "metrics",
                                  "wall-seconds"})


def document_kind(data: Any) -> str | None:
    """What a parsed document looks like: ``kubernetes``, ``scenario``, ``placement``.

    A Kubernetes object or list (``kubectl get -o json|yaml``) has ``apiVersion`` and
    ``kind``; a scenario has keys only scenarios have (``nodes``, ``config``, ...) and none
    only placements have (``engine``, ``status``, ...); a placement the other way round.
    ``None`` when it is none of these clearly.
    """
    if not isinstance(data, dict):
        return None
    keys = set(map(str, data))
    if {"apiVersion", "kind"} <= keys:
        return "kubernetes"
    scenario_keys, placement_keys = keys & _SCENARIO_ONLY_KEYS, keys & _PLACEMENT_ONLY_KEYS
    if scenario_keys and not placement_keys:
        return "scenario"
    if placement_keys and not scenario_keys:
        return "placement"
    return None


def _refuse_other_kind(data: Any, source: str, expected: str) -> None:
    """One clear message when ``data`` is a document of another kind than ``expected``."""
    kind = document_kind(data)
    if kind == "kubernetes":
        assert isinstance(data, dict)
        raise InputError([
            f"{source}: this is a Kubernetes object dump (kind: "
            f"{escape_text(str(data.get('kind')), 40)}, apiVersion: "
            f"{escape_text(str(data.get('apiVersion')), 40)}), not a {expected}: convert "
            f"dumps to a scenario with `npu-place import {source} --output scenario.yaml` "
            "(give every dump: nodes, pods, podgroups, ConfigMaps, or their folder)"])
    if kind == "scenario" and expected == "placement":
        raise InputError([
            f"{source}: this is a scenario (it has "
            f"{', '.join(sorted(set(data) & _SCENARIO_ONLY_KEYS))}), not a placement: "
            "validate SCENARIO PLACEMENT takes the scenario first and then an answer such "
            "as `npu-place plan SCENARIO --output placement.json` writes"])
    if kind == "placement" and expected == "scenario":
        raise InputError([
            f"{source}: this is a placement (an engine's answer: it has "
            f"{', '.join(sorted(set(data) & _PLACEMENT_ONLY_KEYS))}), not a scenario"])


#: Sections whose items are dropped from the best-effort model when they have an error.
_ITEM_SECTIONS = ("nodes", "jobs", "running")


def _prune(data: dict[str, Any], errors: list[Any]) -> tuple[dict[str, Any], set[str]] | None:
    """A copy of ``data`` without what the pydantic ``errors`` point at.

    An unknown key is removed; an item of ``nodes``, ``jobs``, ``running`` or of the
    affinity cache with any other error is removed whole; a bad ``config`` value is
    removed (its default applies).  Returns the copy and the names of the removed nodes,
    or ``None`` when an error cannot be pruned (a whole section of the wrong type, say).
    """
    out = dict(data)
    drop: dict[tuple[str, ...], set[int]] = {}
    drop_keys: set[tuple[Any, ...]] = set()
    for error in errors:
        loc = tuple(error["loc"])
        if not loc:
            return None
        head = loc[0]
        if head in _ITEM_SECTIONS and len(loc) >= 2 and isinstance(loc[1], int):
            if error["type"] == "extra_forbidden" and len(loc) == 3:
                drop_keys.add(loc)
            else:
                drop.setdefault((str(head),), set()).add(loc[1])
        elif (head == "affinity-cache" and len(loc) >= 3 and loc[1] == "entries"
              and isinstance(loc[2], int)):
            drop.setdefault(("affinity-cache", "entries"), set()).add(loc[2])
        elif head in ("config", "affinity-cache") and len(loc) >= 2:
            drop_keys.add(loc[:2])
        else:
            drop_keys.add(loc[:1])
    removed_nodes: set[str] = set()
    item_keys: dict[tuple[Any, ...], set[Any]] = {}  # (section, index) -> unknown keys
    for loc in drop_keys:
        if len(loc) == 3:
            item_keys.setdefault(loc[:2], set()).add(loc[2])
    for loc in drop_keys:
        if len(loc) == 1:
            out.pop(str(loc[0]), None)
            if loc[0] == "nodes":
                return None  # every node gone: the cross-field rules would say nonsense
        elif len(loc) == 2 and isinstance(out.get(loc[0]), dict):
            out[loc[0]] = {k: v for k, v in out[loc[0]].items() if k != loc[1]}
    for section, items in list(out.items()):
        if section in _ITEM_SECTIONS and isinstance(items, list):
            wanted = drop.get((section,), set())
            fixed = []
            for i, item in enumerate(items):
                if i in wanted:
                    if section == "nodes" and isinstance(item, dict) and "name" in item:
                        removed_nodes.add(str(item["name"]))
                    continue
                bad = item_keys.get((section, i))
                fixed.append({k: v for k, v in item.items() if k not in bad}
                             if bad and isinstance(item, dict) else item)
            out[section] = fixed
    cache = out.get("affinity-cache")
    entries = drop.get(("affinity-cache", "entries"))
    if entries and isinstance(cache, dict) and isinstance(cache.get("entries"), list):
        out["affinity-cache"] = {**cache, "entries": [e for i, e in enumerate(cache["entries"])
                                                      if i not in entries]}
    return out, removed_nodes


def best_effort_messages(data: Any, source: str, errors: list[Any]) -> list[str]:
    """The cross-field messages of the parts of ``data`` that did parse.

    The items the field-level ``errors`` point at are left out (:func:`_prune`) and the
    cross-field rules run on the rest, so that one run lists every error; messages about
    a node that was left out (a cache entry naming it, say) are not repeated.
    """
    if not isinstance(data, dict):
        return []
    current: dict[str, Any] = data
    removed: set[str] = set()
    for _ in range(4):  # pruning may reveal nothing new; a few rounds at most
        pruned = _prune(current, errors)
        if pruned is None:
            return []
        current, gone = pruned
        removed |= gone
        try:
            scenario = Scenario.model_validate(current)
        except ValidationError as exc:
            errors = exc.errors()
            continue
        _, messages = validate_scenario(scenario, source)
        return [m for m in messages
                if not any(f"node '{name}' does not exist" in m for name in removed)]
    return []


def scenario_model(data: Any, source: str = "<scenario>") -> Scenario:
    """Parse a scenario's fields (the pydantic model), reporting every error at once.

    When a field is invalid, the cross-field rules (:func:`models.validation.
    validate_scenario`) still run on the parts that parsed, and their messages follow
    the field messages in the one :class:`InputError`.  A Kubernetes dump or a placement
    is named as such.  On success the cross-field rules are not run here (the caller's
    :func:`models.compiled.compile_scenario` or :func:`scenario_from_data` runs them).
    """
    if not isinstance(data, dict):
        model_from_data(Scenario, data, source)  # raises the top-level message
    _refuse_other_kind(data, source, "scenario")
    try:
        with paused_gc():
            return Scenario.model_validate(data)
    except ValidationError as exc:
        messages = pydantic_messages(exc, data, source, Scenario)
        raise InputError(messages + best_effort_messages(data, source, exc.errors())) from None


def scenario_from_data(data: Any, source: str = "<scenario>") -> Scenario:
    """Build and fully validate a scenario from plain data (all errors at once)."""
    scenario = scenario_model(data, source)
    _, messages = validate_scenario(scenario, source)
    if messages:
        raise InputError(messages)
    return scenario


#: How a bundled example scenario is named instead of a path (``example:superpod-850``).
EXAMPLE_PREFIX = "example:"
#: The folder of the bundled example scenarios (package data of :mod:`models`).
EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"


def bundled_example_names() -> list[str]:
    """Names of the bundled example scenarios (``models/examples/NAME.yaml``, not the
    ``NAME.events.yaml`` session files beside them)."""
    return sorted(p.name[:-5] for p in EXAMPLES_DIR.iterdir()
                  if p.name.endswith(".yaml") and not p.name.endswith(".events.yaml"))


def bundled_example_path(name: str) -> Path:
    """The file of the bundled example scenario ``name``.

    Raises
    ------
    InputError
        When no bundled example has that name (the message lists the names and the
        closest one).
    """
    names = bundled_example_names()
    if name not in names:  # never a path outside the folder: only listed names resolve
        close = closest_name(name, names)
        hint = f" (did you mean '{close}'?)" if close else ""
        raise InputError([f"{EXAMPLE_PREFIX}{name}: no bundled example scenario of that "
                          f"name{hint}; choose one of {', '.join(names)}"])
    return EXAMPLES_DIR / f"{name}.yaml"


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Load a scenario file (YAML or JSON) and check every input rule.

    Parameters
    ----------
    path
        A scenario file, or ``example:NAME`` for a bundled example scenario (the names
        ``npu-place examples`` lists; ``example:superpod-850``).

    Raises
    ------
    InputError
        With every problem found, each naming the file, the job or node, and the field;
        for an unknown ``example:NAME``, the names there are.
    """
    source = str(path)
    if isinstance(path, str) and path.startswith(EXAMPLE_PREFIX):
        path = bundled_example_path(path[len(EXAMPLE_PREFIX):])
    return scenario_from_data(read_document(path), source)


def load_placement(path: str | os.PathLike[str]) -> PlacementFile:
    """Load a placement file (an engine's answer)."""
    source = str(path)
    data = read_document(path)
    _refuse_other_kind(data, source, "placement")
    return model_from_data(PlacementFile, data, source)


def save_scenario(scenario: Scenario, path: str | os.PathLike[str]) -> None:
    """Write a scenario with the contract's key names (format from the file name)."""
    Path(path).write_text(dump_data(scenario.to_dict(), format_for_path(path)), encoding="utf-8")


def save_placement(placement: PlacementFile, path: str | os.PathLike[str]) -> None:
    """Write a placement with the contract's key names (format from the file name)."""
    Path(path).write_text(
        dump_data(placement.to_dict(), format_for_path(path, "json")), encoding="utf-8"
    )
