"""Reading Kubernetes objects: dump files, directories, stdin, and the diagnostics they raise.

``kubectl get ... -o json`` (or ``-o yaml``) prints either a single object or a ``List``
whose ``items`` are objects; both are accepted, from several files, from directories of
such files, or from ``-`` (stdin).  Every object is handed to a sink one at a time, so
that the importer keeps only the few fields it needs and never the whole dump.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from models.documents import DocumentError, load_json, parse_documents
from models.documents import read_text as read_bounded
from models.errors import InputError
from models.limits import (
    MAX_ABS_INT,
    MAX_DUMP_DEPTH,
    MAX_DUMP_FILE_BYTES,
    MAX_DUMP_TOTAL_BYTES,
    MAX_DUMP_VALUES,
    escape_text,
)

#: File name endings read from a directory (other files there are skipped with a warning).
DUMP_SUFFIXES = (".json", ".yaml", ".yml")
#: At most this many object names are listed in one aggregated warning.
NAMES_PER_WARNING = 12
#: Samples shown in the one line of a kind of warning whose texts differ.
SAMPLES_PER_KIND = 3

_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_NUMBERS = re.compile(r"N(?:(?:, | and )N)+")
_NAMES = re.compile(r"'…'(?:(?:, | and )'…')+")


def warning_kind(text: str) -> str:
    """The kind of a warning: its text with quoted names and numbers (and lists of them)
    blanked, so that ``running ranks 3 sit on ...`` and ``running ranks 0, 5 sit on ...``
    are one kind."""
    kind = _NUMBER.sub("N", _QUOTED.sub("'…'", text))
    return _NAMES.sub("'…'", _NUMBERS.sub("N", kind))


def describe(obj: dict[str, Any], kind: str | None = None) -> str:
    """Name an object the way ``kubectl`` does: ``Kind namespace/name`` (or ``Kind name``).

    Parameters
    ----------
    obj
        A Kubernetes object as plain data.
    kind
        The kind to show when the object itself does not say.
    """
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name") or "<unnamed>"
    namespace = meta.get("namespace")
    shown = kind or (obj.get("kind") if isinstance(obj, dict) else None) or "object"
    return f"{shown} {namespace}/{name}" if namespace else f"{shown} {name}"


@dataclass
class Diagnostics:
    """Errors (malformed objects) and warnings (state the contract cannot express).

    Warnings are aggregated: the same text for several objects is one line naming the
    objects and counting them, and texts of one kind (:func:`warning_kind`: the same
    words, other names or numbers) are one line with their count and a few samples, so
    that a 10,000-node cluster prints one line per kind of condition.
    """

    errors: list[str] = field(default_factory=list)
    _warnings: dict[str, list[str]] = field(default_factory=dict)

    def error(self, obj: str, field_name: str, text: str) -> None:
        """Record a malformed object: names the object and the field."""
        self.errors.append(f"{obj}: field '{field_name}': {text}")

    def warn(self, obj: str, text: str) -> None:
        """Record something upstream reads that the scenario cannot express (or a default)."""
        self._warnings.setdefault(text, []).append(obj)

    @property
    def warnings(self) -> list[str]:
        """Every warning, one line per kind: a single text names its objects (counted when
        several); texts of one kind that differ are counted with a few samples."""
        kinds: dict[str, list[str]] = {}
        for text in self._warnings:
            kinds.setdefault(warning_kind(text), []).append(text)
        lines = []
        for texts in kinds.values():
            if len(texts) == 1:
                lines.append(self._line(texts[0]))
                continue
            pairs = [(obj, text) for text in texts for obj in self._warnings[text]]
            shown = "; ".join(f"{obj}: {text}" for obj, text in pairs[:SAMPLES_PER_KIND])
            more = len(pairs) - SAMPLES_PER_KIND
            tail = f"; ... (+{more} more)" if more > 0 else ""
            lines.append(f"{len(pairs)} warnings of one kind, e.g. {shown}{tail}")
        return lines

    def _line(self, text: str) -> str:
        objects = self._warnings[text]
        if len(objects) == 1:
            return f"{objects[0]}: {text}"
        shown = ", ".join(objects[:NAMES_PER_WARNING])
        more = len(objects) - NAMES_PER_WARNING
        tail = f", ... (+{more} more)" if more > 0 else ""
        return f"{len(objects)} objects ({shown}{tail}): {text}"

    def raise_errors(self) -> None:
        """Raise :class:`InputError` with every error recorded so far, if any."""
        if self.errors:
            raise InputError(list(self.errors))


Sink = Callable[[dict[str, Any], str], None]


def string_map(values: dict[Any, Any], who: str, field_name: str,
               diag: Diagnostics) -> dict[str, str] | None:
    """Labels or annotations as strings, refusing a mapping or list as a value.

    Kubernetes stores strings; a hand-written YAML dump may hold ``rack: 7`` or ``true``,
    which are turned into strings as the scenario loader does.  A mapping or list is not a
    label: an error naming ``who`` and ``field_name.<key>`` (``None`` is returned).
    """
    result: dict[str, str] = {}
    for key, value in values.items():
        if isinstance(value, (dict, list)):
            kind = "mapping" if isinstance(value, dict) else "list"
            diag.error(who, f"{field_name}.{escape_text(str(key), 80)}",
                       f"a value must be a string (or a number or boolean), not a {kind}")
            return None
        result[str(key)] = value if type(value) is str else str(value)
    return result


def _documents(text: str, source: str) -> list[Any]:
    """Every document of one dump, within the dump bounds (JSON first, then YAML)."""
    try:
        return parse_documents(text, source, max_depth=MAX_DUMP_DEPTH,
                               max_values=MAX_DUMP_VALUES)
    except InputError:
        named = _name_bad_integer(text, source)
        if named is not None:
            raise InputError([named]) from None
        raise


class _Huge:
    """An integer literal beyond 64 bits, kept as its digit count to be reported."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _lenient_int(text: str) -> int | _Huge:
    if len(text) > 20:
        return _Huge(len(text.lstrip("-")))
    value = int(text)
    return value if -MAX_ABS_INT <= value <= MAX_ABS_INT else _Huge(len(text.lstrip("-")))


