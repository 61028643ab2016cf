"""Job mapping rules: pending and running jobs, policy, fields, priority, faults, cache."""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks.kube_dump import DumpBuilder
from models.check import check
from models.kube.build import inferred_pending_sessions
from models.kube.jobs import BOUND_STAMP_GRAIN_SECONDS, bound_stamp, resolve_policy
from models.scenario import Job, Scenario
from models.validation import derive_shape
from solver.facade import solve
from tests.models.kube.helpers import NOW, cluster, errors_of, find, job_of, run


def test_pending_job_fields_owner_and_priority() -> None:
    b = cluster(nodes=8)
    b.priority_class("high", 700)
    b.job("ml", "train", 4, 8, policy="chip8-node8-sp", annotations={"sp-block": "16"},
          labels={"super-pod-affinity": "soft"}, priority_class="high", priority=700)
    result = run(b.objects())
    job = job_of(result, "ml/train-")
    pg = find(b.podgroups, "PodGroup", "train-")
    assert job["name"] == f"ml/{pg['metadata']['name']}"
    assert job["owner-uid"] == pg["metadata"]["ownerReferences"][0]["uid"]
    assert (job["policy"], job["tasks"], job["npu-per-task"], job["sp-block"]) == (
        "chip8-node8-sp", 4, 8, 16)
    assert job["super-pod-affinity"] == "soft" and job["priority"] == 700
    assert "fault-ranks" not in job and result.data["running"] == []


def test_rack_and_multilevel_fields() -> None:
    b = cluster(nodes=8)
    b.job("ml", "r", 8, 8, policy="chip8-node8-ra64-sp",
          annotations={"sp-block": "64", "ra-block": "32", "huawei.com/schedule_ubmemory": "true"})
    b.job("ml", "m", 4, 8, policy="multilevel",
          annotations={"huawei.com/affinity-config": "level1=2,level2=4"})
    objects = b.objects()
    importer_result = run(objects)
    # 950 raw super-pod-size 8 < spBlock 8? fine; multilevel has no tree -> rejected (warning)
    rack = job_of(importer_result, "ml/r-")
    assert (rack["sp-block"], rack["ra-block"], rack["ub-memory"]) == (64, 32, True)
    assert any("ml/m-" in w and "ValidNPUJob" in w for w in importer_result.warnings)


def test_annotation_of_another_family_is_ignored_with_a_warning() -> None:
    b = cluster()
    b.job("ml", "o", 2, 8, policy="chip8-node8", annotations={"sp-block": "16", "ra-block": "8"})
    result = run(b.objects())
    job = job_of(result, "ml/o-")
    assert "sp-block" not in job and "ra-block" not in job
    assert sum("is not used by chip8-node8" in w for w in result.warnings) == 2


@pytest.mark.parametrize(
    ("resource", "annotations", "selector", "policy"),
    [
        ("huawei.com/Ascend910", {"huawei.com/schedule_policy": "chip4-node8"}, None,
         "chip4-node8"),
        ("huawei.com/Ascend910", {"sp-block": "32"}, None, "chip2-node16-sp"),
        ("huawei.com/Ascend910", {"sp-block": "32"}, "module-a3-8-super-pod", "chip2-node8-sp"),
        ("huawei.com/Ascend910", {}, None, "chip8-node8"),
        ("huawei.com/Ascend910", {}, "module-910b-16", "chip8-node16"),
        ("huawei.com/Ascend910", {}, "module-a3-16-super-pod", "chip2-node16-sp"),
        ("huawei.com/Ascend910", {}, "half", "chip4-node4"),
        ("huawei.com/Ascend910", {"huawei.com/schedule_policy": "bogus"}, "module-a3-16",
         "module-a3-16"),
        ("huawei.com/Ascend910", {}, "card", None),
        ("huawei.com/Ascend910", {}, "weird", None),
        ("huawei.com/npu", {}, None, None),
        ("huawei.com/npu", {"huawei.com/schedule_policy": "chip8-node8-sp"}, None,
         "chip8-node8-sp"),
    ],
)
def test_policy_selection_rules(resource: str, annotations: dict[str, str],
                                selector: str | None, policy: str | None) -> None:
    assert resolve_policy(resource, annotations, selector)[0] == policy


def test_job_without_a_handler_is_reported_not_imported() -> None:
    b = cluster()
    b.job("ml", "nopolicy", 1, 8)  # huawei.com/npu without schedule_policy
    result = run(b.objects())
    assert result.data["jobs"] == []
    assert any("ml/nopolicy-" in w and "no handler" in w for w in result.warnings)


