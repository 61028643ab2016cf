"""Loading and saving scenario and placement files (YAML or JSON, the contract's keys).

Every failure raises :class:`models.validation.InputError` carrying one message per
problem, each naming the file, the job or node, and the field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from models.placement import PlacementFile
from models.scenario import Scenario
from models.validation import InputError, validate_scenario

#: Files larger than this are refused before parsing (a 100,000-node scenario is ~15 MB).
MAX_FILE_BYTES = 200 * 1024 * 1024

_YamlLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_YamlDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

M = TypeVar("M", bound=BaseModel)

_SECTION_NAMES = {"nodes": "node", "jobs": "job", "running": "running job"}


def read_document(path: str | os.PathLike[str]) -> Any:
    """Read a YAML or JSON file into plain Python data.

    Raises
    ------
    InputError
        When the file is missing, too large, or not well-formed YAML/JSON.
    """
    source = str(path)
    file = Path(path)
    try:
        size = file.stat().st_size
    except OSError as exc:
        raise InputError([f"{source}: cannot read the file: {exc.strerror}"]) from None
    if size > MAX_FILE_BYTES:
        raise InputError(
            [f"{source}: the file is {size} bytes; the limit is {MAX_FILE_BYTES} bytes"]
        )
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError([f"{source}: cannot read the file as UTF-8 text: {exc}"]) from None
    return parse_text(text, source)


def parse_text(text: str, source: str) -> Any:
    """Parse YAML or JSON text (JSON is tried first when the text starts with ``{``/``[``)."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(
                [f"{source}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"]
            ) from None
    try:
        return yaml.load(text, Loader=_YamlLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError([f"{source}: malformed YAML{where}: {problem}"]) from None


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
        item = f"{_SECTION_NAMES[head]} '{name}' ({head}[{index}])" if name else f"{head}[{index}]"
        field = ".".join(str(p) for p in loc[2:]) or "(the item)"
        return item, field
    if head == "affinity-cache" and len(loc) >= 3 and loc[1] == "entries":
        field = ".".join(str(p) for p in loc[3:]) or "(the entry)"
        return f"affinity-cache entries[{loc[2]}]", field
    return str(head), ".".join(str(p) for p in loc[1:]) or str(head)


def pydantic_messages(exc: ValidationError, data: Any, source: str) -> list[str]:
    """Format every pydantic error as a message naming file, item and field."""
    messages = []
    for error in exc.errors():
        item, field = _describe_location(data, tuple(error["loc"]))
        text = error["msg"]
        if error["type"] == "extra_forbidden":
            text = "unknown field (check the spelling against the scenario format)"
        elif "input" in error and error["type"] not in ("missing",):
            shown = repr(error["input"])
            if len(shown) <= 60:
                text = f"{text} (got {shown})"
        messages.append(f"{source}: {item}: field '{field}': {text}")
    return messages


def model_from_data(model: type[M], data: Any, source: str) -> M:
    """Validate plain data into ``model``, raising :class:`InputError` with all messages."""
    if not isinstance(data, dict):
        kind = type(data).__name__ if data is not None else "an empty document"
        raise InputError([f"{source}: expected a mapping at the top level, got {kind}"])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(pydantic_messages(exc, data, source)) from None


def scenario_from_data(data: Any, source: str = "<scenario>") -> Scenario:
    """Build and fully validate a scenario from plain data (all errors at once)."""
    scenario = model_from_data(Scenario, data, source)
    _, messages = validate_scenario(scenario, source)
    if messages:
        raise InputError(messages)
    return scenario


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Load a scenario file (YAML or JSON) and check every input rule.

    Raises
    ------
    InputError
        With every problem found, each naming the file, the job or node, and the field.
    """
    source = str(path)
    return scenario_from_data(read_document(path), source)


def load_placement(path: str | os.PathLike[str]) -> PlacementFile:
    """Load a placement file (an engine's answer)."""
    source = str(path)
    return model_from_data(PlacementFile, read_document(path), source)


def dump_data(data: Any, fmt: str) -> str:
    """Serialise plain data as ``json`` or ``yaml`` text."""
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    if fmt == "yaml":
        return str(yaml.dump(data, Dumper=_YamlDumper, sort_keys=False, allow_unicode=True))
    raise ValueError(f"unknown format {fmt!r}")


def format_for_path(path: str | os.PathLike[str], default: str = "yaml") -> str:
    """Pick ``json`` or ``yaml`` from a file name."""
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        return "json"
    if suffix in (".yaml", ".yml"):
        return "yaml"
    return default


def save_scenario(scenario: Scenario, path: str | os.PathLike[str]) -> None:
    """Write a scenario with the contract's key names (format from the file name)."""
    Path(path).write_text(dump_data(scenario.to_dict(), format_for_path(path)), encoding="utf-8")


def save_placement(placement: PlacementFile, path: str | os.PathLike[str]) -> None:
    """Write a placement with the contract's key names (format from the file name)."""
    Path(path).write_text(
        dump_data(placement.to_dict(), format_for_path(path, "json")), encoding="utf-8"
    )
