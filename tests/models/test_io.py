"""Loading and saving: YAML/JSON round trips with exactly the contract's key names."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from models import documents
from models.io import (
    DocumentError,
    dump_data,
    format_for_path,
    load_placement,
    load_scenario,
    load_yaml,
    parse_text,
    save_placement,
    save_scenario,
    scenario_from_data,
)
from models.placement import PlacementFile, Status
from models.scenario import Scenario
from models.validation import InputError, derive_shape
from solver.doors import example_path
from tests.models.builders import entry, job, node, scenario, scenario_examples, write

# The contract's key names (scenario-format.md), per object.
SCENARIO_KEYS = {"now", "config", "nodes", "affinity-cache", "jobs", "running",
                 "vnpu-jobs"}  # vnpu-jobs: added by the project (dynamic vNPU)
CONFIG_KEYS = {"super-pod-size", "reserve-nodes", "prefer-previous-node", "resource-level-config"}
LEVEL_KEYS = {"label", "reservedNode"}
NODE_KEYS = {"name", "npus", "free", "health", "super-pod-id", "rack-id", "labels",
             "vnpu"}  # vnpu: added by the project (dynamic vNPU)
VNPU_NODE_KEYS = {"chip-kind", "ai-cores", "ai-cpus", "chips", "unfinished-templates"}
VNPU_CHIP_KEYS = {"id", "free-cores", "free-cpus", "segmented", "dvpp", "unstable"}
VNPU_JOB_KEYS = {"name", "owner-uid", "tasks", "ai-cores", "template", "vnpu-level",
                 "vnpu-dvpp", "priority", "image-size-gb"}
CACHE_KEYS = {"ttl-seconds", "entries"}
ENTRY_KEYS = {"owner-uid", "rank", "node", "updated", "previous"}
JOB_KEYS = {"name", "owner-uid", "policy", "tasks", "npu-per-task", "sp-block", "ra-block",
            "affinity-config", "super-pod-affinity", "ub-memory", "priority", "fault-ranks",
            "image-size-gb"}  # image-size-gb: added by the project (simulate)
PLACEMENT_KEYS = {"engine", "status", "wall-seconds", "objective", "bound", "jobs", "metrics"}
PLACEMENT_JOB_KEYS = {"name", "placed", "reason", "ranks", "blocks", "origin-hits",
                      "origin-candidates"}
METRIC_KEYS = {"placed-jobs", "origin-hits", "origin-candidates", "fault-returns",
               "subhealthy-nodes", "reserve-used", "fragment-score"}

#: The placement example of the contract, verbatim.
CONTRACT_PLACEMENT = """
{
  "engine": "cpsat",
  "status": "optimal",
  "wall-seconds": 0.41,
  "objective": 128512,
  "bound": 128512,
  "jobs": [
    {"name": "train-a", "placed": true, "reason": null,
     "ranks": {"0": "node-003", "1": "node-004"},
     "blocks": {"0": ["node-003", "node-004"]},
     "origin-hits": 30, "origin-candidates": 32}
  ],
  "metrics": {"placed-jobs": 1, "origin-hits": 30, "origin-candidates": 32,
              "fault-returns": 0, "subhealthy-nodes": 0, "reserve-used": 0, "fragment-score": 12}
}
"""


def full_scenario() -> dict[str, Any]:
    """A scenario that sets every field of the contract at least once."""
    return {
        "now": 1764400000,
        "config": {
            "super-pod-size": 48,
            "reserve-nodes": 2,
            "prefer-previous-node": True,
            "resource-level-config": {
                "default": {"level1": {"label": "rack-id", "reservedNode": 1},
                            "level2": {"label": "switch-id", "reservedNode": 0}},
            },
        },
        "nodes": [
            {"name": "node-000", "npus": 8, "free": 8, "health": "healthy", "super-pod-id": 0,
             "rack-id": 0, "labels": {"huawei.com/topotree": "default", "rack-id": "r0",
                                      "switch-id": "s0"}},
            {"name": "node-001", "npus": 8, "free": 3, "health": "subhealthy",
             "super-pod-id": 0, "rack-id": 0, "labels": {}},
        ],
        "affinity-cache": {
            "ttl-seconds": 259200,
            "entries": [{"owner-uid": "9f1c", "rank": 0, "node": "node-000",
                         "updated": 1764390000, "previous": "node-001"}],
        },
        "jobs": [
            {"name": "train-a", "owner-uid": "9f1c", "policy": "chip8-node8-sp", "tasks": 2,
             "npu-per-task": 8, "sp-block": 16, "super-pod-affinity": "soft",
             "ub-memory": False, "priority": 3, "fault-ranks": [1], "image-size-gb": 25.0},
        ],
        "running": [],
    }


def assert_contract_keys(data: dict[str, Any]) -> None:
    """Every key of a dumped scenario is a contract name (kebab-case)."""
    assert set(data) <= SCENARIO_KEYS
    assert set(data.get("config", {})) <= CONFIG_KEYS
    for levels in data.get("config", {}).get("resource-level-config", {}).values():
        for level in levels.values():
            assert set(level) <= LEVEL_KEYS
    for item in data["nodes"]:
        assert set(item) <= NODE_KEYS
        assert set(item.get("vnpu", {})) <= VNPU_NODE_KEYS
        for chip in item.get("vnpu", {}).get("chips", None) or []:
            assert set(chip) <= VNPU_CHIP_KEYS
    for item in data.get("vnpu-jobs", []):
        assert set(item) <= VNPU_JOB_KEYS
    assert set(data.get("affinity-cache", {})) <= CACHE_KEYS
    for row in data.get("affinity-cache", {}).get("entries", []):
        assert set(row) <= ENTRY_KEYS
    for item in data["jobs"]:
        assert set(item) <= JOB_KEYS


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_full_scenario_round_trip(tmp_path: Path, fmt: str) -> None:
    original = load_scenario(write(tmp_path / f"in.{fmt}", full_scenario()))
    out = tmp_path / f"out.{fmt}"
    save_scenario(original, out)
    again = load_scenario(out)
    assert again == original
    dumped = original.to_dict()
    assert_contract_keys(dumped)
    # every key of the input survives with its exact spelling and value
    assert dumped == full_scenario()
    raw = json.loads(out.read_text()) if fmt == "json" else yaml.safe_load(out.read_text())
    assert raw == dumped


@pytest.mark.parametrize("name", scenario_examples())
@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_bundled_examples_round_trip(tmp_path: Path, name: str, fmt: str) -> None:
    original = load_scenario(example_path(name))
    out = tmp_path / f"{name}.{fmt}"
    save_scenario(original, out)
    assert load_scenario(out) == original
    assert_contract_keys(original.to_dict())


def test_there_is_one_example_per_family() -> None:
    families = set()
    for name in scenario_examples():
        scenario_ = load_scenario(example_path(name))
        for item in scenario_.jobs:
            shape, errors = derive_shape(item, scenario_)
            assert shape is not None, errors
            families.add(shape.family.value)
    assert families == {"ordinary", "superpod", "rack", "multilevel"}


def test_defaults_are_not_invented() -> None:
    """Absent optional fields stay absent on output (None is not written)."""
    minimal = scenario([node("n0")], [job("j")], now=None)
    dumped = Scenario.model_validate(minimal).to_dict()
    assert "now" not in dumped
    assert "super-pod-size" not in dumped["config"]
    assert "reserve-nodes" not in dumped["config"]
    assert "owner-uid" not in dumped["jobs"][0]
    assert "super-pod-id" not in dumped["nodes"][0]
    assert Scenario.model_validate(dumped) == Scenario.model_validate(minimal)


def test_resource_level_config_as_upstream_json_string() -> None:
    """init-params stores the tree config as a JSON string with Go's case-insensitive keys."""
    text = json.dumps({"default": {"level1": {"Label": "rack", "ReservedNode": 1},
                                   "level2": {"label": "sw"}}})
    parsed = Scenario.model_validate({"config": {"resource-level-config": text}})
    levels = parsed.config.resource_level_config["default"]
    assert levels["level1"].label == "rack" and levels["level1"].reserved_node == 1
    assert parsed.to_dict()["config"]["resource-level-config"] == {
        "default": {"level1": {"label": "rack", "reservedNode": 1},
                    "level2": {"label": "sw", "reservedNode": 0}}}


