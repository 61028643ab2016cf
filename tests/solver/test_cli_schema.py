"""``npu-place schema``: the JSON Schema accepts every bundled example and real answers."""

from __future__ import annotations

import io
import json
from typing import Any

import jsonschema
import pytest

from models.io import read_document
from solver.cli import main
from solver.doors import example_names, example_path


def schema_of(kind: str) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    assert main(["schema", kind], out, err) == 0, err.getvalue()
    data: dict[str, Any] = json.loads(out.getvalue())
    jsonschema.Draft202012Validator.check_schema(data)
    return data


@pytest.mark.parametrize("name", example_names())
def test_every_bundled_example_matches_the_scenario_schema(name: str) -> None:
    jsonschema.validate(read_document(example_path(name)), schema_of("scenario"))


def test_an_unknown_key_and_a_wrong_type_break_the_schema() -> None:
    schema = schema_of("scenario")
    data = read_document(example_path("superpod-850"))
    data["nodez"] = []
    with pytest.raises(jsonschema.ValidationError, match="nodez"):
        jsonschema.validate(data, schema)
    data = read_document(example_path("superpod-850"))
    data["nodes"][0]["npus"] = "eight"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)


def test_a_plan_answer_matches_the_placement_schema() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(["plan", "--engine", "greedy", "--format", "json"], out, err) == 0
    jsonschema.validate(json.loads(out.getvalue()), schema_of("placement"))
