"""Reading Kubernetes objects: dump files, directories, stdin, and the diagnostics they raise.

``kubectl get ... -o json`` (or ``-o yaml``) prints either a single object or a ``List``
whose ``items`` are objects; both are accepted, from several files, from directories of
such files, or from ``-`` (stdin).  Every object is handed to a sink one at a time, so
that the importer keeps only the few fields it needs and never the whole dump.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from models.io import load_yaml
from models.validation import InputError

#: File name endings read from a directory (other files there are skipped with a warning).
DUMP_SUFFIXES = (".json", ".yaml", ".yml")
#: At most this many object names are listed in one aggregated warning.
NAMES_PER_WARNING = 12


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

    Warnings of one kind are aggregated: ``warn(key, obj, text)`` with the same ``key`` and
    ``text`` collects the object names into one line, so that a 10,000-node cluster with a
    common condition prints one line that names the objects and counts them.
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
        """Every warning, one line per distinct text, naming its objects."""
        lines = []
        for text, objects in self._warnings.items():
            if len(objects) == 1:
                lines.append(f"{objects[0]}: {text}")
                continue
            shown = ", ".join(objects[:NAMES_PER_WARNING])
            more = len(objects) - NAMES_PER_WARNING
            tail = f", ... (+{more} more)" if more > 0 else ""
            lines.append(f"{len(objects)} objects ({shown}{tail}): {text}")
        return lines

    def raise_errors(self) -> None:
        """Raise :class:`InputError` with every error recorded so far, if any."""
        if self.errors:
            raise InputError(list(self.errors))


Sink = Callable[[dict[str, Any], str], None]


def _documents(text: str, source: str) -> list[Any]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [json.loads(text)]
        except json.JSONDecodeError as exc:
            try:
                return [load_yaml(text)]
            except yaml.YAMLError:
                raise InputError([f"{source}: malformed JSON at line {exc.lineno}, column "
                                  f"{exc.colno}: {exc.msg}"]) from None
    try:
        docs = list(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError([f"{source}: malformed YAML{where}: {problem}"]) from None
    return [d for d in docs if d is not None]


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


def read_text(path: str, stdin: TextIO | None = None) -> str:
    """Read one dump file, or stdin for ``-``."""
    if path == "-":
        return (stdin or sys.stdin).read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise InputError([f"{path}: cannot read the file: {detail}"]) from None


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
    for path in expand_paths(paths, diagnostics):
        source = "<stdin>" if path == "-" else path
        for data in _documents(read_text(path, stdin), source):
            for obj in iter_objects(data, source):
                sink(obj, source)