def test_node_labels_are_strings() -> None:
    parsed = Scenario.model_validate({"nodes": [node("n0", labels={"rack-id": 7, "on": True})]})
    assert parsed.nodes[0].labels == {"rack-id": "7", "on": "True"}


def test_super_pod_affinity_any_other_value_is_hard() -> None:
    parsed = Scenario.model_validate({"jobs": [job("a", super_pod_affinity="strict"),
                                               job("b", super_pod_affinity="soft")]})
    assert [j.super_pod_affinity.value for j in parsed.jobs] == ["hard", "soft"]


# --------------------------------------------------------------------------- placements


def test_contract_placement_example_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "answer.json"
    path.write_text(CONTRACT_PLACEMENT)
    placement = load_placement(path)
    assert placement.status is Status.OPTIMAL
    assert placement.jobs[0].ranks == {"0": "node-003", "1": "node-004"}
    data = placement.to_dict()
    assert set(data) >= PLACEMENT_KEYS
    assert set(data["jobs"][0]) == PLACEMENT_JOB_KEYS
    assert set(data["metrics"]) >= METRIC_KEYS
    original = json.loads(CONTRACT_PLACEMENT)
    for key in PLACEMENT_KEYS - {"metrics"}:
        assert data[key] == original[key]
    for key in METRIC_KEYS:
        assert data["metrics"][key] == original["metrics"][key]
    for fmt in ("json", "yaml"):
        out = tmp_path / f"again.{fmt}"
        save_placement(placement, out)
        assert load_placement(out) == placement
        raw = json.loads(out.read_text()) if fmt == "json" else yaml.safe_load(out.read_text())
        assert raw == data