def test_running_job_seeds_the_cache_at_its_owners_stamp_of_now() -> None:
    b = cluster(nodes=8)
    b.job("ml", "run", 4, 8, policy="chip8-node8-sp", annotations={"sp-block": "32"},
          bound={r: f"node-{r}" for r in range(4)})
    result = run(b.objects())
    running = job_of(result, "ml/run-", "running")
    assert running["ranks"] == {r: f"node-{r}" for r in range(4)}
    assert running["tasks"] == 4 and running["sp-block"] == 32
    entries = result.data["affinity-cache"]["entries"]
    stamp = bound_stamp(running["owner-uid"], NOW)
    assert NOW - BOUND_STAMP_GRAIN_SECONDS < stamp <= NOW
    assert [(e["rank"], e["node"], e["updated"]) for e in entries] == [
        (r, f"node-{r}", stamp) for r in range(4)]
    assert {e["owner-uid"] for e in entries} == {running["owner-uid"]}
    assert all(n["free"] == 0 for n in result.data["nodes"][:4])


def test_a_bound_stamp_moves_once_a_grain_at_each_owners_own_second() -> None:
    """Over a grain of seconds each owner's stamp moves once (to that second), never
    ahead of ``now`` nor a grain behind; the owners' seconds differ, so a moving clock
    re-stamps a few owners a second instead of all of them."""
    grain = BOUND_STAMP_GRAIN_SECONDS
    owners = [f"owner-{i}" for i in range(200)]
    moves: dict[int, int] = {}
    for owner in owners:
        stamps = [bound_stamp(owner, t) for t in range(NOW, NOW + grain + 1)]
        assert all(t - grain < s <= t for t, s in zip(range(NOW, NOW + grain + 1), stamps))
        moved = [NOW + i for i in range(1, grain + 1) if stamps[i] != stamps[i - 1]]
        assert len(moved) == 1 and bound_stamp(owner, moved[0]) == moved[0]
        moves[moved[0]] = moves.get(moved[0], 0) + 1
    assert len(moves) > grain // 2 and max(moves.values()) < len(owners) // 4


def test_partly_running_job_is_pending_with_running_ranks() -> None:
    b = cluster()
    b.job("ml", "part", 3, 2, policy="chip8-node8", bound={0: "node-0", 1: "node-1"})
    result = run(b.objects())
    job = job_of(result, "ml/part-")
    assert job["running-ranks"] == {0: "node-0", 1: "node-1"} and job["tasks"] == 3
    assert result.data["running"] == []
    assert not any("partly running" in w for w in result.warnings)


def test_fault_ranks_from_failed_pods_unhealthy_nodes_and_reschedule_records() -> None:
    b = cluster(nodes=8)
    b.node("node-8", 8, super_pod=2, noded="UnHealthy")
    b.job("ml", "f", 4, 8, policy="chip8-node8", failed={1: "node-1"})
    pg = b.podgroups[-1]
    job_id = f"ml/{pg['metadata']['name']}"
    b.reschedule_record(job_id, NOW - 60, [(2, "node-2", "pod-failed")])
    objects = b.objects()
    result = run(objects)
    job = job_of(result, "ml/f-")
    assert job["tasks"] == 3  # the failed pod stands for a rank being recreated
    assert job["fault-ranks"] == [1, 2]
    # the reschedule record also seeds the cache of the rank that is not bound now
    assert {(e["rank"], e["node"], e["updated"]) for e in result.data["affinity-cache"][
        "entries"]} == {(2, "node-2", NOW - 60)}
    # a cached node that is unhealthy now makes its rank a fault rank
    b2 = cluster(nodes=8)
    b2.node("node-8", 8, super_pod=2, noded="UnHealthy")
    b2.job("ml", "g", 2, 8, policy="chip8-node8")
    pg2 = b2.podgroups[-1]
    b2.reschedule_record(f"ml/{pg2['metadata']['name']}", NOW - 86400 * 2,
                         [(0, "node-8", "pod-failed"), (1, "node-3", "pod-failed")])
    job2 = job_of(run(b2.objects()), "ml/g-")
    assert job2["fault-ranks"] == [0]  # record older than the job: only the unhealthy node


def test_podgroup_without_pods_uses_min_resources() -> None:
    b = cluster(nodes=8)
    b.job("ml", "later", 2, 8, policy="chip8-node8-sp", annotations={"sp-block": "16"})
    objects = [o for o in b.objects() if o["kind"] != "Pod"]
    result = run(objects)
    job = job_of(result, "ml/later-")
    assert (job["tasks"], job["npu-per-task"]) == (2, 8)
    assert any("no pods yet" in w for w in result.warnings)