def _name_bad_integer(text: str, source: str) -> str | None:
    """For JSON refused for an out-of-range integer: the message naming its object and field.

    Only called once the bounded reader has refused the text; parses it again (the same
    size, at most :data:`~models.limits.MAX_DUMP_VALUES` containers) keeping such integers
    as markers, then finds the first one.  ``None`` when the text is not JSON or the refusal
    was something else.
    """
    if not text.lstrip().startswith(("{", "[")):
        return None
    if text.count("{") + text.count("[") > MAX_DUMP_VALUES:
        return None
    try:
        data = json.loads(text, parse_int=_lenient_int)
    except (ValueError, RecursionError):
        return None
    try:
        objects = list(iter_objects(data, source))
    except InputError:
        objects = []
    for obj in [*objects, data]:  # the objects first, then the rest of the document
        stack: list[tuple[Any, str]] = [(obj, "")]
        while stack:
            value, where = stack.pop()
            if isinstance(value, _Huge):
                who = describe(obj) if obj is not data else "the document"
                return (f"{source}: {who}: field '{where.lstrip('.') or '(the value)'}': an "
                        f"integer of {value.digits} digits is out of range (at most "
                        f"{MAX_ABS_INT} in absolute value)")
            if isinstance(value, dict):
                stack.extend((v, f"{where}.{escape_text(str(k), 60)}")
                             for k, v in reversed(value.items()))
            elif isinstance(value, list):
                stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(value))))
    return None


def parse_json_field(raw: Any, who: str, field_name: str, diag: Diagnostics) -> Any:
    """Parse JSON embedded in a string (an annotation, a ConfigMap value), within bounds.

    The strict, bounded reader of scenario files (:func:`models.documents.load_json`):
    nesting, value count, integer range, duplicate keys.

    Returns
    -------
    Any
        The parsed value; ``None`` when ``raw`` is not valid (an error naming ``who`` and
        ``field_name`` is recorded in ``diag``).
    """
    if not isinstance(raw, str):
        diag.error(who, field_name, f"expected a string of JSON, got {type(raw).__name__}")
        return None
    try:
        return load_json(raw)
    except json.JSONDecodeError as exc:
        diag.error(who, field_name, f"not valid JSON: {exc.msg} at line {exc.lineno}, "
                   f"column {exc.colno}")
    except DocumentError as exc:
        diag.error(who, field_name, f"refused: {exc}")
    return None


