"""Input bounds: hostile documents are refused in bounded time and memory.

Every hostile file is generated small in ``tmp_path``; the bounds that would need a big
file to reach are lowered with ``monkeypatch`` instead.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from models import documents
from models.io import (
    DocumentError,
    load_json,
    load_placement,
    load_scenario,
    load_yaml,
    parse_text,
    scenario_from_data,
)
from models.limits import (
    MAX_DEPTH,
    MAX_JOBS,
    MAX_TASKS,
    LimitError,
    check_deterministic_time,
    check_seed,
    check_text,
    check_time_limit,
    check_workers,
    escape_text,
)
from models.validation import InputError
from tests.models.builders import job, node, scenario, write

NOW = 1764400000


def base() -> dict[str, Any]:
    """One node, one job: the smallest valid scenario."""
    return {"now": NOW, **scenario([node("n0")], [job("a")])}


def refused(path: Path, *words: str) -> str:
    """Load ``path``; assert one refusal naming the file and ``words``; return it."""
    with pytest.raises(InputError) as info:
        load_scenario(path)
    messages = info.value.messages
    assert all(m.startswith(f"{path}: ") for m in messages), messages
    text = "\n".join(messages)
    for word in words:
        assert word in text, (word, messages)
    return text


def billion_laughs(levels: int = 10) -> str:
    """A scenario whose first node carries a YAML alias bomb as label values."""
    lines = ["now: 1764400000", "nodes:", "- name: n0", "  npus: 8", "  free: 8",
             "  labels:", "    l0: &b0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        lines.append(f"    l{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * 9) + "]")
    lines.append("jobs: []")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- size


@pytest.mark.parametrize("pure_python", [False, True])
def test_alias_bomb_under_a_label_is_refused(tmp_path: Path, pure_python: bool,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: no answer after 120 s, 5.5 GB and growing.  Now: refused at once."""
    if pure_python:
        monkeypatch.setattr(documents, "_YamlLoader", yaml.SafeLoader)
    path = tmp_path / "bomb.yaml"
    path.write_text(billion_laughs())
    refused(path, "line 13", "more than 4000000 values (alias expansions counted)")


def test_aliases_and_merge_keys_within_bounds_still_load(tmp_path: Path) -> None:
    text = ("now: 1764400000\n"
            "nodes:\n"
            "- &n {name: n0, npus: 8, free: 8, labels: &l {rack: r0, sw: s0}}\n"
            "- {<<: *n, name: n1, labels: *l}\n"
            "jobs: [{name: a, policy: chip8-node8, tasks: 1, npu-per-task: 8}]\n")
    assert load_yaml(text) == yaml.safe_load(text)
    loaded = load_scenario(write_text(tmp_path / "anchors.yaml", text))
    assert [n.name for n in loaded.nodes] == ["n0", "n1"]
    assert loaded.nodes[1].labels == {"rack": "r0", "sw": "s0"}


