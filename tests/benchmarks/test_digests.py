"""The behaviour-identity digests (benchmarks.digests): stable on the same code, and they
notice a changed answer and a changed model."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import digests
from benchmarks.digests import EXAMPLES, case_digests, compare
from models.io import load_scenario


def test_digests_repeat_and_notice_changes() -> None:
    scenario = load_scenario(EXAMPLES / "ordinary-8npu.yaml")
    first = {"case": case_digests(scenario, 0.2)}
    again = {"case": case_digests(scenario, 0.2)}
    assert compare(first, again) == []
    assert first["case"]["greedy"]["protos"] == []
    assert len(first["case"]["cpsat"]["protos"]) >= 1
    changed = copy.deepcopy(first)
    changed["case"]["auto"]["answer"] = "0" * 16
    changed["case"]["cpsat"]["protos"][0] = "f" * 16
    lines = compare(first, changed)
    assert any("auto: answer" in line for line in lines)
    assert any("cpsat: protos differ" in line for line in lines)


def test_a_different_model_gives_different_proto_digests() -> None:
    scenario = load_scenario(EXAMPLES / "ordinary-8npu.yaml")
    short = case_digests(scenario, 0.2)
    nodes = [scenario.nodes[0].model_copy(update={"free": 4}), *scenario.nodes[1:]]
    smaller = scenario.model_copy(update={"nodes": nodes})
    other = case_digests(smaller, 0.2)
    assert short["cpsat"]["protos"] != other["cpsat"]["protos"]


def _no_case_runs(monkeypatch: Any) -> None:
    def refuse(which: str) -> Any:
        raise AssertionError("a case ran before the inputs were checked")

    monkeypatch.setattr(digests, "cases", refuse)


@pytest.mark.parametrize(("content", "text"), [
    (None, "No such file"),
    ("[1, 2]", "expected an object of cases"),
    ("{not json", "not JSON"),
    ('{"example:a": []}', "case 'example:a': expected an object of engines"),
    ('{"example:a": {"greedy": {}}}', "engine 'greedy', field 'engine'"),
])
def test_a_bad_compare_file_is_refused_before_any_case_runs(
        tmp_path: Path, monkeypatch: Any, capsys: Any, content: str | None, text: str) -> None:
    _no_case_runs(monkeypatch)
    path = tmp_path / "before.json"
    if content is not None:
        path.write_text(content)
    assert digests.main(["--compare", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and text in err and "Traceback" not in err


def test_a_bad_out_or_budget_is_refused_before_any_case_runs(
        tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    _no_case_runs(monkeypatch)
    assert digests.main(["--out", str(tmp_path)]) == 2
    assert "a folder" in capsys.readouterr().err
    assert digests.main(["--out", str(tmp_path / "missing" / "d.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    for value in ("nan", "inf", "0", "-1", "x"):
        with pytest.raises(SystemExit) as stopped:
            digests.main(["--out", str(tmp_path / "d.json"), "--deterministic-time", value])
        assert stopped.value.code == 2
        assert "--deterministic-time" in capsys.readouterr().err


def test_a_written_file_reads_back(tmp_path: Path) -> None:
    scenario = load_scenario(EXAMPLES / "ordinary-8npu.yaml")
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"example:ordinary-8npu": case_digests(scenario, 0.2)}))
    assert set(digests.read_digests(path)) == {"example:ordinary-8npu"}
