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


def _properties(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """Every ``(object, key, property schema)`` of the schema and its ``$defs``."""
    objects = [("(top level)", schema), *schema.get("$defs", {}).items()]
    return [(name, key, prop) for name, obj in objects
            for key, prop in obj.get("properties", {}).items()]


@pytest.mark.parametrize("kind", ["scenario", "placement"])
def test_every_field_of_the_schema_is_described(kind: str) -> None:
    schema = schema_of(kind)
    properties = _properties(schema)
    assert len(properties) >= (88 if kind == "scenario" else 29)  # every field there is
    bare = [f"{name}.{key}" for name, key, prop in properties
            if len(prop.get("description", "")) < 10]
    assert not bare, f"fields without a description: {bare}"
    assert all(obj.get("description") for obj in schema["$defs"].values())


@pytest.mark.parametrize("kind", ["scenario", "placement"])
def test_every_example_of_the_schema_matches_its_field(kind: str) -> None:
    schema = schema_of(kind)
    checked = 0
    for name, key, prop in _properties(schema):
        for example in prop.get("examples", []):
            # the property's schema, with the definitions its references need
            jsonschema.validate(example, {**prop, "$defs": schema.get("$defs", {})})
            checked += 1
        assert prop.get("examples", [None]), f"{name}.{key}: empty examples"
    assert checked >= (20 if kind == "scenario" else 2)


def test_closed_sets_are_enums() -> None:
    from models.scenario import VNPU_CHIP_KINDS, Policy
    from models.vnpu_rules import TEMPLATES

    defs = schema_of("scenario")["$defs"]
    policies = [p.value for p in Policy]
    assert defs["Job"]["properties"]["policy"]["enum"] == policies
    assert defs["RunningJob"]["properties"]["policy"]["enum"] == policies
    assert defs["VnpuNode"]["properties"]["chip-kind"]["enum"] == list(TEMPLATES)
    assert list(VNPU_CHIP_KINDS) == list(TEMPLATES)
    assert defs["Health"]["enum"] == ["healthy", "subhealthy", "unhealthy"]
    data = read_document(example_path("superpod-850"))
    data["jobs"][0]["policy"] = "chip8-node8-spp"
    with pytest.raises(jsonschema.ValidationError, match="chip8-node8-spp"):
        jsonschema.validate(data, schema_of("scenario"))
