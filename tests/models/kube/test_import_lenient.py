"""A refused object takes out only its own job: the lenient import (the CLI's default,
the extender's only mode) next to ``--strict``, with every refusal class in one snapshot."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.kube_dump import EXAMPLE_NOW, DumpBuilder
from models.kube import ClusterImport, Diagnostics, ImportResult
from models.validation import InputError
from solver.cli import main
from solver.doors import EXIT_INVALID, EXIT_OK

NOW = EXAMPLE_NOW
#: job name -> what takes it out (the refusal classes of one snapshot)
REFUSED = {
    "bad-rank": "not an integer rank",
    "bad-podgroup": "spec.minMember",
    "twin-ranks": "pending pods share rank(s) 0",
    "twin-bound": "is also held by another bound pod",
}
#: running jobs that break a rule a pending job must meet: occupancy only
OCCUPANCY = {"scaled-in": "sp-block", "lost-rank": "runs all its",
             "rack-scaled-in": "multiples of tpBlock", "levels-scaled-in": "affinity-config"}
#: good pending jobs of every family the mixed cluster holds: all imported and planned
GOOD_PENDING = ("good", "rack-good", "levels-good")


def _job_id(objects: list[dict[str, Any]], name: str) -> str:
    pg = next(o for o in objects if o["kind"] == "PodGroup"
              and o["metadata"]["name"].startswith(f"{name}-"))
    return f"{pg['metadata']['namespace']}/{pg['metadata']['name']}"


def mixed_cluster() -> DumpBuilder:
    """16 nodes (850 super pods of 8), two good jobs and one object of every refusal
    class; the Volcano-side objects edited after the builder wrote them."""
    b = DumpBuilder("device-plugin", now=NOW, resource="huawei.com/npu",
                    chip_type="Ascend850")
    b.params = {"super-pod-size": "8", "prefer-previous-node": "true"}
    for i in range(16):
        b.node(f"node-{i}", 8, super_pod=i // 8)
    b.node("node-bad", 8, super_pod=1)
    b.nodes[-1]["metadata"]["labels"]["x"] = "a\x1b[31m"  # a label no scenario takes
    # node-level classes: a node whose device record puts it in super pod 0, already full
    # (8 of 8), while its label says super pod 3 (imported outside every super pod); a
    # running job on the node whose label no scenario takes (a node that is gone)
    b.node("node-stray", 8, super_pod=0, labels={"huawei.com/topotree.superpodid": "3"})
    b.priority_class("normal", 100, default=True)
    b.priority_class("broken", 10)
    b.classes[-1]["value"] = 1e30  # not an int32
    b.job("ml", "good", 2, 8, policy="chip8-node8")
    b.job("ml", "good-running", 1, 8, policy="chip8-node8", bound={0: "node-15"})
    # a super-pod job scaled in to 3 of its 8-chip pods: 24 NPUs, not a multiple of 16
    b.job("ml", "scaled-in", 3, 8, policy="chip8-node8-sp", annotations={"sp-block": "16"},
          bound={r: f"node-{r}" for r in range(3)})
    # a super-pod gang whose rank 1 runs on a node that is gone from the cluster
    b.job("ml", "lost-rank", 2, 8, policy="chip8-node8-sp", annotations={"sp-block": "16"},
          bound={0: "node-4", 1: "node-5"})
    b.job("ml", "on-bad-node", 1, 8, policy="chip8-node8", bound={0: "node-bad"})
    # two running pods claim all 8 chips of node-12 (one pod's nodeName is wrong): the
    # node is left out, the claims are ranks on a node that is gone
    b.job("ml", "claim-a", 1, 8, policy="chip8-node8", bound={0: "node-12"})
    b.job("ml", "claim-b", 1, 8, policy="chip8-node8", bound={0: "node-13"})
    b.job("ml", "bad-rank", 1, 8, policy="chip8-node8", bound={0: "node-6"})
    b.job("ml", "bad-podgroup", 1, 8, policy="chip8-node8")
    b.job("ml", "twin-ranks", 2, 8, policy="chip8-node8")
    b.job("ml", "twin-bound", 2, 8, policy="chip8-node8", bound={0: "node-8", 1: "node-9"})
    pods = {p["metadata"]["name"]: p for p in b.pods}
    pods["lost-rank-worker-1"]["spec"]["nodeName"] = "node-gone"
    pods["bad-rank-worker-0"]["metadata"]["annotations"]["hccl/rankIndex"] = "abc"
    pods["twin-ranks-worker-1"]["spec"]["containers"][0]["env"][0]["value"] = "0"
    pods["twin-bound-worker-1"]["metadata"]["annotations"]["hccl/rankIndex"] = "0"
    pods["claim-b-worker-0"]["spec"]["nodeName"] = "node-12"
    pg = next(p for p in b.podgroups if p["metadata"]["name"].startswith("bad-podgroup-"))
    pg["spec"]["minMember"] = -1
    # a 950 super pod of two 4-node racks: a running job scaled in below its rack window
    # (3 tasks, tpBlock 2) next to a good pending one
    for rack in range(2):
        for i in range(4):
            b.node(f"r{rack}-node-{i}", 8, super_pod=2, rack=rack)
    b.job("ml", "rack-scaled-in", 3, 8, policy="chip8-node8-ra64-sp",
          annotations={"sp-block": "32", "ra-block": "16"},
          bound={r: f"r0-node-{r}" for r in range(3)})
    b.job("ml", "rack-good", 2, 8, policy="chip8-node8-ra64-sp",
          annotations={"sp-block": "16", "ra-block": "16"})
    # multilevel trees: a running job whose size breaks its level groups (3 of level1=2)
    # next to a good pending one
    b.params["resource-level-config"] = json.dumps({"default": {
        "level1": {"label": "huawei.com/topotree.rackid", "reservedNode": 0},
        "level2": {"label": "huawei.com/topotree.switchid"}}})
    for rack in range(2):
        for i in range(4):
            b.node(f"m{rack}-n{i}", 16, labels={
                "huawei.com/topotree": "default", "huawei.com/topotree.rackid": f"m-{rack}",
                "huawei.com/topotree.switchid": "m-switch"})
    levels = {"huawei.com/affinity-config": "level1=2,level2=4"}
    b.job("ml", "levels-scaled-in", 3, 16, policy="multilevel", annotations=levels,
          bound={r: f"m0-n{r}" for r in range(3)})
    b.job("ml", "levels-good", 4, 16, policy="multilevel", annotations=levels)
    return b


def _run(objects: list[dict[str, Any]], strict: bool) -> ImportResult:
    importer = ClusterImport(Diagnostics(), strict=strict)
    for obj in objects:
        importer.add(copy.deepcopy(obj))
    return importer.build(now=NOW)


def test_each_refused_object_takes_out_only_its_own_job() -> None:
    objects = mixed_cluster().objects()
    result = _run(objects, strict=False)
    running = _job_id(objects, "good-running")
    assert {j["name"] for j in result.data["jobs"]} == {_job_id(objects, n)
                                                       for n in GOOD_PENDING}
    gone = [_job_id(objects, n) for n in ("claim-a", "claim-b", "on-bad-node")]
    assert {r["name"]: r["ranks"] for r in result.data["running"]} == {
        running: {0: "node-15"}, **{name: {} for name in gone}}
    # the ranks ran on a refused node: left out of the running job, as on a node gone
    assert "node-12" not in {n["name"] for n in result.data["nodes"]}
    assert result.nodes_changed["node-12"].startswith("left out: field 'free'")
    assert any("runs on node 'node-12', which is not imported" in w
               for w in result.warnings), result.warnings
    # the over-full super pod keeps the cluster: the node whose label disagrees is
    # imported outside every super pod, named with the field and the rule
    nodes = {n["name"]: n for n in result.data["nodes"]}
    assert "super-pod-id" not in nodes["node-stray"] and nodes["node-stray"]["free"] == 8
    assert sum(n.get("super-pod-id") == 0 for n in nodes.values()) == 8
    line = next(w for w in result.warnings if "node-stray" in w)
    assert "SuperPodID" in line and "super pod 0 has 9 nodes but config.super-pod-size " \
        "is 8" in line and "disagrees" in line, line
    # the refused jobs, each with its reason, left to Volcano
    assert set(result.refused) == {_job_id(objects, n) for n in REFUSED}
    for name, says in REFUSED.items():
        assert says in result.refused[_job_id(objects, name)], result.refused
    text = "\n".join(result.warnings)
    for name in REFUSED:
        assert f"job {_job_id(objects, name)}: not imported, left to Volcano" in text, text
    # running jobs that break a rule: their chips stay used, a warning names job and rule
    for name, rule in OCCUPANCY.items():
        line = next(w for w in result.warnings if _job_id(objects, name) in w
                    and "occupancy only" in w)
        assert rule in line, line
    free = {n["name"]: n["free"] for n in result.data["nodes"]}
    assert free["node-0"] == free["node-1"] == free["node-2"] == 0
    assert free["node-4"] == 0 and free["node-6"] == 0
    # their cache entries are kept (the job's origins), on nodes that exist
    owners = {e["owner-uid"] for e in result.data["affinity-cache"]["entries"]}
    scaled = next(p for p in objects if p["kind"] == "PodGroup"
                  and p["metadata"]["name"].startswith("scaled-in-"))
    assert scaled["metadata"]["ownerReferences"][0]["uid"] in owners
    # a refused node and PriorityClass are left out by themselves
    assert "node-bad" not in free and len(free) == 16 - 1 + 1 + 8 + 8
    assert free["r0-node-2"] == 0 and free["m0-n2"] == 0  # the scaled-in jobs' chips
    assert "contains the control or formatting character" in text
    assert "PriorityClass broken" in text
    assert result.counts["refused"] == len(REFUSED)


def test_strict_refuses_the_whole_import() -> None:
    objects = mixed_cluster().objects()
    with pytest.raises(InputError) as caught:
        _run(objects, strict=True)
    text = "\n".join(caught.value.messages)
    assert "not an integer rank" in text and "spec.minMember" in text


def test_a_running_job_breaking_a_rule_alone_is_occupancy_not_a_refusal() -> None:
    """The 26-of-a-block case: strict (the old import) refuses the cluster; lenient
    imports the job as occupancy and plans the rest."""
    b = DumpBuilder("device-plugin", now=NOW, resource="huawei.com/npu",
                    chip_type="Ascend850")
    b.params = {"super-pod-size": "8"}
    for i in range(8):
        b.node(f"node-{i}", 8, super_pod=0)
    b.job("ml", "scaled-in", 3, 8, policy="chip8-node8-sp", annotations={"sp-block": "16"},
          bound={r: f"node-{r}" for r in range(3)})
    b.job("ml", "waiting", 2, 8, policy="chip8-node8-sp", annotations={"sp-block": "16"})
    with pytest.raises(InputError, match="sp-block"):
        _run(b.objects(), strict=True)
    result = _run(b.objects(), strict=False)
    assert [j["name"] for j in result.data["jobs"]] == [_job_id(b.objects(), "waiting")]
    assert result.data["running"] == [] and result.refused == {}


def test_duplicate_pending_ranks_are_named_and_not_imported_in_either_mode() -> None:
    b = DumpBuilder("device-plugin", now=NOW, resource="huawei.com/npu",
                    chip_type="Ascend850")
    for i in range(4):
        b.node(f"node-{i}", 8)
    b.job("ml", "roles", 2, 8, policy="chip8-node8")  # master-0 and worker-0
    b.pods[1]["spec"]["containers"][0]["env"][0]["value"] = "0"
    for strict in (True, False):
        result = _run(b.objects(), strict=strict)
        job = _job_id(b.objects(), "roles")
        assert result.data["jobs"] == [] and "share rank(s) 0" in result.refused[job]
        assert any(f"job {job}: not imported, left to Volcano" in w for w in result.warnings)


def _cli(tmp_path: Path, *args: str) -> tuple[int, str]:
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"kind": "List", "apiVersion": "v1",
                                "items": mixed_cluster().objects()}))
    err = io.StringIO()
    code = main(["import", str(dump), "--now", str(NOW), "--output",
                 str(tmp_path / "s.yaml"), *args], io.StringIO(), err)
    return code, err.getvalue()


def test_import_exits_0_with_warnings_and_strict_exits_2(tmp_path: Path) -> None:
    code, err = _cli(tmp_path)
    assert code == EXIT_OK, err
    assert "not imported, left to Volcano" in err and "occupancy only" in err
    assert main(["validate", str(tmp_path / "s.yaml")], io.StringIO(), io.StringIO()) \
        == EXIT_OK
    code, err = _cli(tmp_path, "--strict")
    assert code == EXIT_INVALID and "not an integer rank" in err, err


def test_the_synthetic_dump_writes_nodes_and_pods_of_real_size() -> None:
    """``benchmarks/kube_dump.synthetic``: managedFields of 3-5 managers, 30-60 images,
    5 KB or more per Node and Pod; the importer reads them as it reads the small ones."""
    from benchmarks.kube_dump import synthetic

    big, small = synthetic(64, "device-plugin"), synthetic(64, "device-plugin",
                                                             realistic=False)
    for obj in (*big.nodes, *big.pods):
        assert len(json.dumps(obj, separators=(",", ":"))) >= 5000
        assert 3 <= len(obj["metadata"]["managedFields"]) <= 5
    assert all(30 <= len(n["status"]["images"]) <= 60 for n in big.nodes)
    a, b = _run(big.objects(), strict=True), _run(small.objects(), strict=True)
    assert [j["name"] for j in a.data["jobs"]] == [j["name"] for j in b.data["jobs"]]
    assert [n["free"] for n in a.data["nodes"]] == [n["free"] for n in b.data["nodes"]]


def test_reading_only_the_jobs_images_changes_no_job() -> None:
    from benchmarks.kube_dump import synthetic

    objects = synthetic(256, "device-plugin").objects()  # a pending job among them
    image = next(o for o in objects if o["kind"] == "Pod")["spec"]["containers"][0]["image"]
    node = next(o for o in objects if o["kind"] == "Node")
    node["status"]["images"].insert(0, {"names": [image], "sizeBytes": 25_000_000_000})
    full = _run(objects, strict=True)
    importer = ClusterImport(Diagnostics(), strict=True, job_images_only=True)
    for obj in objects:
        importer.add(copy.deepcopy(obj))
    lean = importer.build(now=NOW)
    assert lean.data["jobs"] == full.data["jobs"]
    assert any(j["image"] == {"name": image, "size-gb": 25.0} for j in lean.data["jobs"])
    kept = {name for n in lean.data["nodes"] for name in n.get("images", {})}
    assert kept == {image} and len({name for n in full.data["nodes"]
                                    for name in n.get("images", {})}) > 100


def node_level_cluster() -> DumpBuilder:
    """One object of each node-level class next to good jobs: a super pod with one node
    more than ``super-pod-size`` (a wrong SuperPodID, its label agreeing), and a running
    job on a node whose label no scenario takes."""
    b = DumpBuilder("device-plugin", now=NOW, resource="huawei.com/npu",
                    chip_type="Ascend850")
    b.params = {"super-pod-size": "4"}
    for i in range(9):
        b.node(f"node-{i}", 8, super_pod=i // 4 if i < 8 else 0)
    b.node("node-bad", 8, labels={"x": "a\x1b[31m"})
    b.job("ml", "on-bad-node", 2, 8, policy="chip8-node8-sp", annotations={"sp-block": "8"},
          bound={0: "node-5", 1: "node-bad"})
    b.job("ml", "sp-good", 2, 8, policy="chip8-node8-sp", annotations={"sp-block": "16"})
    b.job("ml", "good", 2, 8, policy="chip8-node8")
    # two running pods claim all 8 chips of node-6 (one pod's nodeName is wrong)
    b.job("ml", "claim-a", 1, 8, policy="chip8-node8", bound={0: "node-6"})
    b.job("ml", "claim-b", 1, 8, policy="chip8-node8", bound={0: "node-7"})
    next(p for p in b.pods if p["metadata"]["name"] == "claim-b-worker-0")["spec"][
        "nodeName"] = "node-6"
    return b


def test_a_node_level_refusal_leaves_out_the_node_not_the_cluster(tmp_path: Path) -> None:
    b = node_level_cluster()
    with pytest.raises(InputError) as caught:
        _run(b.objects(), strict=True)
    assert "label" in "\n".join(caught.value.messages)
    del b.nodes[-1]["metadata"]["labels"]["x"]  # strict also refuses the full super pod
    with pytest.raises(InputError, match=r"super pod 0 has 5 nodes but config\.super-pod"):
        _run(b.objects(), strict=True)
    b = node_level_cluster()
    result = _run(b.objects(), strict=False)
    objects = b.objects()
    assert {j["name"] for j in result.data["jobs"]} == {_job_id(objects, "sp-good"),
                                                       _job_id(objects, "good")}
    nodes = {n["name"]: n for n in result.data["nodes"]}
    # no label disagrees: the last by name leaves super pod 0
    assert [n for n, v in nodes.items() if v.get("super-pod-id") == 0] == [
        f"node-{i}" for i in range(4)]
    assert "node-bad" not in nodes and "super-pod-id" not in nodes["node-8"]
    line = next(w for w in result.warnings if "node-8" in w)
    assert "the last by name" in line and "super pod 0 has 5 nodes" in line, line
    # the super-pod job on the refused node: a gang with a rank on a node that is gone
    assert any(_job_id(objects, "on-bad-node") in w and "occupancy only" in w
               for w in result.warnings), result.warnings
    # the node whose running pods claim more chips than it has is left out (free 0 either
    # way); the claims are ranks on a node that is gone
    assert "node-6" not in nodes and nodes["node-7"]["free"] == 8
    line = next(w for w in result.warnings if "node-6" in w and "node not imported" in w)
    assert "field 'free'" in line and "16 NPUs of running jobs exceeds npus 8" in line, line
    assert {r["name"]: r["ranks"] for r in result.data["running"]} == {
        _job_id(objects, "claim-a"): {}, _job_id(objects, "claim-b"): {}}
    # the import CLI: exit 0 with the warnings; --strict exit 2
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": objects}))
    for args, code in (((), EXIT_OK), (("--strict",), EXIT_INVALID)):
        err = io.StringIO()
        assert main(["import", str(dump), "--now", str(NOW), "--output",
                     str(tmp_path / "s.yaml"), *args], io.StringIO(), err) == code, \
            err.getvalue()
    assert main(["import", str(dump), "--now", str(NOW), "--output",
                 str(tmp_path / "s.yaml")], io.StringIO(), err := io.StringIO()) == EXIT_OK
    assert "node-bad" in err.getvalue() and "node-8" in err.getvalue()
    assert main(["validate", str(tmp_path / "s.yaml")], io.StringIO(), io.StringIO()) \
        == EXIT_OK
