"""Loading and saving scenario and placement files (YAML or JSON, the contract's keys).

Every failure raises :class:`models.errors.InputError` carrying one message per
problem, each naming the file, the job or node, and the field.  The bounded document
readers themselves live in :mod:`models.documents`; their names are re-exported here.
"""

from __future__ import annotations

import os
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
    read_document,
)
from models.limits import escape_text
from models.placement import PlacementFile
from models.scenario import Scenario
from models.validation import InputError, validate_scenario

__all__ = [
    "DocumentError",
    "InputError",
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


def pydantic_messages(exc: ValidationError, data: Any, source: str) -> list[str]:
    """Format every pydantic error as a message naming file, item and field."""
    messages = []
    for error in exc.errors():
        item, field = _describe_location(data, tuple(error["loc"]))
        text = error["msg"]
        if error["type"] == "extra_forbidden":
            text = "unknown field (check the spelling against the scenario format)"
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


def save_scenario(scenario: Scenario, path: str | os.PathLike[str]) -> None:
    """Write a scenario with the contract's key names (format from the file name)."""
    Path(path).write_text(dump_data(scenario.to_dict(), format_for_path(path)), encoding="utf-8")


def save_placement(placement: PlacementFile, path: str | os.PathLike[str]) -> None:
    """Write a placement with the contract's key names (format from the file name)."""
    Path(path).write_text(
        dump_data(placement.to_dict(), format_for_path(path, "json")), encoding="utf-8"
    )
