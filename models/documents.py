"""Reading YAML and JSON documents into plain Python data, within :mod:`models.limits`.

The lowest layer of the readers: no scenario or placement types here, so that the models
(:mod:`models.scenario` parses JSON strings inside documents with :func:`load_json`) and the
loaders above them (:mod:`models.io`, the cluster import) share one set of bounded readers.
Every failure raises :class:`DocumentError` (a bound, without the file name) or
:class:`models.errors.InputError` (naming the file).
"""

from __future__ import annotations

import gc
import json
import math
import os
import stat
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import yaml

from models.errors import InputError
from models.limits import (
    MAX_ABS_INT,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_VALUES,
    escape_text,
)

_YamlLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_YamlDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

_gc_lock = threading.Lock()
#: how many pauses are open, and whether the collector was on when the first began
_gc_pauses = [0, True]


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while large acyclic data is built.

    Reading a 65,536-node scenario makes about a million dicts, lists and model
    objects; each allocation burst starts a collection that walks every object alive,
    which costs a third of the reading time.  Nothing the readers build holds a cycle
    (reference counting frees it all), so the collector is paused and restored after.
    Pauses nest and may overlap across threads (the watcher's streams list at once, the
    extender parses while it plans): the collector runs again when the last open pause
    ends, if it was on when the first began.
    """
    with _gc_lock:
        if _gc_pauses[0] == 0:
            _gc_pauses[1] = gc.isenabled()
            gc.disable()
        _gc_pauses[0] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses[0] -= 1
            if _gc_pauses[0] == 0 and _gc_pauses[1]:
                gc.enable()


class DocumentError(Exception):
    """A well-formed document refused by a bound or a rule of :mod:`models.limits`.

    The message says what and where (``line L, column C`` for YAML), not the file name.
    """


def read_bytes(path: str | os.PathLike[str], limit: int | None = None, *,
               stdin: IO[Any] | None = None, regular_only: str | None = None) -> bytes:
    """Read a file's bytes, at most ``limit``, whatever the file is: the one way npu-place
    opens a file it reads (``tests/test_bounded_reads.py`` checks the package for others).

    A regular file larger than ``limit`` is refused by its size before anything is read;
    anything else (``/dev/zero``, a pipe, ``-`` for stdin) is read up to one byte past
    the limit and refused there.  A named pipe is opened without waiting for a writer:
    one that has no writer reads as empty instead of blocking forever.

    Parameters
    ----------
    path
        The file; ``"-"`` reads ``stdin`` (default ``sys.stdin``).
    limit
        Most bytes read; default :data:`~models.limits.MAX_FILE_BYTES`.
    stdin
        The stream read for ``"-"`` (its binary ``buffer`` when it has one).
    regular_only
        When given, anything but a regular file (a pipe, a device, a socket, stdin) is
        refused before it is opened, and this text says why in the message (a file that
        another library opens again by its name must be one that reads the same twice).

    Raises
    ------
    InputError
        Naming the file: missing, unreadable, a directory, not a regular file (with
        ``regular_only``), or too large.
    """
    source = "<stdin>" if str(path) == "-" else str(path)
    limit = MAX_FILE_BYTES if limit is None else limit
    too_large = f"{source}: the file is larger than the limit of {limit} bytes"
    if str(path) == "-" and regular_only is not None:
        raise InputError([f"{source}: must be a regular file ({regular_only})"])
    try:
        if str(path) == "-":
            stream: Any = stdin if stdin is not None else sys.stdin
            stream = getattr(stream, "buffer", stream)
            raw: bytes | str = stream.read(limit + 1)
            if isinstance(raw, str):  # a text stream without a buffer (tests)
                raw = raw.encode("utf-8", "surrogateescape")
        else:
            info = os.stat(path)
            if stat.S_ISDIR(info.st_mode):
                raise InputError([f"{source}: is a directory, not a file"])
            if regular_only is not None and not stat.S_ISREG(info.st_mode):
                raise InputError([f"{source}: must be a regular file ({regular_only}), "
                                  "not a pipe, device or socket"])
            if stat.S_ISREG(info.st_mode) and info.st_size > limit:
                raise InputError([f"{source}: the file is {info.st_size} bytes; the limit "
                                  f"is {limit} bytes"])
            # O_NONBLOCK: opening a FIFO without a writer would block; reads block again
            # once it is open (a pipe with a writer delivers its data as usual).
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(fd, "rb") as handle:
                if hasattr(os, "set_blocking"):
                    os.set_blocking(fd, True)
                raw = handle.read(limit + 1)
    except OSError as exc:
        raise InputError([f"{source}: cannot read the file: {exc.strerror}"]) from None
    if len(raw) > limit:
        raise InputError([too_large])
    return raw


def read_text(path: str | os.PathLike[str], limit: int | None = None, *,
              stdin: IO[Any] | None = None) -> str:
    """Read a file as UTF-8 text, at most ``limit`` bytes, whatever the file is
    (:func:`read_bytes`).

    Parameters
    ----------
    path
        The file; ``"-"`` reads ``stdin`` (default ``sys.stdin``).
    limit
        Most bytes read; default :data:`~models.limits.MAX_FILE_BYTES`.
    stdin
        The stream read for ``"-"`` (its binary ``buffer`` when it has one).

    Raises
    ------
    InputError
        Naming the file: missing, unreadable, a directory, too large or not UTF-8.
    """
    raw = read_bytes(path, limit, stdin=stdin)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        source = "<stdin>" if str(path) == "-" else str(path)
        raise InputError([f"{source}: cannot read the file as UTF-8 text: {exc}"]) from None


def read_document(path: str | os.PathLike[str]) -> Any:
    """Read a YAML or JSON file into plain Python data, within :mod:`models.limits`.

    A ``.json`` file is parsed as strict JSON; any other file as YAML (JSON text in a
    ``.yaml`` file is read as JSON first, since JSON is YAML's flow style).  At most
    :data:`~models.limits.MAX_FILE_BYTES` are read, whatever the file is (``/dev/zero``
    and named pipes included, see :func:`read_text`).

    Raises
    ------
    InputError
        When the file is missing, too large, not well-formed YAML/JSON, or breaks a
        document bound (depth, values, aliases, duplicate keys, non-finite numbers).
    """
    text = read_text(path)
    return parse_text(text, str(path), "json" if format_for_path(path) == "json" else None)


def parse_text(text: str, source: str, fmt: str | None = None) -> Any:
    """Parse YAML or JSON text within the document bounds of :mod:`models.limits`.

    Parameters
    ----------
    text
        The document.
    source
        The file name used in messages.
    fmt
        ``"json"``: strict JSON only.  ``None``: YAML, with text that starts with ``{`` or
        ``[`` tried as JSON first (a YAML flow document also starts with a brace).

    Raises
    ------
    InputError
        One message naming ``source``.
    """
    return _parse(text, source, fmt, None, None, many=False)[0]


def parse_documents(text: str, source: str, *, max_depth: int | None = None,
                    max_values: int | None = None) -> list[Any]:
    """Parse every document of a JSON text or a YAML stream (``---``) within bounds.

    As :func:`parse_text` (JSON first for text starting with ``{`` or ``[``), but a YAML
    stream may hold several documents; empty documents are left out.  ``max_depth`` and
    ``max_values`` (default :data:`~models.limits.MAX_DEPTH` and
    :data:`~models.limits.MAX_VALUES`) bound the whole text, every alias expansion
    counted.

    Raises
    ------
    InputError
        One message naming ``source``.
    """
    docs = _parse(text, source, None, max_depth, max_values, many=True)
    return [doc for doc in docs if doc is not None]


def _parse(text: str, source: str, fmt: str | None, max_depth: int | None,
           max_values: int | None, *, many: bool) -> list[Any]:
    stripped = text.lstrip()
    if fmt == "json" or stripped.startswith(("{", "[")):
        try:
            return [load_json(text, max_depth=max_depth, max_values=max_values)]
        except DocumentError as exc:
            raise InputError([f"{source}: {exc}"]) from None
        except json.JSONDecodeError as exc:
            if fmt != "json":
                try:
                    return _load_yaml(text, max_depth, max_values, many=many)
                except DocumentError as yaml_exc:
                    raise InputError([f"{source}: {yaml_exc}"]) from None
                except yaml.YAMLError:
                    pass
            raise InputError(
                [f"{source}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"]
            ) from None
    try:
        return _load_yaml(text, max_depth, max_values, many=many)
    except DocumentError as exc:
        raise InputError([f"{source}: {exc}"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError([f"{source}: malformed YAML{where}: {escape_text(problem)}"]) from None


# --------------------------------------------------------------------------- JSON


def _json_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DocumentError(f"duplicate key '{escape_text(key)}' in a JSON object "
                                    "(each key may appear once)")
            seen.add(key)
    return data


def _json_constant(name: str) -> Any:
    raise DocumentError(f"non-finite number {name} (numbers must be finite)")


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise DocumentError(f"number {escape_text(text, 40)} is out of range (numbers must "
                            "be finite)")
    return value


def load_json(text: str, *, max_depth: int | None = None,
              max_values: int | None = None) -> Any:
    """Strict JSON (RFC 8259) within the document bounds.

    Refuses duplicate keys, ``NaN``/``Infinity``, numbers out of range, nesting deeper
    than ``max_depth`` (default :data:`~models.limits.MAX_DEPTH`) and more than
    ``max_values`` values (default :data:`~models.limits.MAX_VALUES`).

    Raises
    ------
    json.JSONDecodeError
        When the text is not well-formed JSON.
    DocumentError
        When it breaks a bound.
    """
    max_depth = MAX_DEPTH if max_depth is None else max_depth
    max_values = MAX_VALUES if max_values is None else max_values
    # Mappings and lists are what costs memory: refuse before building any of them.
    containers = text.count("{") + text.count("[")
    if containers > max_values:
        raise DocumentError(f"the document holds up to {containers} mappings and lists; the "
                            f"limit is {max_values} values")
    try:
        with paused_gc():
            data = json.loads(text, object_pairs_hook=_json_pairs,
                              parse_constant=_json_constant, parse_float=_json_float)
    except RecursionError:
        raise DocumentError(f"the document is nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # Python refuses to convert integers of more than 4300 digits
        raise DocumentError(f"an integer is out of range (at most {MAX_ABS_INT} in absolute "
                            "value)") from None
    check_data(data, max_depth=max_depth, max_values=max_values)
    return data


def check_data(data: Any, *, max_depth: int | None = None,
               max_values: int | None = None) -> None:
    """Check plain data against the document bounds a reader applies.

    Counts the values, measures the depth and checks that integers lie within
    ±:data:`~models.limits.MAX_ABS_INT` (floats finite): data that passes can be written
    and read back by :func:`read_document`.

    Raises
    ------
    DocumentError
        Naming the first bound broken.
    """
    max_depth = MAX_DEPTH if max_depth is None else max_depth
    max_values = MAX_VALUES if max_values is None else max_values
    _check_scalar(data)
    if type(data) is not dict and type(data) is not list:
        return
    if type(data) is not dict and type(data) is not list:
        return
    count = 1
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > max_depth:
            raise DocumentError(f"the document is nested deeper than {max_depth} levels")
        if type(value) is dict:
            count += 2 * len(value)  # keys and values
            children: Any = value.values()
        else:
            count += len(value)
            children = value
        if count > max_values:
            raise DocumentError(f"the document holds more than {max_values} values")
        for child in children:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif kind is int or kind is float:
                _check_scalar(child)


def _check_scalar(value: Any) -> None:
    if type(value) is int and not -MAX_ABS_INT <= value <= MAX_ABS_INT:
        shown = (escape_text(str(value), 40) if value.bit_length() < 1000
                 else f"of {value.bit_length()} bits")
        raise DocumentError(f"integer {shown} is out of range (at most {MAX_ABS_INT} in "
                            "absolute value)")
    if type(value) is float and not math.isfinite(value):
        raise DocumentError(f"non-finite number {value} (numbers must be finite)")


# --------------------------------------------------------------------------- YAML


_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_MAP_TAGS = frozenset({None, "!", "tag:yaml.org,2002:map"})
_SEQ_TAGS = frozenset({None, "!", "tag:yaml.org,2002:seq"})
#: Explicit scalar tags the loader constructs (as ``safe_load``); others are refused.
_SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}"
    for name in ("str", "int", "float", "bool", "null", "timestamp", "binary")
)


class _MapFrame:
    """A mapping being built: the dict, the key waiting for its value, merged keys."""

    __slots__ = ("data", "has_key", "key", "key_mark", "merged", "merging")

    def __init__(self) -> None:
        self.data: dict[Any, Any] = {}
        self.key: Any = None
        self.key_mark: Any = None
        self.has_key = False
        self.merging = False  # the pending key is ``<<``
        self.merged: dict[Any, Any] | None = None


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "?"


def _construct(tag: str, value: str, cache: dict[str, Any] | None, mark: Any) -> Any:
    """Construct one scalar as ``safe_load`` would, refusing values out of range."""
    try:
        result = _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, yaml.ScalarNode(tag, value))
    except (ValueError, OverflowError, yaml.YAMLError):
        raise DocumentError(f"{_where(mark)}: cannot read the value "
                            f"'{escape_text(value, 40)}' as {tag.rsplit(':', 1)[-1]}") from None
    if type(result) is float and not math.isfinite(result):
        raise DocumentError(f"{_where(mark)}: non-finite number '{escape_text(value, 40)}' "
                            "(numbers must be finite)")
    if type(result) is int and abs(result) > MAX_ABS_INT:
        raise DocumentError(f"{_where(mark)}: integer '{escape_text(value, 40)}' is out of "
                            f"range (at most {MAX_ABS_INT} in absolute value)")
    if cache is not None:
        cache[value] = result  # scalars construct to immutable values: safe to share
    return result


def _plain_scalar(value: str, cache: dict[str, Any], mark: Any) -> Any:
    """Resolve and construct a plain (unquoted, untagged) scalar exactly as ``safe_load``."""
    try:
        return cache[value]
    except KeyError:
        pass
    tag = _RESOLVER.resolve(yaml.ScalarNode, value, (True, False))
    if tag == _STR_TAG:
        cache[value] = value
        return value
    if tag == _MERGE_TAG:
        return _MERGE
    if tag not in _CONSTRUCTOR.yaml_constructors:  # '=' value keys
        raise DocumentError(f"{_where(mark)}: the value '{escape_text(value, 40)}' is not "
                            "supported (quote it to make it a string)")
    if len(value) > 64 and tag == "tag:yaml.org,2002:int":
        raise DocumentError(f"{_where(mark)}: integer '{escape_text(value, 40)}' is out of "
                            f"range (at most {MAX_ABS_INT} in absolute value)")
    return _construct(tag, value, cache, mark)


class _Merge:
    """The ``<<`` merge key."""


_MERGE = _Merge()


def _merge_into(frame: _MapFrame, value: Any, mark: Any) -> None:
    """``<<: *base`` or ``<<: [*a, *b]``: keys not given explicitly come from the bases."""
    sources = value if type(value) is list else [value]
    merged: dict[Any, Any] = {}
    for source in reversed(sources):  # the first base wins, as safe_load
        if type(source) is not dict:
            raise DocumentError(f"{_where(mark)}: a merge key '<<' needs a mapping or a list "
                                "of mappings")
        merged.update(source)
    if frame.merged is None:
        frame.merged = merged
    else:
        frame.merged.update(merged)


def load_yaml(text: str, *, max_depth: int | None = None,
              max_values: int | None = None) -> Any:
    """``yaml.safe_load(text)`` within the document bounds of :mod:`models.limits`.

    Plain data is built straight from the (C) parser's events: PyYAML's loader composes a
    node graph and constructs every scalar in Python (about 1 s per MB), and it expands
    nothing lazily, so neither speed nor memory would be bounded.  The result equals
    ``safe_load`` for every document it accepts.  Refused, with the line and column:
    nesting deeper than :data:`~models.limits.MAX_DEPTH`; more than
    :data:`~models.limits.MAX_VALUES` values, every expansion of an alias counted (an
    alias shares the anchored value, as ``safe_load``); duplicate keys; mappings or
    lists as keys; non-finite numbers and integers beyond 64 bits; tags other than the
    standard scalar, ``!!map`` and ``!!seq`` tags; several documents in one file.
    ``max_depth`` and ``max_values`` replace the two default bounds.

    Raises
    ------
    yaml.YAMLError
        When the text is not well-formed YAML.
    DocumentError
        When it breaks a bound.
    """
    return _load_yaml_bounded(text, max_depth, max_values, many=False)[0]


def load_yaml_documents(text: str, *, max_depth: int | None = None,
                        max_values: int | None = None) -> list[Any]:
    """Every document of a YAML stream (``yaml.safe_load_all``), within the bounds.

    As :func:`load_yaml`, but documents separated by ``---`` are returned in order (an
    empty document is ``None``); anchors are per document, and ``max_values`` bounds the
    whole stream.

    Raises
    ------
    yaml.YAMLError
        When the text is not well-formed YAML.
    DocumentError
        When it breaks a bound.
    """
    return _load_yaml_bounded(text, max_depth, max_values, many=True)


def _load_yaml_bounded(text: str, max_depth: int | None, max_values: int | None, *,
                       many: bool) -> list[Any]:
    """:func:`_load_yaml`, with PyYAML's own nesting limit (PyYAML 6.0.4 and later stop
    at 1,000 levels while scanning, ahead of the events this loader counts) reported as
    the depth bound it is."""
    try:
        return _load_yaml(text, max_depth, max_values, many=many)
    except yaml.YAMLError as exc:
        if "nesting depth" not in str(getattr(exc, "problem", None) or exc):
            raise
        depth = MAX_DEPTH if max_depth is None else max_depth
        raise DocumentError(f"the document is nested deeper than {depth} levels") from None


def _load_yaml(text: str, max_depth: int | None, max_values: int | None, *,
               many: bool) -> list[Any]:
    """:func:`_load_yaml_events` with the garbage collector paused (see :func:`paused_gc`)."""
    with paused_gc():
        return _load_yaml_events(text, max_depth, max_values, many=many)


def _load_yaml_events(text: str, max_depth: int | None, max_values: int | None, *,
                      many: bool) -> list[Any]:
    """The event loop of :func:`load_yaml`: one root per document (one document unless
    ``many``)."""
    max_depth = MAX_DEPTH if max_depth is None else max_depth
    max_values = MAX_VALUES if max_values is None else max_values
    roots: list[Any] = []
    loader = _YamlLoader(text)
    cache: dict[str, Any] = {}
    anchors: dict[str, tuple[Any, int]] = {}  # anchor -> (value, values it holds)
    # open containers: [container, anchor, count at start, start mark]
    stack: list[list[Any]] = []
    root: Any = None
    documents = 0
    count = 0
    scalar_event = yaml.ScalarEvent
    mapping_start = yaml.MappingStartEvent
    sequence_start = yaml.SequenceStartEvent
    try:
        while True:
            event = loader.get_event()
            kind = type(event)
            mark = event.start_mark if event is not None else None
            if kind is scalar_event:
                count += 1
                tag = event.tag
                if tag is None or tag == "!":
                    value: Any = (_plain_scalar(event.value, cache, event.start_mark)
                                  if event.implicit[0] and tag is None else event.value)
                elif tag in _SCALAR_TAGS:
                    value = (event.value if tag == _STR_TAG
                             else _construct(tag, event.value, None, event.start_mark))
                else:
                    raise DocumentError(f"{_where(event.start_mark)}: the tag "
                                        f"'{escape_text(tag, 60)}' is not supported")
                if event.anchor is not None:
                    anchors[event.anchor] = (value, 1)
            elif kind is mapping_start or kind is sequence_start:
                count += 1
                allowed = _MAP_TAGS if kind is mapping_start else _SEQ_TAGS
                if event.tag not in allowed:
                    raise DocumentError(f"{_where(event.start_mark)}: the tag "
                                        f"'{escape_text(event.tag, 60)}' is not supported")
                if len(stack) >= max_depth:
                    raise DocumentError(f"{_where(event.start_mark)}: the document is nested "
                                        f"deeper than {max_depth} levels")
                if count > max_values:
                    raise DocumentError(f"{_where(event.start_mark)}: the document holds "
                                        f"more than {max_values} values")
                stack.append([_MapFrame() if kind is mapping_start else [], event.anchor,
                              count, event.start_mark])
                continue
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                container, anchor, began, mark = stack.pop()
                if kind is yaml.MappingEndEvent:
                    frame = container
                    value = frame.data
                    if frame.merged is not None:
                        value = {**frame.merged, **frame.data}
                else:
                    value = container
                if anchor is not None:
                    anchors[anchor] = (value, count - began + 1)
            elif kind is yaml.AliasEvent:
                try:
                    value, size = anchors[event.anchor]
                except KeyError:
                    raise DocumentError(f"{_where(event.start_mark)}: unknown alias "
                                        f"'*{escape_text(event.anchor, 60)}'") from None
                count += size
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if many:
                    anchors.clear()  # anchors are per document
                elif documents > 1:
                    raise DocumentError(f"{_where(event.start_mark)}: a file holds one "
                                        "document; found a second one")
                continue
            elif kind is yaml.DocumentEndEvent:
                roots.append(root)
                root = None
                continue
            elif kind is yaml.StreamEndEvent or event is None:
                return roots if many else (roots[:1] or [None])
            else:  # stream start
                continue
            if count > max_values:
                raise DocumentError(f"{_where(mark)}: the document holds more "
                                    f"than {max_values} values (alias expansions counted)")
            if value is _MERGE and (not stack or type(stack[-1][0]) is list
                                    or stack[-1][0].has_key):
                raise DocumentError(f"{_where(mark)}: '<<' is YAML's merge key; "
                                    "quote it to make it a string")
            if not stack:
                root = value
                continue
            top = stack[-1][0]
            if type(top) is list:
                top.append(value)
            elif top.has_key:
                if top.merging:
                    _merge_into(top, value, mark)
                else:
                    top.data[top.key] = value
                top.has_key = False
                top.merging = False
            else:
                if value is _MERGE:
                    top.merging = True
                    top.has_key = True
                    continue
                if isinstance(value, (dict, list)):
                    raise DocumentError(f"{_where(mark)}: a mapping or list "
                                        "cannot be a key")
                if value in top.data:
                    raise DocumentError(_duplicate_key(value, top.data, event, mark))
                top.key = value
                top.has_key = True
    finally:
        loader.dispose()


def _written(key: Any) -> str:
    """A key read from YAML as YAML writes it (``true``, ``null``, ``1``)."""
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    return str(key)


def _duplicate_key(key: Any, data: dict[Any, Any], event: Any, mark: Any) -> str:
    """The message of a key equal to one already in a mapping, naming both as written:
    ``1`` and ``true`` (or ``0`` and ``false``, ``1`` and ``1.0``) are different YAML
    values that are one key once read."""
    written = event.value if isinstance(event, yaml.ScalarEvent) else _written(key)
    earlier = _written(next(k for k in data if k == key))
    if written == earlier:
        return (f"{_where(mark)}: duplicate key '{escape_text(written, 60)}' (each key may "
                "appear once in a mapping)")
    return (f"{_where(mark)}: key '{escape_text(written, 60)}' is the same key as "
            f"'{escape_text(earlier, 60)}' once read (each key may appear once in a "
            "mapping; quote keys that are names)")


def dump_data(data: Any, fmt: str) -> str:
    """Serialise plain data as ``json`` or ``yaml`` text."""
    if fmt == "json":
        return json.dumps(data, indent=2, allow_nan=False) + "\n"  # never NaN/Infinity
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