def test_placement_of_unplaced_job_keeps_empty_ranks() -> None:
    placement = PlacementFile.model_validate(
        {"jobs": [{"name": "a", "placed": False, "reason": "no room", "ranks": {}}]})
    data = placement.to_dict()
    assert data["jobs"][0]["ranks"] == {}
    assert data["jobs"][0]["reason"] == "no room"
    assert "notes" not in data  # only written when there are notes
    placement.notes.append("hello")
    assert placement.to_dict()["notes"] == ["hello"]


def test_placement_unknown_field_names_job_and_field(tmp_path: Path) -> None:
    path = write(tmp_path / "p.json", {"jobs": [{"name": "a", "placed": True, "rank": {}}]})
    with pytest.raises(InputError) as info:
        load_placement(path)
    assert info.value.messages == [
        f"{path}: job 'a' (jobs[0]): field 'rank': unknown field; did you mean 'ranks'?"]


@pytest.mark.parametrize(("data", "message"), [
    ({"nodez": []}, "nodez: field 'nodez': unknown field; did you mean 'nodes'?"),
    ({"config": {"reserve-node": 1}},
     "config: field 'reserve-node': unknown field; did you mean 'reserve-nodes'?"),
    ({"nodes": [{"name": "a", "npus": 8, "free": 8, "helth": "healthy"}]},
     "node 'a' (nodes[0]): field 'helth': unknown field; did you mean 'health'?"),
    ({"jobs": [{"name": "j", "policy": "chip8-node8", "tasks": 1, "npu-per-task": 8,
                "priorty": 1}]},
     "job 'j' (jobs[0]): field 'priorty': unknown field; did you mean 'priority'?"),
    ({"affinity-cache": {"entries": [{"owner-uid": "u", "rank": 0, "node": "a",
                                      "update": 5}]}},
     "affinity-cache entries[0]: field 'update': unknown field; did you mean 'updated'?"),
    ({"config": {"resource-level-config": {"default": {"level1": {"label": "x",
                                                                   "reserved": 1}}}}},
     "config: field 'resource-level-config.default.level1.reserved': unknown field; did you "
     "mean 'reservedNode'?"),
    ({"nodes": [{"name": "a", "npus": 8, "free": 8,
                 "vnpu": {"chip-kind": "Ascend310P", "chipz": []}}]},
     "node 'a' (nodes[0]): field 'vnpu.chipz': unknown field; did you mean 'chips'?"),
    ({"running": [{"name": "r", "xyzzy": 1}]},
     "running job 'r' (running[0]): field 'xyzzy': unknown field; the fields here are name, "
     "owner-uid, policy, "),
])
def test_an_unknown_scenario_key_names_the_closest_known_key(data: dict[str, Any],
                                                              message: str) -> None:
    with pytest.raises(InputError) as info:
        scenario_from_data(data, "s.yaml")
    assert any(m.startswith(f"s.yaml: {message}") for m in info.value.messages), \
        info.value.messages