def iter_objects(data: Any, source: str) -> Iterator[dict[str, Any]]:
    """Yield the objects of one parsed document: a ``List``'s items, or the object itself.

    Raises
    ------
    InputError
        When the document is neither a Kubernetes object nor a list of them.
    """
    kind_default: str | None = None
    if isinstance(data, list):  # a bare YAML/JSON sequence of objects
        items: Iterable[Any] = data
    elif isinstance(data, dict) and isinstance(data.get("items"), list) and (
            str(data.get("kind", "List")).endswith("List")):
        items = data["items"]
        list_kind = str(data.get("kind", "List"))
        kind_default = list_kind[:-4] if list_kind != "List" else None
    elif isinstance(data, dict) and "kind" in data:
        items = [data]
    else:
        raise InputError([f"{source}: not a Kubernetes object or List (no 'kind' and no "
                          "'items'); expected the output of 'kubectl get ... -o json'"])
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError([f"{source}: items[{index}]: field 'items[{index}]': expected an "
                              f"object, got {type(item).__name__}"])
        if "kind" not in item and kind_default:
            item = {**item, "kind": kind_default}  # typed lists (NodeList) may omit kind
        yield item


def read_text(path: str, stdin: TextIO | None = None, limit: int | None = None) -> str:
    """Read one dump file, or stdin for ``-``, at most ``limit`` bytes.

    The bounded reader of scenario files (:func:`models.documents.read_text`) with
    ``limit`` default :data:`~models.limits.MAX_DUMP_FILE_BYTES`: a larger regular file is
    refused by its size before it is read, ``/dev/zero`` and pipes one byte past the
    limit, and a named pipe without a writer reads as empty instead of blocking.
    """
    return read_bounded(path, MAX_DUMP_FILE_BYTES if limit is None else limit, stdin=stdin)


def expand_paths(paths: Sequence[str], diagnostics: Diagnostics) -> list[str]:
    """Files named directly, and the dump files of directories (sorted, recursively)."""
    files: list[str] = []
    for path in paths:
        if path == "-":
            files.append(path)
            continue
        p = Path(path)
        if p.is_dir():
            for child in sorted(q for q in p.rglob("*") if q.is_file()):
                if child.name.endswith(DUMP_SUFFIXES):
                    files.append(str(child))
                elif not child.name.startswith("."):
                    diagnostics.warn(str(child), "not a .json/.yaml file: skipped")
        elif p.exists():
            files.append(path)
        else:
            raise InputError([f"{path}: no such file or directory"])
    if not files:
        raise InputError(["no dump files found in " + ", ".join(paths)])
    return files


def read_dumps(paths: Sequence[str], sink: Sink, diagnostics: Diagnostics,
               stdin: TextIO | None = None) -> None:
    """Feed every object of the given files and directories to ``sink(obj, source)``.

    Each file is parsed, its objects are handed over, and its parsed text is released
    before the next file is read: peak memory is the largest file, not the whole dump.
    """
    budget = MAX_DUMP_TOTAL_BYTES
    for path in expand_paths(paths, diagnostics):
        source = "<stdin>" if path == "-" else path
        limit = min(MAX_DUMP_FILE_BYTES, budget)
        try:
            text = read_text(path, stdin, limit)
        except InputError as exc:
            if limit < MAX_DUMP_FILE_BYTES:  # the total ran short, not this file's bound
                raise InputError([f"{m} (the rest of the {MAX_DUMP_TOTAL_BYTES} bytes "
                                  "that all the dump files of one import may hold)"
                                  for m in exc.messages]) from None
            raise
        budget -= len(text.encode("utf-8")) if not text.isascii() else len(text)
        documents = _documents(text, source)
        del text
        if not documents:  # kubectl prints a List even when it finds nothing
            raise InputError([f"{source}: no Kubernetes objects: the file is empty (a named "
                              "pipe is read without waiting for a writer)"])
        for data in documents:
            for obj in iter_objects(data, source):
                sink(obj, source)
