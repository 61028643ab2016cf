"""Import of dynamic vNPU nodes (npu-core capacity, device-info chip lists, the bound pods'
npu-core annotations) and vNPU jobs (npu-core requests)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from benchmarks.kube_dump_vnpu import example_vnpu, write_vnpu_example
from models.check import check
from models.compiled import compile_scenario
from solver.facade import solve
from tests.models.kube.helpers import NOW, node_of, run


def vnode(name: str, cores: int = 32, accelerator: str = "huawei-Ascend310P",
          server: str = "Ascend310P-8", chip_name: str = "310P3") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"accelerator": accelerator,
                                                  "servertype": server,
                                                  "node.kubernetes.io/npu.chip.name": chip_name}},
            "status": {"capacity": {"huawei.com/npu-core": str(cores)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def device_cm(name: str, kind: str, healthy: list[int],
              unhealthy: list[int] | None = None) -> dict[str, Any]:
    devices = {f"huawei.com/{kind}": ",".join(f"{kind}-{i}" for i in healthy),
               f"huawei.com/{kind}-Unhealthy": ",".join(f"{kind}-{i}" for i in unhealthy or [])}
    info = {"DeviceInfo": {"DeviceList": devices, "UpdateTime": NOW}, "SuperPodID": -1,
            "ServerIndex": 0}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"mindx-dl-deviceinfo-{name}", "namespace": "kube-system"},
            "data": {"DeviceInfoCfg": json.dumps(info)}}


def vpod(name: str, group: str, cores: int, node: str = "", annotation: str | None = None,
         real: bool = True, rank: int = 0, labels: dict[str, str] | None = None,
         owner: str = "rs-1") -> dict[str, Any]:
    annotations = {"scheduling.k8s.io/group-name": group, "hccl/rankIndex": str(rank)}
    if annotation is not None:
        annotations["huawei.com/npu-core"] = annotation
        if real:
            annotations["huawei.com/AscendReal"] = "Ascend310P-2c.1cpu-100-0"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ai", "annotations": annotations,
                         "labels": labels or {}, "creationTimestamp": "2025-11-29T06:00:00Z",
                         "ownerReferences": [{"uid": owner, "controller": True,
                                              "kind": "ReplicaSet", "name": "x"}]},
            "spec": {"nodeName": node, "containers": [
                {"name": "c", "resources": {"requests": {"huawei.com/npu-core": str(cores)}}}]},
            "status": {"phase": "Running" if node else "Pending"}}


def test_vnpu_node_from_device_info_and_pod_annotations() -> None:
    objects = [
        vnode("v1"), device_cm("v1", "Ascend310P", [0, 1, 2], unhealthy=[3]),
        vpod("a-0", "svc-a", 2, node="v1", annotation="0-vir02_1c", rank=0),
        vpod("a-1", "svc-a", 4, node="v1", annotation="1-vir04_4c_dvpp", rank=1),
        vpod("w-0", "svc-w", 8, node="v1", annotation="2", owner="rs-w"),
        vpod("c-0", "svc-c", 1, node="v1", annotation="1-vir01", real=False, owner="rs-c"),
    ]
    result = run(objects)
    row = node_of(result, "v1")
    assert row["npus"] == 4 and row["free"] == 0
    vnpu = row["vnpu"]
    assert vnpu["chip-kind"] == "Ascend310P" and vnpu["ai-cores"] == 8
    chips = {c["id"]: c for c in vnpu["chips"]}
    assert sorted(chips) == [0, 1, 2]  # chip 3 is unhealthy
    assert chips[0] == {"id": 0, "free-cores": 6, "free-cpus": 6, "segmented": True,
                        "dvpp": "null"}
    assert chips[1]["free-cores"] == 3 and chips[1]["free-cpus"] == 2
    assert chips[1]["dvpp"] == "no" and chips[1]["unstable"] is True
    assert chips[2]["free-cores"] == 0
    assert vnpu["unfinished-templates"] == ["vir01"]
    # bound ranks seed the cache like every other job's
    owners = {(e["owner-uid"], e["rank"]) for e in result.data["affinity-cache"]["entries"]}
    assert ("rs-1", 0) in owners and ("rs-1", 1) in owners


def test_pending_npu_core_pods_become_a_vnpu_job() -> None:
    objects = [vnode("v1"), device_cm("v1", "Ascend310P", [0, 1, 2, 3]),
               vpod("b-0", "svc-b", 4, rank=0, labels={"vnpu-level": "high"}, owner="rs-b"),
               vpod("b-1", "svc-b", 4, rank=1, labels={"vnpu-level": "high"}, owner="rs-b")]
    result = run(objects)
    (job,) = result.data["vnpu-jobs"]
    assert job == {"name": "ai/svc-b", "tasks": 2, "ai-cores": 4, "priority": 0,
                   "vnpu-level": "high", "owner-uid": "rs-b"}
    assert result.data["jobs"] == []
    scenario = result.scenario
    problem = compile_scenario(scenario)
    answer = solve(problem, engine="auto", time_limit=5.0, workers=1, seed=0)
    assert check(problem, answer.placement) == [] and answer.metrics.placed_jobs == 1


def test_ring_controller_label_becomes_the_jobs_family() -> None:
    """Upstream ``GetPluginNameByReq`` picks the vNPU handler by the job's
    ``ring-controller.atlas`` label: it is imported as the job's ``ring-controller``, an
    unknown value keeps the job out (reported), and the family's kinds judge the request."""
    b3 = vnode("b3", cores=40, accelerator="huawei-Ascend910", server="Ascend910B-20",
               chip_name="910B3")
    objects = [vnode("v1"), device_cm("v1", "Ascend310P", [0, 1, 2, 3]), b3,
               device_cm("b3", "Ascend910", [0, 1]),
               vpod("a-0", "svc-a", 5, labels={"ring-controller.atlas": "ascend-910b"},
                    owner="rs-a"),
               vpod("c-0", "svc-c", 1, labels={"ring-controller.atlas": "ascend-310"},
                    owner="rs-c"),
               vpod("d-0", "svc-d", 1, labels={"ring-controller.atlas": "ascend-910"},
                    owner="rs-d")]
    result = run(objects)
    jobs = {job["name"]: job for job in result.data["vnpu-jobs"]}
    assert sorted(jobs) == ["ai/svc-a"]
    assert jobs["ai/svc-a"]["ring-controller"] == "ascend-910b"
    text = "\n".join(str(w) for w in result.warnings)
    assert "ring-controller.atlas='ascend-310'" in text
    assert "ai/svc-d" in text and "req err 1" in text  # 1 core: a 310P size, not a 910's
    problem = compile_scenario(result.scenario)
    answer = solve(problem, engine="auto", time_limit=5.0, workers=1, seed=0)
    assert check(problem, answer.placement) == []
    (placed,) = [jp for jp in answer.placement.jobs if jp.name == "ai/svc-a"]
    assert placed.placed and placed.ranks == {"0": "b3"}