def test_placement_bad_status(tmp_path: Path) -> None:
    path = write(tmp_path / "p.yaml", {"status": "great", "jobs": []})
    with pytest.raises(InputError, match=r"status: field 'status'.*'optimal', 'feasible' or"):
        load_placement(path)


# --------------------------------------------------------------------------- text formats


def test_format_for_path() -> None:
    assert format_for_path("a.JSON") == "json"
    assert format_for_path("a.yml") == "yaml"
    assert format_for_path("a.yaml") == "yaml"
    assert format_for_path("a.txt") == "yaml"
    assert format_for_path("a.txt", "json") == "json"
    with pytest.raises(ValueError):
        dump_data({}, "xml")


def test_json_text_may_have_yaml_suffix(tmp_path: Path) -> None:
    data = scenario([node("n0")], [job("j")], cache=[entry("o", 0, "n0")])
    path = tmp_path / "really-json.yaml"
    path.write_text("  \n" + json.dumps(data))
    assert load_scenario(path) == Scenario.model_validate(data)


TRICKY_YAML = [
    "a: 1\nb: 0x1F\nc: 0o17\nd: 1_000\ne: -3\nf: +4\n",
    "a: 1.5\nd: 1e3\ne: 6.8523015e+5\nf: 190:20:30\n",
    "a: yes\nb: No\nc: on\nd: OFF\ne: true\nf: False\ng: y\n",
    "a: ~\nb: null\nc:\nd: ''\ne: \"\"\nf: Null\n",
    "a: 2001-12-14\nb: 2001-12-14t21:59:43.10-05:00\n",
    "a: '1'\nb: \"2\"\nc: !!str 3\nd: !!int '4'\n",
    "base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\nlist: [*b, *b]\n",
    "- [1, [2, [3, {x: [4]}]]]\n- {}\n- []\n",
    "key with spaces: value: with colon\n'quoted key': |\n  literal\n  block\nf: >\n  folded\n",
    "%YAML 1.1\n---\na: 1\n...\n",
    "",
    "# comment only\n",
    "plain scalar\n",
    "a: !!binary aGVsbG8=\n",
    "nodes:\n- name: node-1\n  labels: {huawei.com/topotree: default, 'rack': 007}\n",
]