def test_job_upstream_rejects_is_not_imported() -> None:
    b = cluster(nodes=8)
    b.job("ml", "bad", 3, 8, policy="chip8-node8-sp", annotations={"sp-block": "16"})
    result = run(b.objects())
    assert result.data["jobs"] == []
    assert any("ml/bad-" in w and "ValidNPUJob" in w and "sp-block" in w
               for w in result.warnings)


def test_unexpressible_labels_and_annotations_are_warned() -> None:
    b = cluster(nodes=8)
    b.job("ml", "w", 2, 8, policy="chip8-node8",
          annotations={"sp-fit": "idlest"},
          labels={"tor-affinity": "large-model-schema", "subHealthyStrategy": "forceExit",
                  "inferserviceid": "svc-1"})
    warnings = run(b.objects()).warnings
    for text in ("sp-fit", "tor-affinity", "subHealthyStrategy", "inferserviceid"):
        assert any("ml/w-" in w and text in w for w in warnings), text


def test_pod_without_group_is_counted_and_reported() -> None:
    b = cluster()
    b.job("ml", "loose", 1, 4, policy="chip8-node8", bound={0: "node-0"})
    objects = b.objects()
    objects = [o for o in objects if o["kind"] != "PodGroup"]
    del find(objects, "Pod", "loose-worker-0")["metadata"]["annotations"][
        "scheduling.k8s.io/group-name"]
    result = run(objects)
    assert result.data["running"] == [] and result.data["jobs"] == []
    assert next(n for n in result.data["nodes"] if n["name"] == "node-0")["free"] == 4
    assert any("Pod ml/loose-worker-0" in w and "not a Volcano job" in w
               for w in result.warnings)


def test_priority_fallbacks() -> None:
    b = cluster(nodes=8)
    b.priority_class("low", 5, default=True)
    b.job("ml", "a", 1, 8, policy="chip8-node8", priority_class="missing", priority=42)
    b.job("ml", "b", 1, 8, policy="chip8-node8", priority_class="gone")
    objects = b.objects()
    del find(objects, "Pod", "b-worker-0")["spec"]["priority"]
    result = run(objects)
    assert job_of(result, "ml/a-")["priority"] == 42  # the pod's admitted spec.priority
    assert job_of(result, "ml/b-")["priority"] == 0
    assert any("PriorityClass 'gone'" in w for w in result.warnings)
    # queue order: higher priority first
    assert result.data["jobs"][0]["name"].startswith("ml/a-")


@pytest.mark.parametrize(
    ("kind", "name", "change", "field"),
    [
        ("Pod", "m-worker-0", lambda o: o["metadata"]["annotations"].update(
            {"hccl/rankIndex": "zero"}), "metadata.annotations.hccl/rankIndex"),
        ("Pod", "m-worker-0", lambda o: o["spec"]["containers"][0]["resources"][
            "requests"].update({"huawei.com/npu": "lots"}),
         "spec.containers[0].resources.requests[huawei.com/npu]"),
        ("Pod", "m-worker-1", lambda o: o["metadata"]["annotations"].update(
            {"hccl/rankIndex": "0"}), "metadata.annotations.hccl/rankIndex"),
        ("PodGroup", "m-", lambda o: o["spec"].update(minMember=-1), "spec.minMember"),
        ("PodGroup", "m-", lambda o: o["metadata"]["annotations"].update(
            {"sp-block": "big"}), "metadata.annotations.sp-block"),
        ("PriorityClass", "high", lambda o: o.update(value="x"), "value"),
        ("ConfigMap", "job-reschedule-reason", lambda o: o["data"].update(
            {"recent-reschedule-records": "{]"}), "data.recent-reschedule-records"),
    ],
)
def test_malformed_job_objects_name_object_and_field(kind, name, change, field) -> None:  # type: ignore[no-untyped-def]
    b = cluster(nodes=8)
    b.priority_class("high", 7)
    b.job("ml", "m", 2, 8, policy="chip8-node8-sp", annotations={"sp-block": "16"},
          bound={0: "node-0", 1: "node-1"})
    b.reschedule_record("ml/x", NOW, [(0, "node-0", "pod-failed")])
    objects = b.objects()
    target = find(objects, kind, name)
    change(target)
    messages = errors_of(objects)
    shown = f"{kind} ml/" if kind in ("Pod", "PodGroup") else kind
    assert any(shown in m and f"'{field}'" in m for m in messages), messages


