"""Numbers and natural order read from text (``models.numbers``).

``str.isdigit()`` is true for ``²`` and other digit-like characters ``int()`` refuses,
``int()`` accepts every Unicode decimal digit and refuses more than 4,300 digits.  The one
helper reads ASCII digits only, bounded; natural order never converts a digit run.  The
properties draw text from the Unicode digit and number classes (Nd, Nl, No) mixed with
ASCII; the handmade cases go through every door that reads such text.
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.compiled import compile_scenario
from models.io import scenario_from_data
from models.kube.nodes import parse_count
from models.numbers import is_ascii_digits, natural_key, parse_int
from models.validation import InputError, parse_affinity_config
from solver.cli import main
from solver.facade import solve
from tests.models.builders import job, node, scenario, write

#: Text from the Unicode number classes and ASCII letters, digits and signs.
NUMBERISH = st.text(
    alphabet=st.one_of(st.characters(categories=["Nd", "Nl", "No"]),
                       st.sampled_from("0123456789-+_ x.")),
    max_size=30)


@settings(max_examples=300, deadline=None)
@given(text=NUMBERISH)
def test_parse_int_reads_ascii_digits_only(text: str) -> None:
    value = parse_int(text, signed=True)
    ascii_literal = (text.isascii() and text.lstrip("+-").isdigit()
                     and len(text) - len(text.lstrip("+-")) <= 1)
    if value is None:
        assert not ascii_literal or len(text.lstrip("+-")) > 20
    else:
        assert ascii_literal and value == int(text)


def _normal(text: str) -> str:
    """``text`` with the leading zeros of its ASCII digit runs dropped."""
    return re.sub(r"[0-9]+", lambda m: m.group().lstrip("0") or "0", text)


@settings(max_examples=300, deadline=None)
@given(names=st.lists(NUMBERISH, min_size=1, max_size=8))
def test_natural_order_is_total_on_any_unicode_text(names: list[str]) -> None:
    ordered = sorted(names, key=natural_key)  # never raises
    assert sorted(ordered, key=natural_key) == ordered
    for a in names:
        for b in names:
            assert (natural_key(a) == natural_key(b)) == (_normal(a) == _normal(b))


@given(a=st.integers(0, 10**30), b=st.integers(0, 10**30), stem=st.sampled_from(["n", "x-", ""]))
def test_natural_order_of_ascii_runs_is_numeric(a: int, b: int, stem: str) -> None:
    assert (natural_key(f"{stem}{a}") < natural_key(f"{stem}{b}")) == (a < b)


def test_the_int_digit_limit_is_never_reached() -> None:
    nines = "9" * 5000
    assert len(nines) > sys.get_int_max_str_digits()
    assert parse_int(nines) is None
    assert natural_key(f"n{nines}") > natural_key("n10")
    assert is_ascii_digits(nines) and not is_ascii_digits("1²") and not is_ascii_digits("٣")


@pytest.mark.parametrize("text", ["²", "1²", "٣", "1_000", " 7", "+", "", "0x10", "１"])
def test_non_ascii_and_python_only_literals_are_refused(text: str) -> None:
    assert parse_int(text, signed=True) is None


# --------------------------------------------------------------------------- the doors


@pytest.mark.parametrize("name", ["n1²", "x1³", "n¹", "n١٢", "n" + "9" * 250])
def test_node_names_with_any_digits_validate_and_plan(name: str, tmp_path: Path) -> None:
    data = scenario([node(name), node("n1"), node("n10")],
                    [job("a", tasks=3)])
    problem = compile_scenario(scenario_from_data(data, "<test>"))
    answer = solve(problem, engine="greedy", time_limit=10.0)
    assert answer.metrics.placed_jobs == 1
    path = write(tmp_path / "s.json", data)
    out, err = io.StringIO(), io.StringIO()
    assert main(["validate", str(path)], out, err) == 0, err.getvalue()
    assert main(["plan", str(path), "--engine", "greedy"], out, err) == 0, err.getvalue()


@pytest.mark.parametrize("text", ["level²=2", "level١=2", "level1=²", "level1=٢",
                                  "level" + "9" * 5000 + "=2", "level1=" + "9" * 5000])
def test_affinity_config_with_other_digits_is_refused_not_crashed(text: str) -> None:
    levels, errors = parse_affinity_config(text)
    assert levels is None and errors


def test_affinity_config_in_a_scenario_names_the_field(tmp_path: Path) -> None:
    data = scenario([node("n0")], [job("a", "multilevel", affinity_config="level1=١")],
                    {"resource-level-config": {"default": {"level1": {"label": "r"}}}})
    with pytest.raises(InputError) as caught:
        scenario_from_data(json.loads(json.dumps(data)), "<test>")
    assert any("affinity-config" in m for m in caught.value.messages)


@pytest.mark.parametrize("text", ["²", "٣", "1²m", "9" * 5000])
def test_chip_counts_from_text_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a whole number"):
        parse_count(text)


def test_no_other_digit_test_in_the_package() -> None:
    """Every digit test and digit class of the package is this module's: ``isdigit``,
    ``isdecimal``, ``isnumeric`` and the regex class ``\\d`` (Unicode digits) appear
    nowhere else."""
    root = Path(__file__).resolve().parents[2]
    found = []
    for package in ("models", "heuristics", "solver", "benchmarks"):
        for path in sorted((root / package).rglob("*.py")):
            if path.name == "numbers.py" and path.parent.name == "models":
                continue
            text = path.read_text(encoding="utf-8")
            for word in (".isdigit(", ".isdecimal(", ".isnumeric(", "\\d"):
                if word in text:
                    found.append(f"{path.relative_to(root)}: {word}")
    assert found == []