def write_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_dev_zero_is_refused_after_the_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: 10.6 GB, then "internal error: MemoryError".  Now: one read past the limit."""
    monkeypatch.setattr(documents, "MAX_FILE_BYTES", 4096)
    with pytest.raises(InputError) as info:
        load_scenario("/dev/zero")
    assert info.value.messages == ["/dev/zero: the file is larger than the limit of 4096 bytes"]


def test_too_many_values_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents, "MAX_VALUES", 50)
    data = {"now": NOW, **scenario([node(f"n{i}") for i in range(20)], [job("a")])}
    refused(write(tmp_path / "many.yaml", data), "more than 50 values")
    refused(write(tmp_path / "many.json", data), "more than 50 values")


def test_json_containers_are_counted_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents, "MAX_VALUES", 10)
    with pytest.raises(DocumentError, match="up to 20 mappings and lists"):
        load_json("[" + ",".join(["{}"] * 19) + "]")


def test_more_jobs_than_the_limit_are_refused() -> None:
    data = base()
    data["jobs"] = [job(f"j{i}") for i in range(MAX_JOBS + 1)]
    with pytest.raises(InputError) as info:
        scenario_from_data(data, "many-jobs.yaml")
    (message,) = info.value.messages
    assert f"field 'jobs': List should have at most {MAX_JOBS} items" in message


# --------------------------------------------------------------------------- depth


@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_a_document_nested_100k_deep_is_refused(tmp_path: Path, suffix: str) -> None:
    """Before: JSON gave exit 1 "internal error: RecursionError".  Now both refuse."""
    path = tmp_path / f"deep.{suffix}"
    path.write_text("[" * 100_000 + "]" * 100_000)
    text = refused(path)
    assert "nested deeper than" in text or "maximum nesting depth" in text


@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_nesting_is_bounded_at_max_depth(tmp_path: Path, suffix: str) -> None:
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_text(ok, "ok", "json" if suffix == "json" else None) is not None
    deep = tmp_path / f"deep.{suffix}"
    deep.write_text("{\"a\": " * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1))
    refused(deep, f"nested deeper than {MAX_DEPTH} levels")


def test_resource_level_config_json_string_is_bounded_too(tmp_path: Path) -> None:
    data = base()
    data["config"] = {"resource-level-config": "[" * 5000 + "]" * 5000}
    refused(write(tmp_path / "cfg.yaml", data), "config: field 'resource-level-config'",
            "nested deeper than")


# --------------------------------------------------------------------------- strictness


def test_invalid_json_is_not_accepted_through_the_yaml_fallback(tmp_path: Path) -> None:
    """Before: a trailing comma in a .json file was read by the YAML parser."""
    text = json.dumps(base())[:-1] + ",}"
    refused(write_text(tmp_path / "trailing.json", text), "malformed JSON at line 1")
    # the same text is valid YAML (flow style), and a .yaml file is YAML
    assert load_scenario(write_text(tmp_path / "trailing.yaml", text)).jobs[0].name == "a"


@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_duplicate_keys_are_refused(tmp_path: Path, suffix: str) -> None:
    """Before: a second ``jobs: []`` silently dropped the jobs."""
    if suffix == "yaml":
        text = ("now: 1764400000\nnodes: [{name: n0, npus: 8, free: 8}]\n"
                "jobs: [{name: a, policy: chip8-node8, tasks: 1, npu-per-task: 8}]\njobs: []\n")
        words = ["line 4, column 1: duplicate key 'jobs'"]
    else:
        text = json.dumps(base())[:-1] + ', "jobs": []}'
        words = ["duplicate key 'jobs' in a JSON object"]
    refused(write_text(tmp_path / f"dup.{suffix}", text), *words)


@pytest.mark.parametrize("value", [{"a": 1}, ["a", "b"]])
def test_a_label_value_must_be_a_scalar(tmp_path: Path, value: Any) -> None:
    """Before: a nested mapping was silently turned into its repr."""
    data = base()
    data["nodes"][0]["labels"] = {"rack": value}
    kind = "mapping" if isinstance(value, dict) else "list"
    refused(write(tmp_path / "label.yaml", data), "node 'n0' (nodes[0])", "field 'labels'",
            f"label 'rack': a label value must be a string (or a number or boolean), not a "
            f"{kind}")


def put(data: dict[str, Any], where: str, value: str) -> None:
    """Place ``value`` at one name-like field of ``data`` (see NAME_FIELDS)."""
    if where == "node":
        data["nodes"][0]["name"] = value
    elif where == "job":
        data["jobs"][0]["name"] = value
    elif where == "owner":
        data["jobs"][0]["owner-uid"] = value
    elif where == "label-key":
        data["nodes"][0]["labels"] = {value: "x"}
    elif where == "label-value":
        data["nodes"][0]["labels"] = {"rack": value}
    elif where == "running":
        data["running"] = [{"name": value}]
    elif where == "cache-node":
        data["affinity-cache"] = {"entries": [{"owner-uid": "o", "rank": 0, "node": value}]}


NAME_FIELDS = ["node", "job", "owner", "label-key", "label-value", "running", "cache-node"]


@pytest.mark.parametrize("where", NAME_FIELDS)
@pytest.mark.parametrize("bad", ["n\x1b[31mRED\x1b[0m", "a\nb", "x\u202ey", "nul\x00"])
def test_control_characters_in_names_are_refused(tmp_path: Path, where: str, bad: str) -> None:
    """Before: ANSI escapes in names were echoed raw into the table."""
    data = base()
    put(data, where, bad)
    text = refused(write(tmp_path / "names.json", data), "control or formatting character")
    assert not any(c in text for c in "\x1b\x00\u202e")  # the message itself is escaped
    assert "\n" not in text


def test_names_longer_than_the_limit_are_refused(tmp_path: Path) -> None:
    data = base()
    data["jobs"][0]["name"] = "j" * 254
    refused(write(tmp_path / "long.yaml", data), "field 'name'",
            "is 254 characters long; the limit is 253")


@pytest.mark.parametrize(("suffix", "text", "words"), [
    ("yaml", "image-size-gb: .inf", "non-finite number '.inf'"),
    ("yaml", "image-size-gb: .NaN", "non-finite number"),
    ("yaml", "priority: 123456789012345678901234567890", "out of range"),
    ("json", "\"image-size-gb\": Infinity", "non-finite number Infinity"),
    ("json", "\"image-size-gb\": NaN", "non-finite number NaN"),
    ("json", "\"image-size-gb\": 1e400", "number 1e400 is out of range"),
    ("json", "\"priority\": 1" + "0" * 5000, "is out of range"),
])
def test_non_finite_and_huge_numbers_are_refused(tmp_path: Path, suffix: str, text: str,
                                                  words: str) -> None:
    if suffix == "yaml":
        doc = ("now: 1764400000\nnodes: [{name: n0, npus: 8, free: 8}]\njobs:\n"
               f"- {{name: a, policy: chip8-node8, tasks: 1, npu-per-task: 8, {text}}}\n")
    else:
        doc = ('{"nodes": [{"name": "n0", "npus": 8, "free": 8}], "jobs": [{"name": "a", '
               f'"policy": "chip8-node8", "tasks": 1, "npu-per-task": 8, {text}}}]}}')
    refused(write_text(tmp_path / f"num.{suffix}", doc), words)


def test_image_size_is_bounded() -> None:
    data = base()
    data["jobs"][0]["image-size-gb"] = 1e300
    with pytest.raises(InputError, match="image-size-gb"):
        scenario_from_data(data, "s.yaml")


# --------------------------------------------------------------------------- error counts


def test_a_million_fault_ranks_are_one_message(tmp_path: Path) -> None:
    """Before: 999,999 error lines (123 MB on stderr)."""
    data = base()
    data["jobs"][0]["fault-ranks"] = list(range(1, 1_000_001))
    text = refused(write(tmp_path / "faults.json", data), "field 'fault-ranks'",
                   f"at most {MAX_TASKS} items")
    assert text.count("\n") == 0


def test_fault_ranks_out_of_range_are_summarised(tmp_path: Path) -> None:
    data = base()
    data["jobs"][0]["tasks"] = 2
    data["jobs"][0]["fault-ranks"] = list(range(2, 1002))
    with pytest.raises(InputError) as info:
        load_scenario(write(tmp_path / "faults.json", data))
    (message,) = info.value.messages
    assert "1000 fault ranks do not exist (ranks are 0..1): 2, 3, 4" in message
    assert message.endswith("11, ... (990 more)") and "[" not in message


# --------------------------------------------------------------------------- other files


@pytest.mark.parametrize(("text", "words"), [
    ('{"engine": "greedy", "wall-seconds": NaN, "jobs": []}', "non-finite number NaN"),
    ('{"jobs": [{"name": "a\\u001b[2J", "placed": false}]}', "control or formatting"),
    ("[" * 100_000, "nested deeper than"),
    ('{"jobs": [], "jobs": []}', "duplicate key 'jobs'"),
])
def test_placement_files_go_through_the_same_bounds(tmp_path: Path, text: str,
                                                    words: str) -> None:
    path = write_text(tmp_path / "placement.json", text)
    with pytest.raises(InputError) as info:
        load_placement(path)
    assert info.value.messages[0].startswith(f"{path}: ")
    assert words in info.value.messages[0]


# --------------------------------------------------------------------------- checks


def test_numeric_checks() -> None:
    assert check_time_limit(0.5) == 0.5
    assert check_seed(2**31 - 1) == 2**31 - 1 and check_seed(0) == 0
    assert check_workers(64) == 64
    assert check_deterministic_time(1.0) == 1.0
    for bad in (float("inf"), float("nan"), 1e300, 0.0, -1.0):
        with pytest.raises(LimitError, match="--time-limit"):
            check_time_limit(bad)
        with pytest.raises(LimitError, match="--deterministic-time"):
            check_deterministic_time(bad)
    for seed in (2**31, -1):
        with pytest.raises(LimitError, match="32-bit"):
            check_seed(seed)
    for workers in (0, 65, 100_000):
        with pytest.raises(LimitError, match="between 1 and 64"):
            check_workers(workers)


def test_text_checks_and_escaping() -> None:
    assert check_text("node-1") == "node-1"
    with pytest.raises(LimitError, match=r"\\x1b at position 1"):
        check_text("a\x1b[0m")
    assert escape_text("a\x1b[0m\u202e") == "a\\x1b[0m\\u202e"
    assert escape_text("x" * 300, 10) == "x" * 10 + "..."
