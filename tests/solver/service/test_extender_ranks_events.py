"""The extender's two guards on what Volcano tells it: a job is steered only when its
pending tasks carry distinct ranks of the plan (one task per planned rank, ever), and an
allocate/deallocate event whose values are outside the importer's bounds is dropped,
never kept in the cache that later sessions read."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from benchmarks.generators import GenParams, generate_case
from benchmarks.volcano_session import (
    STATUS,
    VolcanoCluster,
    cluster_from_scenario,
    task_info,
    volcano_snapshot,
)
from heuristics.lifecycle import EntryState
from solver.service.app import ServiceConfig
from solver.service.extender import PLANNED_SCORE, ExtenderConfig, ExtenderCore
from tests.solver.service.conftest import running_server

ABSTAIN = {"nodeScore": {}, "errorMessage": ""}
SETTINGS = dict(engine="greedy", http_timeout=30.0)


def _core(cluster: VolcanoCluster, folder: Path) -> ExtenderCore:
    cluster.write_device_dump(folder)
    return ExtenderCore(ExtenderConfig(configmaps=(str(folder),), **SETTINGS),
                        clock=lambda: cluster.now)


def _open(core: ExtenderCore, cluster: VolcanoCluster) -> None:
    session = core.begin()
    core.open_session(session, orjson.dumps(volcano_snapshot(cluster)), float("inf"))
    assert session.error is None, session.error


def _pending(cluster: VolcanoCluster) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for pod in cluster.pods:
        group = pod["metadata"].get("annotations", {}).get("scheduling.k8s.io/group-name")
        if group and not pod["spec"].get("nodeName"):
            out.setdefault(f"{pod['metadata']['namespace']}/{group}", []).append(pod)
    return out


def _set_rank(pod: dict[str, Any], rank: str) -> None:
    for env in pod["spec"]["containers"][0]["env"]:
        if env["name"] == "VC_TASK_INDEX":
            env["value"] = rank


def _nodes(cluster: VolcanoCluster) -> list[dict[str, Any]]:
    return list(volcano_snapshot(cluster)["Nodes"].values())


@pytest.fixture
def gang(tmp_path: Path) -> tuple[VolcanoCluster, ExtenderCore, str]:
    """A cluster with a pending job of at least two tasks, and its extender."""
    case = generate_case(GenParams("ordinary", nodes=16, seed=3, jobs=3, occupancy=0.1,
                                   unhealthy=0.0, subhealthy=0.0))
    cluster = cluster_from_scenario(case.scenario, "ordinary")
    job = next(j for j, pods in sorted(_pending(cluster).items()) if len(pods) >= 2)
    return cluster, _core(cluster, tmp_path), job


def _scores(core: ExtenderCore, cluster: VolcanoCluster, job: str) -> list[dict[str, float]]:
    nodes = _nodes(cluster)
    return [json.loads(core.prioritize({"task": task_info(pod, job, STATUS["Pending"]),
                                        "nodes": nodes}))["nodeScore"]
            for pod in _pending(cluster)[job]]


def test_two_pending_tasks_of_one_rank_leave_the_job_to_volcano(
        gang: tuple[VolcanoCluster, ExtenderCore, str]) -> None:
    cluster, core, job = gang
    _open(core, cluster)  # distinct ranks: every task gets its own rank's planned node
    scores = _scores(core, cluster, job)
    assert all(list(s.values()) == [PLANNED_SCORE] for s in scores)
    core.close_session()
    first, second = _pending(cluster)[job][:2]
    _set_rank(first, "0")  # Volcano numbers each task role from 0: master-0, worker-0
    _set_rank(second, "0")
    _open(core, cluster)
    session = core.session
    assert session is not None
    plan = session.jobs[job]
    assert not plan.steer and "both carry rank 0" in plan.reason
    assert all(s == {} for s in _scores(core, cluster, job))  # no task is steered
    for pod in _pending(cluster)[job]:  # nor refused a node
        task = task_info(pod, job, STATUS["Pending"])
        assert all(json.loads(core.predicate({"task": task, "node": n}))["code"] == 0
                   for n in _nodes(cluster))
    other = [j for j, p in session.jobs.items() if j != job and p.steer]
    assert other, "the other jobs are still steered"
    core.close_session()
    summary = core.history[-1]
    assert "both carry rank 0" in summary["left-to-plugin"][job]
    assert summary["counts"]["jobs-rank-conflict"] == 1


def test_a_rank_outside_the_plan_or_missing_leaves_the_job_to_volcano(
        gang: tuple[VolcanoCluster, ExtenderCore, str]) -> None:
    cluster, core, job = gang
    pods = _pending(cluster)[job]
    _set_rank(pods[0], str(len(pods) + 5))
    _open(core, cluster)
    assert core.session is not None
    assert "which the plan does not place" in core.session.jobs[job].reason
    assert all(s == {} for s in _scores(core, cluster, job))
    for env in pods[0]["spec"]["containers"][0]["env"]:
        env["name"] = "SOMETHING_ELSE"
    _open(core, cluster)
    assert "carries no rank" in core.session.jobs[job].reason


def test_a_second_task_asking_for_a_held_rank_is_never_scored(
        gang: tuple[VolcanoCluster, ExtenderCore, str]) -> None:
    """Whatever the session open saw (own-view mode sees no pods), one rank's planned
    node is scored for one task only."""
    cluster, core, job = gang
    _open(core, cluster)
    pod = _pending(cluster)[job][0]
    nodes = _nodes(cluster)
    task = task_info(pod, job, STATUS["Pending"])
    held = json.loads(core.prioritize({"task": task, "nodes": nodes}))["nodeScore"]
    assert list(held.values()) == [PLANNED_SCORE]
    # asked again, the same task keeps it
    assert json.loads(core.prioritize({"task": task, "nodes": nodes}))["nodeScore"] == held
    twin = copy.deepcopy(pod)
    twin["metadata"]["uid"] += "-twin"
    twin["metadata"]["name"] += "-twin"
    answer = json.loads(core.prioritize({"task": task_info(twin, job, STATUS["Pending"]),
                                         "nodes": nodes}))
    assert answer == ABSTAIN
    session = core.session
    assert session is not None and not session.jobs[job].steer
    assert "both carry rank" in session.jobs[job].reason
    # the job is left to Volcano from then on: the other tasks abstain, nothing is refused
    assert all(s == {} for s in _scores(core, cluster, job)[1:])
    assert json.loads(core.predicate({"task": task, "node": nodes[0]}))["code"] == 0


BAD_EVENTS = [
    ("rank 65536", lambda pod: pod["metadata"].setdefault("annotations", {}).update(
        {"hccl/rankIndex": "65536"}), None, "rank 65536 is outside"),
    ("long node name", None, "n" * 254, "254 characters"),
    ("node name with NUL", None, "node\x00-1", "control or formatting character"),
    ("uid with an escape", lambda pod: pod["metadata"].update(uid="u\x1b[31m"), None,
     "control or formatting character"),
]


@pytest.mark.parametrize(("what", "change_pod", "node", "text"), BAD_EVENTS,
                         ids=[b[0] for b in BAD_EVENTS])
def test_an_event_outside_the_bounds_is_dropped_and_later_sessions_plan(
        gang: tuple[VolcanoCluster, ExtenderCore, str], caplog: pytest.LogCaptureFixture,
        what: str, change_pod: Any, node: str | None, text: str) -> None:
    cluster, core, job = gang
    dropped: list[tuple[str, str]] = []
    core.on_event_dropped = lambda verb, field: dropped.append((verb, field))
    _open(core, cluster)
    session = core.session
    assert session is not None
    pod = copy.deepcopy(_pending(cluster)[job][0])
    if change_pod is not None:
        change_pod(pod)
    target = node or session.jobs[job].ranks[0]
    with caplog.at_level(logging.WARNING, logger="npu_place.extender"):
        core.allocate({"task": task_info(pod, job, STATUS["Allocated"], target)})
        core.deallocate({"task": task_info(pod, job, STATUS["Releasing"], target)})
    # the rank and UID reach the cache from both events; the node only from allocate
    wanted = ["allocateFunc"] if node is not None else ["allocateFunc", "deallocateFunc"]
    assert [verb for verb, _ in dropped] == wanted
    assert session.counts["events-dropped"] == len(wanted)
    assert any(text in r.getMessage() for r in caplog.records), caplog.text
    model = core.lifecycle.to_model()  # nothing of the event was kept
    assert all(e.rank < 65536 and e.node == e.node.strip("\x00") and len(e.node) < 254
               for e in model.entries)
    assert not any(uid.startswith("u\x1b") for uid in session.allocated)
    core.close_session()
    cluster.now += 30
    _open(core, cluster)  # the next session plans (it failed on the stored value before)
    assert core.session is not None and core.session.jobs


def test_a_bad_entry_already_in_the_cache_is_dropped_at_session_open(
        gang: tuple[VolcanoCluster, ExtenderCore, str], caplog: pytest.LogCaptureFixture
) -> None:
    cluster, core, job = gang
    _open(core, cluster)
    session = core.session
    assert session is not None
    owner = session.owners[job]
    good = session.jobs[job].ranks[0]
    core.lifecycle.allocate(owner, 0, good, session.now)
    core.lifecycle.allocate(owner, 70000, good, session.now)  # past every door
    core.lifecycle.allocate("other-owner", 1, "bad\x00node", session.now)
    core.close_session()
    with caplog.at_level(logging.WARNING, logger="npu_place.extender"):
        _open(core, cluster)
    assert core.session is not None and core.session.counts["cache-entries-dropped"] == 2
    assert "rank 70000 is outside" in caplog.text and "control or formatting" in caplog.text
    assert core.lifecycle.state(owner, 0) is not None  # the good entry of the owner stays
    assert core.lifecycle.state(owner, 70000) is None
    assert core.lifecycle.state("other-owner", 1) is None


def test_dropped_events_are_counted_in_the_metrics(
        gang: tuple[VolcanoCluster, ExtenderCore, str], tmp_path: Path) -> None:
    cluster, _, job = gang
    cluster.write_device_dump(tmp_path / "devices")
    config = ServiceConfig(warmup=False, extender=ExtenderConfig(
        configmaps=(str(tmp_path / "devices"),), **SETTINGS))
    with running_server(config) as (url, service), httpx.Client(timeout=30) as client:
        opened = client.post(f"{url}/volcano/onSessionOpen",
                             content=orjson.dumps(volcano_snapshot(cluster)))
        assert opened.status_code == 200
        pod = copy.deepcopy(_pending(cluster)[job][0])
        pod["metadata"]["annotations"]["hccl/rankIndex"] = "65536"
        body = orjson.dumps({"task": task_info(pod, job, STATUS["Allocated"], "node-0")})
        answer = client.post(f"{url}/volcano/allocateFunc", content=body)
        assert answer.status_code == 200 and answer.json() == {"errorMessage": ""}
        metrics = client.get(f"{url}/metrics").text
        assert ('npu_place_extender_events_dropped_total{field="task.Pod rank",'
                'verb="allocateFunc"} 1.0') in metrics
        core = service.extender
        assert core is not None and core.lifecycle.cache is not None
        assert all(core.lifecycle.state(o, 65536) is None
                   for o in core.lifecycle.cache.owners())


def test_a_good_event_is_still_recorded(gang: tuple[VolcanoCluster, ExtenderCore, str]
                                        ) -> None:
    cluster, core, job = gang
    _open(core, cluster)
    session = core.session
    assert session is not None
    pod = _pending(cluster)[job][0]
    rank = next(int(e["value"]) for e in pod["spec"]["containers"][0]["env"]
                if e["name"] == "VC_TASK_INDEX")
    node = session.jobs[job].ranks[rank]
    core.allocate({"task": task_info(pod, job, STATUS["Allocated"], node)})
    assert core.lifecycle.state(session.owners[job], rank) is EntryState.RECORDED
    assert "events-dropped" not in session.counts


def test_own_view_forwards_no_event_outside_the_bounds() -> None:
    core = ExtenderCore(ExtenderConfig(cluster="c1", **SETTINGS))
    session = core.begin()
    session.owners["train/a"] = "owner-a"
    pod = {"metadata": {"name": "a-0", "namespace": "train", "uid": "u0",
                        "annotations": {"hccl/rankIndex": "65536"}},
           "spec": {"containers": []}}
    task = {"UID": "u0", "Job": "train/a", "Pod": pod, "NodeName": "node-1"}
    assert core.cache_event({"task": task}, None) is None
    pod["metadata"]["annotations"]["hccl/rankIndex"] = "3"
    assert core.cache_event({"task": dict(task, NodeName="n" * 300)}, None) is None
    assert core.cache_event({"task": task}, None) == {
        "event": "bind", "owner-uid": "owner-a", "rank": 3, "node": "node-1"}


def test_vnpu_replicas_without_a_uid_take_a_slot_each(tmp_path: Path) -> None:
    from benchmarks.kube_dump import DumpBuilder
    from benchmarks.kube_dump_vnpu import example_vnpu

    files = example_vnpu()
    builder = DumpBuilder("device-plugin", now=1764400000)
    builder.nodes, builder.pods = files["nodes.json"], files["pods.json"]
    builder.podgroups = files["podgroups.json"]
    cluster = VolcanoCluster(builder, 1764400000, extra_devices=[
        *files["configmaps-cim.json"], *files["priorityclasses.json"],
        *files["volcano-scheduler-configmap.json"]])
    core = _core(cluster, tmp_path)
    _open(core, cluster)
    session = core.session
    assert session is not None
    plan = session.jobs["ai/chat-group"]
    assert plan.replicas and len(plan.ranks) >= 2
    nodes = _nodes(cluster)
    given = []
    for job, pods in _pending(cluster).items():
        for pod in pods:
            task = dict(task_info(pod, job, STATUS["Pending"]), UID="")
            (node, _), = json.loads(core.prioritize({"task": task, "nodes": nodes})
                                    )["nodeScore"].items()
            given.append(node)
    # one planned slot per replica (this plan puts both on one node: the slots tell them
    # apart; without a UID every replica took the first one's slot)
    assert sorted(given) == sorted(plan.ranks.values())
    assert len(plan.slots) == len(given) == len(plan.ranks)