def test_refused_requests_and_unusable_nodes_are_reported() -> None:
    objects = [vnode("v1"), device_cm("v1", "Ascend310P", [0, 1, 2, 3]),
               vnode("v2", accelerator="huawei"),
               vpod("x-0", "svc-x", 3, owner="rs-x")]
    result = run(objects)
    assert "vnpu-jobs" not in result.data
    text = "\n".join(str(w) for w in result.warnings)
    assert "req npu: 3" in text
    assert "does not name a chip kind" in text
    assert [n["name"] for n in result.data["nodes"]] == ["v1"]


def test_910b_and_a3_template_keys() -> None:
    objects = [vnode("b3", cores=160, accelerator="huawei-Ascend910", server="Ascend910B-20",
                     chip_name="910B3"),
               vnode("a3", cores=384, accelerator="huawei-Ascend910", server="Ascend910A3-24"),
               vpod("p-0", "svc-p", 5, owner="rs-p")]
    result = run(objects)
    assert node_of(result, "b3")["vnpu"]["chip-kind"] == "910B3"
    assert node_of(result, "b3")["npus"] == 8
    assert node_of(result, "a3")["vnpu"]["chip-kind"] == "Ascend910A3-24"
    assert node_of(result, "a3")["npus"] == 16
    assert result.data["vnpu-jobs"][0]["ai-cores"] == 5  # valid for 910B3, not for A3-24


EXAMPLE = Path(str(resources.files("models") / "kube" / "examples" / "vnpu-inference"))


def test_bundled_vnpu_dump_is_what_the_generator_writes(tmp_path: Path) -> None:
    written = write_vnpu_example(tmp_path)
    assert {p.name for p in written} == {p.name for p in EXAMPLE.glob("*.json")}
    for path in written:
        assert path.read_text() == (EXAMPLE / path.name).read_text(), path


def test_bundled_vnpu_dump_imports_and_plans() -> None:
    objects = [obj for items in example_vnpu().values() for obj in items]
    result = run(objects)
    vnpu2 = node_of(result, "vnpu-2")["vnpu"]
    assert vnpu2["unfinished-templates"] == ["vir02_1c"]  # the embed slice is being cut
    assert vnpu2["chips"][0]["unstable"] is True
    (job,) = result.data["vnpu-jobs"]
    assert job["name"] == "ai/chat-group" and job["tasks"] == 2 and "owner-uid" not in job
    assert [r["name"].split("-")[:2] for r in result.data["running"]] == [["ai/train", "llm"]]
    problem = compile_scenario(result.scenario)
    answer = solve(problem, engine="greedy", time_limit=5.0)
    assert check(problem, answer.placement) == []
    chat = answer.placement.job("ai/chat-group")
    # least idle AI cores first: vnpu-1 (two chat slices already), not the node with the
    # unfinished vir02_1c slice, which refuses another template anyway
    assert chat is not None and chat.placed and set(chat.ranks.values()) == {"vnpu-1"}
