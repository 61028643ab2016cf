"""The bounded readers shared by every command (``models.documents``): ``read_text`` for
any kind of file, YAML streams of several documents, and ``check_data``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from models.documents import (
    DocumentError,
    check_data,
    load_yaml,
    load_yaml_documents,
    parse_documents,
    read_text,
)
from models.errors import InputError
from models.limits import MAX_ABS_INT

#: The command line in a child process (``python -m solver.cli``, this checkout first).
NPU_PLACE = [sys.executable, "-m", "solver.cli"]
CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")])}


def test_read_text_bounds_every_kind_of_file(tmp_path: Path) -> None:
    small = tmp_path / "a.yaml"
    small.write_text("a: 1\n", encoding="utf-8")
    assert read_text(small, 5) == "a: 1\n"
    with pytest.raises(InputError, match=r"a\.yaml: the file is 5 bytes; the limit is 4 bytes"):
        read_text(small, 4)
    with pytest.raises(InputError, match="/dev/zero: the file is larger than the limit of "
                                         "100 bytes"):
        read_text("/dev/zero", 100)
    with pytest.raises(InputError, match="is a directory"):
        read_text(tmp_path)
    with pytest.raises(InputError, match="cannot read the file: No such file"):
        read_text(tmp_path / "missing.yaml")
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"a: \xe9\n")
    with pytest.raises(InputError, match="cannot read the file as UTF-8"):
        read_text(bad)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")
def test_validate_on_a_named_pipe_without_a_writer_does_not_hang(tmp_path: Path) -> None:
    """``plan``/``validate`` read through the same reader as ``import``."""
    fifo = tmp_path / "scenario.yaml"
    os.mkfifo(fifo)
    assert read_text(fifo) == ""
    done = subprocess.run([*NPU_PLACE, "validate", str(fifo)], capture_output=True,
                          text=True, timeout=120, check=False, env=CHILD_ENV)
    assert done.returncode == 2 and "an empty document" in done.stderr, done.stderr


def test_yaml_streams_match_safe_load_all() -> None:
    text = "a: &x 1\nb: *x\n---\n- [1, 2]\n---\n---\nc: {d: e}\n"
    assert load_yaml_documents(text) == list(yaml.safe_load_all(text))
    assert parse_documents(text, "s") == [d for d in yaml.safe_load_all(text) if d is not None]
    with pytest.raises(DocumentError, match="a file holds one document"):
        load_yaml(text)


def test_anchors_are_per_document_and_the_value_bound_covers_the_stream() -> None:
    with pytest.raises(DocumentError, match="unknown alias '\\*x'"):
        load_yaml_documents("a: &x [1, 2]\n---\nb: *x\n")
    text = "a: &x [1, 2, 3, 4, 5, 6, 7, 8]\nb: [*x, *x, *x]\n"
    assert load_yaml_documents(text, max_values=50) == [yaml.safe_load(text)]
    with pytest.raises(DocumentError, match="more than 20 values"):
        load_yaml_documents(text, max_values=20)
    with pytest.raises(DocumentError, match="more than 30 values"):
        load_yaml_documents(text + "---\n" + text, max_values=30)


def test_parse_documents_names_the_source_and_applies_the_given_depth() -> None:
    nested = "[" * 40 + "]" * 40
    assert parse_documents(nested, "s", max_depth=64)
    with pytest.raises(InputError, match=r"^s: the document is nested deeper than 32"):
        parse_documents(nested, "s")
    with pytest.raises(InputError, match=r"s: line 2, column 4: .*nested deeper than 3"):
        parse_documents("a:\n- [[[1]]]\n", "s", max_depth=3)


@pytest.mark.parametrize(("data", "says"), [
    ({"a": [MAX_ABS_INT + 1]}, "integer 9223372036854775808 is out of range"),
    ([10**5000], "integer of 16610 bits is out of range"),
    ({"a": float("nan")}, "non-finite number nan"),
    ([[[[1]]]], "nested deeper than 3 levels"),
    (list(range(10)), "more than 5 values"),
])
def test_check_data_refuses_what_the_readers_refuse(data: object, says: str) -> None:
    with pytest.raises(DocumentError, match=says):
        check_data(data, max_depth=3, max_values=5 if isinstance(data, list)
                   and len(data) == 10 else None)


def test_check_data_accepts_what_the_readers_accept() -> None:
    check_data({"a": [MAX_ABS_INT, -MAX_ABS_INT, 1.5, "x", None, True]})