#: Documents ``safe_load`` reads that the loader refuses on purpose (``models.limits``).
REFUSED_YAML = {
    "a: 1.5\nb: .inf\n": "line 2, column 4: non-finite number '.inf'",
    "a: -.Inf\n": "non-finite number",
    "a: .nan\n": "non-finite number",
    "a: 1.0e+999\n": "non-finite number",
    "a: 1\na: 2\n": "line 2, column 1: duplicate key 'a'",
    # different YAML values that are one key once read: both named as written
    "images: {1: 5, true: 6}\n": "key 'true' is the same key as '1' once read",
    "0: x\nfalse: y\n": "line 2, column 1: key 'false' is the same key as '0' once read",
    "1: x\n1.0: y\n": "key '1.0' is the same key as '1' once read",
    "a: !!set {x, y}\n": "the tag 'tag:yaml.org,2002:set' is not supported",
    "a: !!omap [x: 1]\n": "the tag 'tag:yaml.org,2002:omap' is not supported",
    "a: =\n": "the value '=' is not supported",
    "a: 1\n---\nb: 2\n": "a file holds one document",
    "a: 99999999999999999999\n": "is out of range",
    "a: !!python/object:os.system x\n": "is not supported",
    "? [1, 2]\n: complex\n": "line 1, column 3: a mapping or list cannot be a key",
    "? {a: 1}\n: complex\n": "a mapping or list cannot be a key",
    "a: <<\n": "'<<' is YAML's merge key",
}


@pytest.mark.parametrize("pure_python", [False, True])
@pytest.mark.parametrize("text", sorted(REFUSED_YAML))
def test_yaml_refusals(text: str, pure_python: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Infinite numbers, duplicate keys, exotic tags and several documents are refused."""
    if pure_python:
        monkeypatch.setattr(documents, "_YamlLoader", yaml.SafeLoader)
    with pytest.raises(DocumentError, match=re.escape(REFUSED_YAML[text])):
        load_yaml(text)


@pytest.mark.parametrize("pure_python", [False, True])
@pytest.mark.parametrize("text", TRICKY_YAML)
def test_fast_yaml_equals_safe_load(text: str, pure_python: bool,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast YAML path gives exactly what ``yaml.safe_load`` gives, or the same error,
    with libyaml and without it (pure-Python PyYAML)."""
    if pure_python:
        monkeypatch.setattr(documents, "_YamlLoader", yaml.SafeLoader)
    try:
        expected = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        with pytest.raises(type(exc)):
            load_yaml(text)
        return
    assert load_yaml(text) == expected


@pytest.mark.parametrize("text", ["a: [1, 2\n", "a: 'x\n", "\tb: 1\n"])
def test_fast_yaml_errors_match(text: str) -> None:
    """Same error, position and text as the loader used before (libyaml when present)."""
    with pytest.raises(yaml.YAMLError) as expected:
        yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    with pytest.raises(yaml.YAMLError) as actual:
        load_yaml(text)
    assert type(actual.value) is type(expected.value)
    assert str(actual.value) == str(expected.value)


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**12, 10**12),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
    st.sampled_from(["yes", "no", "on", "~", "0x10", "1_0", "007", "1e3", "2001-12-14", "<<",
                     "=", "-", "*a", "&a", "!t", "'", '"', "#", ": ", "- x", "{", "["]),
)
_data = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(st.text(max_size=6), st.integers(0, 9)),
                                            inner, max_size=4)),
    max_leaves=20,
)


@given(_data, st.sampled_from([None, False, True]))
def test_fast_yaml_equals_safe_load_on_random_documents(data: Any, flow: bool | None) -> None:
    text = yaml.safe_dump(data, default_flow_style=flow, allow_unicode=True)
    assert load_yaml(text) == yaml.safe_load(text)


def test_parse_text_names_the_source() -> None:
    with pytest.raises(InputError) as info:
        parse_text("a: [", "my-file.yaml")
    assert info.value.messages[0].startswith("my-file.yaml: malformed YAML at line")


def test_yaml_flow_document_starting_with_a_brace(tmp_path: Path) -> None:
    """Regression: ``{now: 1, nodes: [...]}`` is YAML, not malformed JSON."""
    path = tmp_path / "flow.yaml"
    path.write_text("{now: 1764400000, nodes: [{name: n0, npus: 8, free: 8}], "
                    "jobs: [{name: a, policy: chip8-node8, tasks: 1, npu-per-task: 8}]}\n")
    loaded = load_scenario(path)
    assert loaded.nodes[0].name == "n0" and loaded.jobs[0].name == "a"
