"""vNPU on the service's doors: a PATCH changes a stored cluster's vNPU chips and its
``vnpu-jobs`` by the full body's rules; a refused one leaves the cluster byte-identical;
a restarted worker rebuilds the vNPU state from its replay log.  A real server on
loopback."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from models.scenario import Scenario
from solver.service.app import ServiceConfig
from tests.solver.service.conftest import HTTP_TIMEOUT, example, running_server
from tests.solver.service.test_service_under_attack import (
    _kill_home_worker,
    full_body_accepted,
    greedy_plan,
    patch,
    put,
    state,
)


def vnpu_cluster() -> dict[str, Any]:
    return example("vnpu-inference").to_dict()


#: vnpu-310p-1 cut down to one free AI core per chip; chat replaced by one replica, a new
#: speech service, the re-ranker gone.
SESSION = {
    "node-updates": [{"name": "vnpu-310p-1", "vnpu-chips": [
        {"id": c, "free-cores": 1, "free-cpus": 1, "segmented": True, "dvpp": "null"}
        for c in range(4)]},
        {"name": "vnpu-310p-2", "unfinished-templates": []}],
    "vnpu-jobs-removed": ["infer-chat", "infer-rerank"],
    "vnpu-jobs-submitted": [
        {"name": "infer-chat", "owner-uid": "rs-chat-7c1e", "tasks": 1, "ai-cores": 4,
         "priority": 100, "image-size-gb": 20},
        {"name": "infer-asr", "owner-uid": "rs-asr-1", "tasks": 2, "ai-cores": 1}],
}


def test_a_vnpu_delta_changes_chips_and_vnpu_jobs(http: httpx.Client) -> None:
    put(http, "v", vnpu_cluster())
    response = patch(http, "v", SESSION)
    assert response.status_code == 200, response.text
    info = response.json()
    assert info["last-update"] == "jobs" and info["vnpu-jobs"] == 4
    stored = Scenario.model_validate(http.get("/v1/clusters/v/scenario").json())
    node = next(n for n in stored.nodes if n.name == "vnpu-310p-1")
    assert node.vnpu is not None and [c.free_cores for c in node.vnpu.chips or []] == [1] * 4
    assert [j.name for j in stored.vnpu_jobs] == ["infer-embed", "infer-ocr", "infer-chat",
                                                   "infer-asr"]
    assert full_body_accepted(http, http.get("/v1/clusters/v/scenario").content)
    plan = dict((name, ranks) for name, _, ranks in greedy_plan(http, "v"))
    assert "vnpu-310p-1" not in plan["infer-chat"].values()  # no 4 free cores there now
    assert set(plan) >= {"infer-chat", "infer-asr", "train-llm"}


@pytest.mark.parametrize(("delta", "words"), [
    ({"node-updates": [{"name": "vnpu-310p-1", "vnpu-chips": [{"id": 0, "free-cores": 9}]}]},
     ["vnpu-310p-1", "free-cores"]),
    ({"node-updates": [{"name": "train-1", "vnpu-chips": [{"id": 0}]}]},
     ["node-updates[0].vnpu-chips", "not a vNPU node"]),
    ({"vnpu-jobs-submitted": [{"name": "x", "tasks": 1, "ai-cores": 3}]}, ["'x'", "req npu"]),
    ({"vnpu-jobs-submitted": [{"name": "x\x1b[2J", "tasks": 1, "ai-cores": 1}]},
     ["vnpu-jobs-submitted", "\\x1b"]),
    ({"vnpu-jobs-removed": ["infer-chat"], "vnpu-jobs-submitted": [
        {"name": "infer-chat", "tasks": 1, "ai-cores": 1},
        {"name": "infer-chat", "tasks": 1, "ai-cores": 2}]}, ["infer-chat", "duplicate"]),
    # a good chip change with a bad job: the whole delta is refused
    ({"node-updates": [{"name": "vnpu-310p-1", "vnpu-chips": [{"id": 0, "free-cores": 1}]}],
      "vnpu-jobs-removed": ["nope"]}, ["vnpu-jobs-removed[0]", "nope"]),
], ids=["free-cores-9", "not-vnpu", "ai-cores-3", "escape", "duplicate", "half-good"])
def test_a_refused_vnpu_delta_leaves_the_cluster_byte_identical(
        http: httpx.Client, delta: dict[str, Any], words: list[str]) -> None:
    put(http, "va", vnpu_cluster())
    before = state(http, "va")
    plan_before = greedy_plan(http, "va")
    response = patch(http, "va", delta)
    assert response.status_code == 422, response.text
    text = " ".join(response.json()["messages"])
    assert all(w in text for w in words), text
    assert "Traceback" not in text and "\x1b" not in text
    assert state(http, "va") == before
    assert greedy_plan(http, "va") == plan_before
    assert full_body_accepted(http, before[0])


def test_a_restarted_worker_rebuilds_the_vnpu_state_exactly() -> None:
    with running_server(ServiceConfig(warmup=False)) as (url, service), \
            httpx.Client(base_url=url, timeout=HTTP_TIMEOUT) as http:
        put(http, "vr", vnpu_cluster())
        for delta in (SESSION, {"vnpu-jobs-removed": ["infer-asr"], "node-updates": [
                {"name": "vnpu-310p-3", "vnpu-chips": [{"id": 1, "free-cores": 4,
                                                         "segmented": True}],
                 "health": "healthy"}]}):
            response = patch(http, "vr", json.loads(json.dumps(delta)))
            assert response.status_code == 200, response.text
        before = state(http, "vr")
        plan = greedy_plan(http, "vr")
        _kill_home_worker(service, "vr")
        assert state(http, "vr") == before
        assert greedy_plan(http, "vr") == plan
