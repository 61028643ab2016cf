"""A sweep's ``results.csv``: written one row at a time, read back, sorted in grid order.

Also the two questions every reader of the rows asks: did a row fail
(:func:`row_failed`), and what integer does a column hold (:func:`int_column`).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from benchmarks.outputs import open_output
from benchmarks.sweep.grid import Cell
from models.documents import read_text
from models.validation import InputError

#: Statuses of rows that carry no placement.
NO_RESULT = ("skipped", "error", "invalid")


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


def int_column(row: dict[str, str], key: str) -> int | None:
    """The integer in column ``key`` of ``row`` (None when empty or not an integer)."""
    value = row.get(key, "")
    try:
        return int(value) if value not in ("", None) else None
    except ValueError:
        return None


def row_failed(row: dict[str, str]) -> bool:
    """True for a row whose cell raised, gave an invalid answer or failed validation."""
    return row.get("status") in ("error", "invalid") or row.get("valid") == "no"