def test_reschedule_record_with_bad_rank_names_the_entry() -> None:
    b = cluster()
    b.reschedule_record("ml/x", NOW, [(0, "node-0", "pod-failed")])
    objects = b.objects()
    cm = find(objects, "ConfigMap", "job-reschedule-reason")
    data = json.loads(cm["data"]["recent-reschedule-records"])
    data["ml/x"]["RescheduleRecords"][0]["ReasonOfTask"][0]["NodeRankIndex"] = "-3"
    cm["data"]["recent-reschedule-records"] = json.dumps(data)
    assert any("NodeRankIndex" in m for m in errors_of(objects))


def test_running_ranks_on_unhealthy_node_or_chip_are_warned() -> None:
    b = cluster(nodes=4)
    b.node("node-8", 8, super_pod=2, noded="UnHealthy")
    b.node("node-9", 8, super_pod=2, unhealthy_chips=(7,))
    b.job("ml", "hurt", 2, 4, policy="chip8-node8", bound={0: "node-8", 1: "node-9"})
    b.job("ml", "fine", 1, 2, policy="chip8-node8", bound={0: "node-9"})
    objects = b.objects()
    pod = find(objects, "Pod", "hurt-worker-1")
    pod["metadata"]["annotations"]["huawei.com/AscendReal"] = "npu-4,npu-5,npu-6,npu-7"
    warnings = run(objects).warnings
    assert any("ml/hurt-" in w and "running ranks 0, 1 sit" in w for w in warnings)
    assert not any("ml/fine-" in w for w in warnings)


def test_base_device_infos_count_is_cross_checked() -> None:
    objects = cluster().objects()
    find(objects, "Node", "node-0")["status"]["capacity"]["huawei.com/npu"] = "16"
    find(objects, "Node", "node-0")["status"]["allocatable"]["huawei.com/npu"] = "16"
    result = run(objects)
    assert any("Node node-0" in w and "baseDeviceInfos lists 8 chips" in w
               for w in result.warnings)


def test_npu_request_defaults_to_the_limit() -> None:
    b = cluster()
    b.job("ml", "lim", 1, 4, policy="chip8-node8")
    objects = b.objects()
    resources = find(objects, "Pod", "lim-worker-0")["spec"]["containers"][0]["resources"]
    del resources["requests"]["huawei.com/npu"]
    assert job_of(run(objects), "ml/lim-")["npu-per-task"] == 4


# --------------------------------------------------------------------------- partly running jobs


def _pod_level_dump() -> tuple[DumpBuilder, str]:
    """850: super pod 0 = node-0..3 + node-8, super pod 1 = node-4..7.  ``train`` (one
    block of 4) runs ranks 0, 1, 3; rank 2's node failed and its pod is pending again.
    Inference service ``svc``: ``chat`` runs on node-4, ``chat-2`` is pending."""
    b = cluster(nodes=0)
    for i in range(8):
        b.node(f"node-{i}", 8, super_pod=i // 4,
               **({"noded": "UnHealthy"} if i == 2 else {}))
    b.node("node-8", 8, super_pod=0)
    b.job("ml", "train", 4, 8, policy="chip8-node8-sp", annotations={"sp-block": "32"},
          labels={"pod-rescheduling": "on"}, bound={0: "node-0", 1: "node-1", 3: "node-3"})
    job_id = f"ml/{b.podgroups[-1]['metadata']['name']}"
    b.reschedule_record(job_id, NOW - 30, [(2, "node-2", "pod-failed")])
    b.job("serving", "chat", 1, 8, policy="chip8-node8-sp", annotations={"sp-block": "8"},
          labels={"inferserviceid": "svc"}, bound={0: "node-4"})
    b.job("serving", "chat-2", 1, 8, policy="chip8-node8-sp", annotations={"sp-block": "8"},
          labels={"inferserviceid": "svc"})
    return b, job_id


def test_import_of_a_partly_running_850_job_and_an_infer_service() -> None:
    b, _ = _pod_level_dump()
    result = run(b.objects())
    train = job_of(result, "ml/train-")
    assert train["running-ranks"] == {0: "node-0", 1: "node-1", 3: "node-3"}
    assert train["fault-ranks"] == [2]
    assert train["pod-rescheduling"] is True and train["pending-sessions"] == 0
    assert job_of(result, "serving/chat-2-")["inferserviceid"] == "svc"
    assert job_of(result, "serving/chat-", "running")["inferserviceid"] == "svc"
    assert not any("partly running" in w or "inferserviceid" in w for w in result.warnings)
    for engine in ("greedy", "cpsat"):
        answer = solve(result.scenario, engine=engine, time_limit=10, workers=1, seed=0)
        assert check(result.scenario, answer.placement) == []
        train_p = next(j for j in answer.placement.jobs if j.name.startswith("ml/train-"))
        assert train_p.placed and train_p.ranks == {"2": "node-8"}
        chat2 = next(j for j in answer.placement.jobs if j.name.startswith("serving/chat-2-"))
        assert chat2.placed
        if engine == "greedy":  # the infer-service path: the service's super pod
            assert chat2.ranks["0"] in {"node-5", "node-6", "node-7"}


