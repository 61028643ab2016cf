"""``npu-place import`` end to end: bundled dumps of both modes, file forms, --previous,
round trips into ``validate``, ``plan`` and ``simulate``, exit codes."""

from __future__ import annotations

import io
import json
from importlib import resources
from pathlib import Path

import pytest
import yaml

from benchmarks.kube_dump import EXAMPLE_NOW, write_examples
from models.io import load_scenario
from models.kube.jobs import bound_stamp
from models.scenario import Health
from solver.cli import main
from solver.doors import EXIT_INVALID, EXIT_OK

EXAMPLES = Path(str(resources.files("models") / "kube" / "examples"))


def _short(name: str) -> str:
    """A vcjob's PodGroup is ``<job>-<uid>``: the job's name."""
    return name.rsplit("-", 5)[0]


def _import(tmp_path: Path, *args: str, name: str = "s.yaml") -> Path:
    out = tmp_path / name
    assert main(["import", *args, "--output", str(out)]) == EXIT_OK
    return out


def test_bundled_dumps_are_what_the_generator_writes(tmp_path: Path) -> None:
    write_examples(tmp_path)
    for path in sorted(tmp_path.rglob("*.json")):
        assert path.read_text() == (EXAMPLES / path.relative_to(tmp_path)).read_text(), path


