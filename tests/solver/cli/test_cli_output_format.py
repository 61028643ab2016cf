"""``plan`` and ``simulate`` write the format ``--output``'s file name asks for.

Without ``--format`` the suffix decides (``.json``, ``.yaml``/``.yml``, else the table), as
``import`` does; a ``--format`` that contradicts the suffix is refused with exit 2, naming
both options, and nothing is written.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from solver.cli import main
from solver.doors import example_path

EVENTS = example_path("rfc-inference-training").with_name("rfc-inference-training.events.yaml")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("name", "load"), [("p.json", json.loads), ("p.yaml", yaml.safe_load),
                                            ("p.YML", yaml.safe_load)])
def test_plan_output_suffix_picks_the_format(tmp_path: Path, name: str, load: object) -> None:
    target = tmp_path / name
    code, out, err = run("plan", "--example", "ordinary-8npu", "--engine", "greedy",
                         "--output", str(target))
    assert code == 0, err
    assert out == ""
    answer = load(target.read_text(encoding="utf-8"))  # type: ignore[operator]
    assert answer["engine"] == "greedy" and answer["jobs"]
    # and the written answer validates against its scenario
    code, out, err = run("validate", str(example_path("ordinary-8npu")), str(target))
    assert code == 0, out + err


def test_plan_output_with_another_suffix_is_the_table(tmp_path: Path) -> None:
    target = tmp_path / "p.txt"
    assert run("plan", "--example", "ordinary-8npu", "--engine", "greedy", "--output",
               str(target))[0] == 0
    assert target.read_text(encoding="utf-8").startswith("scenario: ")


@pytest.mark.parametrize(("fmt", "name"), [("table", "p.json"), ("yaml", "p.json"),
                                           ("json", "p.yaml")])
def test_plan_refuses_a_format_that_contradicts_the_output_suffix(tmp_path: Path, fmt: str,
                                                                   name: str) -> None:
    target = tmp_path / name
    code, out, err = run("plan", "--example", "ordinary-8npu", "--engine", "greedy",
                         "--format", fmt, "--output", str(target))
    assert code == 2
    assert f"--format {fmt} contradicts --output {target}" in err
    assert not target.exists() and out == ""


def test_plan_format_matching_the_suffix_is_fine(tmp_path: Path) -> None:
    target = tmp_path / "p.json"
    assert run("plan", "--example", "ordinary-8npu", "--engine", "greedy", "--format", "json",
               "--output", str(target))[0] == 0
    assert json.loads(target.read_text(encoding="utf-8"))["engine"] == "greedy"


def test_simulate_output_suffix_picks_the_format(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    code, out, err = run("simulate", str(example_path("rfc-inference-training")), str(EVENTS),
                         "--engine", "greedy", "--output", str(target))
    assert code == 0, err
    assert out == ""
    assert "sessions" in json.loads(target.read_text(encoding="utf-8"))
    code, _out, err = run("simulate", str(example_path("rfc-inference-training")), str(EVENTS),
                         "--engine", "greedy", "--format", "table", "--output",
                         str(tmp_path / "r.yaml"))
    assert code == 2 and "--format table contradicts --output" in err
