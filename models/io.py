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
            # A YAML flow document (``{now: 1, nodes: [...]}``) also starts with a brace.
            try:
                return load_yaml(text)
            except yaml.YAMLError:
                pass
            raise InputError(
                [f"{source}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"]
            ) from None
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError([f"{source}: malformed YAML{where}: {problem}"]) from None


class _NeedsFullLoader(Exception):
    """The document uses a YAML feature the fast path leaves to PyYAML's full loader."""


_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_STR_TAG = "tag:yaml.org,2002:str"


class _MapFrame:
    """A mapping being built: the dict and the key waiting for its value."""

    __slots__ = ("data", "has_key", "key")

    def __init__(self) -> None:
        self.data: dict[Any, Any] = {}
        self.key: Any = None
        self.has_key = False


def _plain_scalar(value: str, cache: dict[str, Any]) -> Any:
    """Resolve and construct a plain (unquoted, untagged) scalar exactly as ``safe_load``."""
    try:
        return cache[value]
    except KeyError:
        pass
    tag = _RESOLVER.resolve(yaml.ScalarNode, value, (True, False))
    if tag == _STR_TAG:
        result: Any = value
    else:
        construct = _CONSTRUCTOR.yaml_constructors.get(tag)
        if construct is None:  # '<<' merge keys, '=' value keys
            raise _NeedsFullLoader
        result = construct(_CONSTRUCTOR, yaml.ScalarNode(tag, value))
    cache[value] = result  # scalars construct to immutable values: safe to share
    return result


def _fast_yaml(text: str) -> Any:
    """Build plain data straight from the (C) parser's events.

    PyYAML's loader first composes a node graph and then resolves and constructs every
    scalar in Python, about 1 s per MB; a 100,000-node scenario took ~20 s.  Scenario and
    placement files are plain YAML (no anchors, aliases, tags, merge keys or several
    documents), so this path builds dicts and lists directly from the event stream and
    resolves each distinct plain scalar once.  Anything else raises
    :class:`_NeedsFullLoader` and the caller falls back to ``yaml.load``, so the result
    always equals ``yaml.safe_load``.
    """
    loader = _YamlLoader(text)
    cache: dict[str, Any] = {}
    stack: list[Any] = []  # open containers: a list, or a _MapFrame
    root: Any = None
    documents = 0
    scalar_event = yaml.ScalarEvent
    mapping_start = yaml.MappingStartEvent
    sequence_start = yaml.SequenceStartEvent
    try:
        while True:
            event = loader.get_event()
            kind = type(event)
            if kind is scalar_event:
                if event.anchor is not None or event.tag is not None:
                    raise _NeedsFullLoader
                value: Any = (_plain_scalar(event.value, cache) if event.implicit[0]
                              else event.value)
            elif kind is mapping_start or kind is sequence_start:
                if event.anchor is not None or event.tag is not None:
                    raise _NeedsFullLoader
                stack.append(_MapFrame() if kind is mapping_start else [])
                continue
            elif kind is yaml.MappingEndEvent:
                value = stack.pop().data
            elif kind is yaml.SequenceEndEvent:
                value = stack.pop()
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise _NeedsFullLoader  # the full loader reports the error
                continue
            elif kind is yaml.StreamEndEvent or event is None:
                return root
            elif kind is yaml.AliasEvent:
                raise _NeedsFullLoader
            else:  # stream start, document end
                continue
            if not stack:
                root = value
                continue
            top = stack[-1]
            if type(top) is list:
                top.append(value)
            elif top.has_key:
                top.data[top.key] = value
                top.has_key = False
            else:
                if isinstance(value, (dict, list)):
                    raise _NeedsFullLoader  # complex keys: let PyYAML decide
                top.key = value
                top.has_key = True
    finally:
        loader.dispose()


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, fast for the plain YAML of scenario files.

    Raises
    ------
    yaml.YAMLError
        When the text is not well-formed YAML.
    """
    try:
        return _fast_yaml(text)
    except _NeedsFullLoader:
        return yaml.load(text, Loader=_YamlLoader)


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