def test_850_device_plugin_snapshots_with_previous(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    s0 = _import(tmp_path, str(EXAMPLES / "superpod-850" / "t0"), "--now", str(EXAMPLE_NOW),
                 name="s0.yaml")
    first = load_scenario(s0)
    assert len(first.nodes) == 24 and [_short(j.name) for j in first.jobs] == [
        "ai-train/eval"]
    assert {_short(r.name) for r in first.running} == {"ai-train/llm-pretrain",
                                                  "ai-train/finetune"}
    assert len(first.affinity_cache.entries) == 12
    capsys.readouterr()
    s1 = _import(tmp_path, str(EXAMPLES / "superpod-850" / "t1"), "--now",
                 str(EXAMPLE_NOW + 1800), "--previous", str(s0), name="s1.yaml")
    assert "(device-plugin mode); 0 warning(s)" in capsys.readouterr().err
    second = load_scenario(s1)
    nodes = {n.name: n for n in second.nodes}
    assert nodes["sp1-node-1"].health is Health.UNHEALTHY
    assert nodes["sp2-node-6"].health is Health.SUBHEALTHY
    assert nodes["sp2-node-7"].free == 7 and nodes["sp0-node-2"].free == 0
    pretrain = second.jobs[0]
    assert pretrain.name.startswith("ai-train/llm-pretrain") and pretrain.fault_ranks == [5]
    cache = {(e.owner_uid, e.rank): e for e in second.affinity_cache.entries}
    ranks = {r: cache[(pretrain.owner_uid, r)] for r in range(8)}  # kept by --previous
    assert ranks[0].node == "sp0-node-0"
    assert ranks[0].updated == bound_stamp(pretrain.owner_uid, EXAMPLE_NOW)
    assert ranks[5].updated == EXAMPLE_NOW + 1800 - 600  # the reschedule record is newer
    # without --previous only the reschedule record remembers the evicted job
    alone = load_scenario(_import(tmp_path, str(EXAMPLES / "superpod-850" / "t1"), "--now",
                                  str(EXAMPLE_NOW + 1800), name="alone.yaml"))
    assert sum(e.owner_uid == pretrain.owner_uid for e in alone.affinity_cache.entries) == 1
    # round trip: validate, plan, simulate
    assert main(["validate", str(s1)]) == EXIT_OK
    plan = tmp_path / "plan.json"
    assert main(["plan", str(s1), "--engine", "greedy", "--format", "json",
                 "--output", str(plan)]) == EXIT_OK
    placement = json.loads(plan.read_text())
    assert placement["metrics"]["placed-jobs"] == 2
    assert placement["metrics"]["origin-hits"] == 6
    assert main(["validate", str(s1), str(plan)]) == EXIT_OK
    out = io.StringIO()
    assert main(["simulate", str(s1), str(EXAMPLES / "superpod-850" / "events.yaml"),
                 "--engine", "greedy"], out=out) == EXIT_OK
    assert "100.0 %" in out.getvalue()


def test_950_clusterd_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _import(tmp_path, str(EXAMPLES / "rack-950"), "--now", str(EXAMPLE_NOW))
    assert "(clusterd mode); 0 warning(s)" in capsys.readouterr().err
    scenario = load_scenario(path)
    nodes = {n.name: n for n in scenario.nodes}
    assert nodes["r5-node-5"].rack_id == 5 and nodes["r5-node-5"].super_pod_id == 1
    assert nodes["r5-node-5"].health is Health.SUBHEALTHY
    assert nodes["r1-node-6"].health is Health.UNHEALTHY
    assert nodes["r0-node-0"].rack_id == 0
    assert all(nodes[f"r4-node-{i}"].free == 0 for i in range(8))
    (job,) = scenario.jobs
    assert (job.policy, job.sp_block, job.ra_block, job.fault_ranks) == (
        "chip8-node8-ra64-sp", 128, 64, [14])
    assert scenario.config.super_pod_size == 24
    cached = {e.rank: (e.node, e.updated) for e in scenario.affinity_cache.entries
              if e.owner_uid == job.owner_uid}
    assert cached == {3: ("r0-node-3", EXAMPLE_NOW - 86400), 9: ("r1-node-1", EXAMPLE_NOW - 86400),
                      14: ("r1-node-6", EXAMPLE_NOW - 240)}
    plan = tmp_path / "plan.json"
    assert main(["plan", str(path), "--engine", "greedy", "--format", "json",
                 "--output", str(plan)]) == EXIT_OK
    placed = json.loads(plan.read_text())
    assert placed["metrics"]["placed-jobs"] == 1 and placed["metrics"]["fault-returns"] == 0


def test_multilevel_dump(tmp_path: Path) -> None:
    path = _import(tmp_path, str(EXAMPLES / "multilevel"), "--now", str(EXAMPLE_NOW),
                   name="m.json")
    data = json.loads(path.read_text())  # .json output chooses JSON
    scenario = load_scenario(path)
    assert data["config"]["resource-level-config"]["default"]["level1"]["reservedNode"] == 1
    (job,) = scenario.jobs
    assert job.affinity_config == "level1=2,level2=4" and job.tasks == 8
    assert job.fault_ranks == [2]
    assert {n.name: n.health for n in scenario.nodes}["s0-r1-n2"] is Health.UNHEALTHY
    assert main(["plan", str(path), "--engine", "greedy"]) == EXIT_OK


def test_files_yaml_stdin_and_multi_document(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    folder = EXAMPLES / "multilevel"
    # YAML rendering of each List, and a multi-document YAML of single objects
    for file in folder.glob("*.json"):
        (tmp_path / f"{file.stem}.yaml").write_text(yaml.safe_dump(json.loads(file.read_text())))
    nodes = json.loads((folder / "nodes.json").read_text())["items"]
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump_all(nodes))
    a = _import(tmp_path, str(tmp_path), "--now", str(EXAMPLE_NOW), name="a.out")
    b = _import(tmp_path, *map(str, sorted(folder.glob("*.json"))), "--now", str(EXAMPLE_NOW),
                name="b.out")
    assert yaml.safe_load(a.read_text()) == yaml.safe_load(b.read_text())
    stdin = io.StringIO("\n".join((folder / f).read_text() for f in ("nodes.json",)))
    monkeypatch.setattr("sys.stdin", stdin)
    capsys.readouterr()
    assert main(["import", "-", "--now", str(EXAMPLE_NOW), "--format", "json",
                 "--allow-no-devices"]) == EXIT_OK  # no device info: refused without it
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)["nodes"]) == 16
    assert "no device info" in captured.err  # only the nodes were piped in


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"kind": "List", "items": [', "malformed JSON"),
        ("a: [b", "malformed YAML"),
        ('{"items": 3}', "not a Kubernetes object"),
        ('{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n"}, '
         '"status": {"capacity": {"huawei.com/npu": "x"}}}]}',
         "Node n: field 'status.capacity[huawei.com/npu]'"),
    ],
)
def test_malformed_input_exits_2_naming_the_problem(tmp_path: Path, text: str, expected: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    assert main(["import", str(bad), "--strict"]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import"]) == EXIT_INVALID
    assert main(["import", str(tmp_path), "--kubeconfig", "x"]) == EXIT_INVALID
    assert main(["import", str(tmp_path / "missing")]) == EXIT_INVALID
    assert main(["import", str(EXAMPLES / "multilevel"), "--now", "yesterday"]) == EXIT_INVALID
    assert "no such file" in capsys.readouterr().err


def test_now_accepts_iso_time(tmp_path: Path) -> None:
    path = _import(tmp_path, str(EXAMPLES / "multilevel"), "--now", "2025-11-29T07:06:40Z")
    assert load_scenario(path).now == EXAMPLE_NOW


def test_synthetic_dump_imports_and_plans(tmp_path: Path) -> None:
    from benchmarks.kube_dump import main as dump_main
    from benchmarks.kube_dump import synthetic

    assert dump_main(["--nodes", "256", "--mode", "device-plugin",
                      "--out", str(tmp_path / "d")]) == 0
    path = _import(tmp_path, str(tmp_path / "d"), "--now", str(EXAMPLE_NOW))
    scenario = load_scenario(path)
    builder = synthetic(256, "device-plugin")
    assert len(scenario.nodes) == 256
    assert len(scenario.jobs) + len(scenario.running) == len(builder.podgroups)
    # the jobs' bound pods (the node agents and services take no NPU and make no entry)
    assert len(scenario.affinity_cache.entries) == sum(
        1 for p in builder.pods if p["spec"].get("nodeName")
        and p["spec"].get("schedulerName") == "volcano")
    assert sum(1 for p in builder.pods if p["spec"].get("schedulerName") != "volcano") \
        == 3 * 256 + 256 // 8
    assert main(["plan", str(path), "--engine", "greedy"]) == EXIT_OK
