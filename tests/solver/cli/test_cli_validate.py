"""``validate`` lists every error in one run, and answers JSON/YAML in the service's shape.

Before, the field errors (an unknown key, ``tasks: 0``) used to hide the cross-field
errors (``reserve-nodes: -1``, ``free: 99``) until they were fixed; ``--format json`` on
an invalid scenario printed nothing on stdout; a kubectl dump or a scenario given where
another document belongs gave a list of unknown-field errors.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from models.io import document_kind, scenario_from_data
from models.validation import InputError
from solver.cli import main
from solver.doors import example_path, validate_data
from solver.service.parsing import run_validate
from tests.models.builders import entry, job, node, scenario, write


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def two_round_scenario() -> dict[str, Any]:
    """Field errors (unknown keys, tasks 0) and cross-field errors (reserve, free) at once."""
    data = scenario([node("n0", free=99), node("n1"), node("n2")],
                    [job("a", tasks=0), job("b", priorty=3), job("c")],
                    config={"reserve-nodes": -1, "colour": "red"},
                    cache=[entry("u", 0, "n1")])
    data["running"] = [{"name": "r", "policy": "chip8-node8", "ranks": {0: "n2"}}]
    return data


FIELD_ERRORS = ("config: field 'colour': unknown field",
                "job 'a' (jobs[0]): field 'tasks': Input should be greater than 0",
                "job 'b' (jobs[1]): field 'priorty': unknown field")
CROSS_ERRORS = ("config: field 'reserve-nodes': reserve-nodes(-1) is negative",
                "node 'n0': field 'free': free 99 must be between 0 and npus (8)",
                "node 'n2': field 'free': free 8 plus the 8 NPUs of running jobs exceeds npus 8")


def test_validate_lists_field_and_cross_field_errors_in_one_run(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.yaml", two_round_scenario())
    code, out, err = run("validate", str(bad))
    assert code == 2 and out == ""
    for text in FIELD_ERRORS + CROSS_ERRORS:
        assert f"error: {bad}: {text}" in err, text
    assert err.splitlines()[-1] == "6 input error(s); the input is not valid"


def test_plan_lists_every_error_too(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.yaml", two_round_scenario())
    code, _, err = run("plan", str(bad), "--engine", "greedy")
    assert code == 2
    assert all(text in err for text in FIELD_ERRORS + CROSS_ERRORS)
    assert err.splitlines()[-1] == "6 input error(s); nothing was placed"


def test_best_effort_errors_do_not_repeat_what_a_dropped_item_causes(tmp_path: Path) -> None:
    # node n1 is broken (npus 0): the cache entry naming it is not "a missing node" as well
    data = scenario([node("n0"), {"name": "n1", "npus": 0, "free": 0}], [job("a")],
                    config={"reserve-nodes": -2}, cache=[entry("u", 0, "n1")])
    with pytest.raises(InputError) as info:
        scenario_from_data(data, "s.yaml")
    messages = info.value.messages
    assert any("node 'n1' (nodes[1]): field 'npus'" in m for m in messages)
    assert any("reserve-nodes(-2) is negative" in m for m in messages)
    assert not any("does not exist" in m for m in messages), messages
    assert len(messages) == 2


def test_a_valid_scenario_still_passes() -> None:
    assert validate_data(yaml.safe_load(example_path("superpod-850").read_text())).valid


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_validate_structured_answer_on_an_invalid_scenario(tmp_path: Path, fmt: str) -> None:
    bad = write(tmp_path / "bad.yaml", two_round_scenario())
    code, out, err = run("validate", str(bad), "--format", fmt)
    assert code == 2
    answer = json.loads(out) if fmt == "json" else yaml.safe_load(out)
    assert answer["valid"] is False
    assert len(answer["errors"]) == 6
    assert set(answer) == {"valid", "errors", "errors-total", "violations",
                           "violations-total", "metrics", "nodes", "jobs"}
    assert answer["errors-total"] == 6 and answer["violations-total"] == 0
    assert "6 input error(s)" in err


def test_validate_json_is_the_service_answer(tmp_path: Path) -> None:
    data = two_round_scenario()
    bad = write(tmp_path / "bad.json", data)
    _, out, _ = run("validate", str(bad), "--format", "json")
    service = run_validate(json.dumps({"scenario": data}).encode()).model_dump(by_alias=True)
    cli = json.loads(out)
    assert set(cli) == set(service)
    assert [e.replace(str(bad), "scenario") for e in cli["errors"]] == service["errors"]
    # and a valid scenario without a placement: the same object, valid
    code, out, _ = run("validate", str(example_path("ordinary-8npu")), "--format", "json")
    answer = json.loads(out)
    assert code == 0 and answer["valid"] is True and answer["errors"] == []
    assert answer["nodes"] > 0 and answer["jobs"] > 0


def test_validate_json_includes_a_broken_placement_file(tmp_path: Path) -> None:
    answer = tmp_path / "answer.json"
    answer.write_text('{"jobs": [', encoding="utf-8")
    code, out, _ = run("validate", str(example_path("ordinary-8npu")), str(answer),
                       "--format", "json")
    assert code == 2
    errors = json.loads(out)["errors"]
    assert len(errors) == 1 and errors[0].startswith(f"{answer}: malformed JSON")


KUBECTL_LIST = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0"}}]}


@pytest.mark.parametrize("command", [("plan", "--engine", "greedy"), ("validate",)])
def test_a_kubectl_dump_points_to_import(tmp_path: Path, command: tuple[str, ...]) -> None:
    dump = write(tmp_path / "nodes.json", KUBECTL_LIST)
    code, _, err = run(command[0], str(dump), *command[1:])
    assert code == 2
    assert "this is a Kubernetes object dump (kind: List, apiVersion: v1)" in err
    assert f"npu-place import {dump}" in err
    assert "apiVersion" not in err.replace("apiVersion: v1", "")  # no unknown-field list
    assert err.splitlines()[-1].startswith("1 input error(s)")


def test_a_scenario_given_as_placement_is_named(tmp_path: Path) -> None:
    path = example_path("superpod-850")
    code, out, err = run("validate", str(path), str(path))
    assert code == 2 and out == ""
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1
    assert f"{path}: this is a scenario (it has " in lines[0]
    assert "not a placement" in lines[0]


def test_a_placement_given_as_scenario_is_named(tmp_path: Path) -> None:
    answer = tmp_path / "p.json"
    assert run("plan", "--example", "ordinary-8npu", "--engine", "greedy", "--output",
               str(answer))[0] == 0
    code, _, err = run("plan", str(answer))
    assert code == 2 and "this is a placement (an engine's answer" in err


def test_document_kind() -> None:
    assert document_kind(KUBECTL_LIST) == "kubernetes"
    assert document_kind({"nodes": [], "jobs": []}) == "scenario"
    assert document_kind({"engine": "greedy", "jobs": []}) == "placement"
    assert document_kind({"jobs": []}) is None  # ambiguous: both have jobs
    assert document_kind([1, 2]) is None