def test_pending_sessions_are_inferred_from_the_pending_set() -> None:
    base = Scenario.model_validate({"config": {"super-pod-size": 64, "resource-level-config": {
        "default": {"level1": {"label": "sw"}}}}})

    def stage(policy: str, tasks: int, running: list[int], faults: list[int],
              **extra: Any) -> int:
        data = {"name": "j", "policy": policy, "tasks": tasks, "npu-per-task": 8,
                "pod-rescheduling": True, "fault-ranks": faults,
                "running-ranks": {r: f"n{r}" for r in running}, **extra}
        job = Job.model_validate(data)
        shape, errors = derive_shape(job, base)
        assert shape is not None, errors
        return inferred_pending_sessions(job, shape)

    sp = {"sp-block": 32}
    assert stage("chip8-node8-sp", 8, [0, 1, 2, 3, 4, 6, 7], [5], **sp) == 0
    assert stage("chip8-node8-sp", 8, [0, 1, 2, 3], [5], **sp) == 6  # block 1 deleted
    assert stage("chip8-node8-sp", 8, [0, 1, 2, 3], [4, 5, 6, 7], **sp) == 0  # all failed
    ra = {"sp-block": 32, "ra-block": 16}
    assert stage("chip8-node8-ra64-sp", 8, [0, 1, 2, 3, 4, 6, 7], [5], **ra) == 0
    assert stage("chip8-node8-ra64-sp", 8, [0, 1, 2, 3, 6, 7], [5], **ra) == 3  # window
    assert stage("chip8-node8-ra64-sp", 8, [0, 1, 2, 3], [5], **ra) == 6  # block
    ml = {"affinity-config": "level1=2"}
    assert stage("multilevel", 4, [0, 1, 2], [3], **ml) == 0
    assert stage("multilevel", 4, [0, 1], [3], **ml) == 6  # level1 group deleted
    job = Job.model_validate({"name": "j", "policy": "chip8-node8-sp", "tasks": 8,
                              "npu-per-task": 8, "sp-block": 32, "process-recover": True,
                              "running-ranks": {0: "n0"}})
    shape, _ = derive_shape(job, base)
    assert shape is not None and inferred_pending_sessions(job, shape) == 0


def _mindie_dump(annotations: dict[str, str], labels: dict[str, str] | None = None
                 ) -> DumpBuilder:
    """Two A3 super pods of 4 nodes; a pending MindIE job (one 2-node block)."""
    b = cluster(nodes=0)
    for i in range(8):
        b.node(f"node-{i}", 16, super_pod=i // 4)
    b.job("serving", "mi", 2, 16, policy="chip2-node16-sp",
          annotations={"sp-block": "32", **annotations},
          labels={"app": "mindie", "jobID": "j1"} if labels is None else labels)
    return b


@pytest.mark.parametrize("where", ["podgroup", "pod"])
def test_mindie_sp_fit_idlest_is_imported(where: str) -> None:
    # upstream's isIdleResourceFit reads the job annotation sp-fit, which the PodGroup
    # takes from its first pod when it lacks it (annotationKeysForPodGroup)
    objects = _mindie_dump({"sp-fit": "idlest"}).objects()
    if where == "pod":
        group = next(o for o in objects if o["kind"] == "PodGroup")
        del group["metadata"]["annotations"]["sp-fit"]
    result = run(objects)
    job = job_of(result, "serving/mi-")
    assert job["sp-fit"] == "idlest" and job["app"] == "mindie"
    assert not any("sp-fit" in w for w in result.warnings)
    assert result.scenario.jobs[0].sp_fit == "idlest"


def test_mindie_sp_fit_other_values_and_other_jobs_are_warned() -> None:
    result = run(_mindie_dump({"sp-fit": "busiest"}).objects())
    assert "sp-fit" not in job_of(result, "serving/mi-")
    assert any("serving/mi-" in w and "is not 'idlest'" in w for w in result.warnings)
    result = run(_mindie_dump({"sp-fit": "idlest"}, labels={}).objects())
    assert "sp-fit" not in job_of(result, "serving/mi-")
    assert any("serving/mi-" in w and "read only on the MindIE path" in w
               for w in result.warnings)
