"""The extender's verbs one by one: abstaining, refusals of hostile snapshots, the path
token, the cache lifecycle from Volcano's events, vNPU jobs, the serve options."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from benchmarks.generators import GenParams, generate_case
from benchmarks.kube_dump import DumpBuilder
from benchmarks.kube_dump_vnpu import example_vnpu
from benchmarks.volcano_session import (
    STATUS,
    AscendStandIn,
    VolcanoCluster,
    cluster_from_scenario,
    run_session,
    task_info,
    volcano_snapshot,
)
from heuristics.lifecycle import EntryState
from solver.cli import main
from solver.service.app import ServiceConfig
from solver.service.extender import (
    PLANNED_SCORE,
    ExtenderConfig,
    ExtenderCore,
    SnapshotError,
)
from tests.solver.service.conftest import running_server

ABSTAIN = {"nodeScore": {}, "errorMessage": ""}
SETTINGS = dict(engine="greedy", http_timeout=30.0)


def _core(cluster: VolcanoCluster, folder: Path, **settings: Any) -> ExtenderCore:
    cluster.write_device_dump(folder)
    core = ExtenderCore(ExtenderConfig(configmaps=(str(folder),), **{**SETTINGS, **settings}),
                        clock=lambda: cluster.now)
    return core


def _open(core: ExtenderCore, cluster: VolcanoCluster) -> None:
    session = core.begin()
    core.open_session(session, orjson.dumps(volcano_snapshot(cluster)), float("inf"))
    assert session.error is None, session.error


def _pending(cluster: VolcanoCluster) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for pod in cluster.pods:
        group = pod["metadata"].get("annotations", {}).get("scheduling.k8s.io/group-name")
        if group and not pod["spec"].get("nodeName"):
            out.append((f"{pod['metadata']['namespace']}/{group}", pod))
    return out


def _nodes(cluster: VolcanoCluster) -> list[dict[str, Any]]:
    return [v for v in volcano_snapshot(cluster)["Nodes"].values()]


@pytest.fixture
def small(tmp_path: Path) -> tuple[VolcanoCluster, ExtenderCore]:
    case = generate_case(GenParams("ordinary", nodes=8, seed=2, jobs=2, occupancy=0.2,
                                   unhealthy=0.0, subhealthy=0.0))
    cluster = cluster_from_scenario(case.scenario, "ordinary")
    return cluster, _core(cluster, tmp_path)


def test_no_session_unknown_task_and_late_plan_abstain(small: tuple[VolcanoCluster,
                                                                   ExtenderCore]) -> None:
    cluster, core = small
    job, pod = _pending(cluster)[0]
    task = task_info(pod, job, STATUS["Pending"])
    nodes = _nodes(cluster)
    # before any session
    assert json.loads(core.prioritize({"task": task, "nodes": nodes})) == ABSTAIN
    assert json.loads(core.predicate({"task": task, "node": nodes[0]}))["code"] == 0
    # a session whose plan is not ready: the job abstains for the whole session
    session = core.begin()
    assert json.loads(core.prioritize({"task": task, "nodes": nodes})) == ABSTAIN
    core.open_session(session, orjson.dumps(volcano_snapshot(cluster)), float("inf"))
    assert job in session.jobs and session.jobs[job].steer
    assert json.loads(core.prioritize({"task": task, "nodes": nodes})) == ABSTAIN
    # the next session steers it; an unknown job and a task without a pod abstain
    _open(core, cluster)
    answer = json.loads(core.prioritize({"task": task, "nodes": nodes}))
    assert answer["errorMessage"] == "" and list(answer["nodeScore"].values()) == [
        PLANNED_SCORE]
    stranger = dict(task, Job="other/unknown-pg")
    assert json.loads(core.prioritize({"task": stranger, "nodes": nodes})) == ABSTAIN
    assert json.loads(core.prioritize({"task": dict(task, Pod=None), "nodes": nodes})) \
        == ABSTAIN
    # the planned node not among the candidates (an early-stopped predicate phase)
    planned = next(iter(answer["nodeScore"]))
    others = [n for n in nodes if n["Name"] != planned]
    assert json.loads(core.prioritize({"task": task, "nodes": others})) == ABSTAIN
    # after the session closed
    core.close_session()
    assert json.loads(core.prioritize({"task": task, "nodes": nodes})) == ABSTAIN


def test_predicate_is_job_level(small: tuple[VolcanoCluster, ExtenderCore]) -> None:
    cluster, core = small
    _open(core, cluster)
    session = core.session
    assert session is not None
    job = next(j for j, _ in _pending(cluster) if session.jobs[j].steer)
    planned = session.jobs[job].nodes
    for other_job, other_pod in _pending(cluster):
        if other_job != job:
            continue
        task = task_info(other_pod, job, STATUS["Pending"])
        for node in _nodes(cluster):
            answer = json.loads(core.predicate({"task": task, "node": node}))
            # every task of the job gets the same answer per node: the job's planned set
            assert (answer["code"] == 0) == (node["Name"] in planned), node["Name"]
            if answer["code"]:
                assert answer["code"] == 2 and node["Name"] in answer["status"]


def test_allocate_discard_evict_drive_the_cache(small: tuple[VolcanoCluster,
                                                             ExtenderCore]) -> None:
    cluster, core = small
    _open(core, cluster)
    session = core.session
    assert session is not None
    job, pod = _pending(cluster)[0]
    owner = session.owners[job]
    rank = int(pod["spec"]["containers"][0]["env"][0]["value"])
    node = session.jobs[job].ranks[rank]
    core.allocate({"task": task_info(pod, job, STATUS["Allocated"], node)})
    assert core.lifecycle.state(owner, rank) is EntryState.RECORDED
    core.deallocate({"task": task_info(pod, job, STATUS["Pending"], node)})  # gang discard
    assert core.lifecycle.state(owner, rank) is None
    core.allocate({"task": task_info(pod, job, STATUS["Allocated"], node)})
    core.deallocate({"task": task_info(pod, job, STATUS["Releasing"], node)})  # evicted
    assert core.lifecycle.state(owner, rank) is EntryState.KEPT
    assert core.lifecycle.node(owner, rank) == node
    assert session.counts["discarded"] == 1 and session.counts["evicted"] == 1


def test_vnpu_replicas_take_the_planned_nodes(tmp_path: Path) -> None:
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
    assert plan.replicas and plan.steer
    nodes = _nodes(cluster)
    given = []
    for job, pod in _pending(cluster):
        task = task_info(pod, job, STATUS["Pending"])
        answer = json.loads(core.prioritize({"task": task, "nodes": nodes}))
        (node, score), = answer["nodeScore"].items()
        assert score == PLANNED_SCORE
        # asked again, the same task keeps its node
        assert json.loads(core.prioritize({"task": task, "nodes": nodes}))["nodeScore"] == {
            node: score}
        given.append(node)
    assert sorted(given) == sorted(plan.ranks.values())
    assert all(n.startswith("vnpu-") for n in given)


def test_hostile_snapshots_are_refused(small: tuple[VolcanoCluster, ExtenderCore]) -> None:
    _, core = small
    cases: list[tuple[bytes, int, str]] = [
        (b"{not json", 400, "not JSON"),
        (b"[1, 2]", 422, "OnSessionOpenRequest"),
        (b'{"Queues": {}}', 422, "neither 'Jobs' nor 'Nodes'"),
        (b'{"Nodes": {"n1": {"Name": "n1"}}}', 422, "Nodes[n1].Node"),
        (b'{"Jobs": {"a/b": {"Tasks": {"t": {"Pod": 3}}}}}', 422, "Jobs[a/b].Tasks[t].Pod"),
        (b"[" * 100_000 + b"]" * 100_000, 400, "not JSON"),
    ]
    for body, status, text in cases:
        session = core.begin()
        with pytest.raises(SnapshotError) as caught:
            core.open_session(session, body, float("inf"))
        assert caught.value.status == status and text in " ".join(caught.value.messages)
        assert session.ready.is_set() and session.error
    # a node Volcano knows by name only is skipped, not a refusal
    session = core.begin()
    core.open_session(session, b'{"Nodes": {"n1": {"Name": "n1", "Node": null}}, "Jobs": {}}',
                      float("inf"))
    assert session.error is None and session.counts["nodes"] == 0
    # a body whose values would take far more memory than its bytes: refused unparsed
    dense = b'{"Queues": [' + b"{}," * 400_000 + b"{}]}"
    bounded = ExtenderCore(ExtenderConfig(max_values=300_000))
    with pytest.raises(SnapshotError) as caught:
        bounded.open_session(bounded.begin(), dense, float("inf"))
    assert caught.value.status == 413 and "JSON values" in caught.value.messages[0]
    crowded = {"Nodes": {f"n{i}": {"Node": {"metadata": {"name": f"n{i}"}}}
                         for i in range(5)}}
    tight = ExtenderCore(ExtenderConfig(max_nodes=4))
    with pytest.raises(SnapshotError) as caught:
        tight.open_session(tight.begin(), orjson.dumps(crowded), float("inf"))
    assert "at most 4" in caught.value.messages[0]


def test_http_limits_and_path_token(tmp_path: Path) -> None:
    case = generate_case(GenParams("ordinary", nodes=8, seed=2, jobs=1))
    cluster = cluster_from_scenario(case.scenario, "ordinary")
    cluster.write_device_dump(tmp_path)
    config = ServiceConfig(warmup=False, token="s3cret-token", extender=ExtenderConfig(
        configmaps=(str(tmp_path),), max_snapshot_mb=0.01, **SETTINGS))
    with running_server(config) as (url, _), httpx.Client(timeout=30) as client:
        base = f"{url}/volcano/s3cret-token"
        # declared too large: 413 before the body is read
        big = b"x" * 20_000
        answer = client.post(f"{base}/onSessionOpen", content=big)
        assert answer.status_code == 413
        # streamed without a length: 413 once the limit is passed

        def chunks() -> Any:
            for _ in range(100):
                yield b"x" * 1000

        assert client.post(f"{base}/onSessionOpen", content=chunks()).status_code == 413
        assert client.post(f"{base}/onSessionOpen", content=b"{").status_code == 400
        assert client.post(f"{base}/onSessionOpen", content=b"{}").status_code == 422
        # the token is the only way in: no token or a wrong one is a 404, the service's
        # own routes still need the bearer header
        assert client.post(f"{url}/volcano/prioritize", content=b"{}").status_code == 404
        assert client.post(f"{url}/volcano/wrong/prioritize", content=b"{}").status_code == 404
        assert client.get(f"{url}/v1/clusters/x").status_code == 401
        abstain = client.post(f"{base}/prioritize", content=b'{"task": {}, "nodes": []}')
        assert abstain.status_code == 200 and abstain.json() == ABSTAIN
        assert client.post(f"{base}/onSessionClose", content=b"{}").json() == {}


def test_plan_late_session_answers_on_time(small: tuple[VolcanoCluster, ExtenderCore],
                                           tmp_path: Path) -> None:
    cluster, _ = small
    cluster.write_device_dump(tmp_path)
    config = ServiceConfig(warmup=False, extender=ExtenderConfig(
        configmaps=(str(tmp_path),), engine="greedy", http_timeout=1.0))
    with running_server(config) as (url, service), httpx.Client(timeout=30) as client:
        core = service.extender
        assert core is not None
        release = threading.Event()
        plan = core._plan

        def slow(*args: Any) -> None:  # the plan finishes only when the test says so
            release.wait(30)
            plan(*args)

        core._plan = slow  # type: ignore[method-assign]
        body = orjson.dumps(volcano_snapshot(cluster))
        answer = client.post(f"{url}/volcano/onSessionOpen", content=body)
        assert answer.status_code == 200
        session = core.session
        assert session is not None and not session.ready.is_set()
        assert session.counts["answered-before-plan"] == 1
        job, pod = _pending(cluster)[0]
        task = task_info(pod, job, STATUS["Pending"])
        asked = client.post(f"{url}/volcano/prioritize",
                            content=orjson.dumps({"task": task, "nodes": _nodes(cluster)}))
        assert asked.json() == ABSTAIN
        release.set()
        assert session.ready.wait(30)
        again = client.post(f"{url}/volcano/prioritize",
                            content=orjson.dumps({"task": task, "nodes": _nodes(cluster)}))
        assert again.json() == ABSTAIN  # asked before the plan: abstains all session

        # a prioritize whose work is not done by its answer time (0.7 s after its first
        # byte) is answered neutral while the work is still stalled, not with a 408
        # after Volcano's own timeout; the stalled work's result is not given
        stalled, resumed, finished = threading.Event(), threading.Event(), threading.Event()
        scored = core.prioritize_raw

        def stalled_prioritize(*args: Any) -> bytes:
            stalled.set()
            resumed.wait(10)
            finished.set()
            return scored(*args)

        core.prioritize_raw = stalled_prioritize  # type: ignore[method-assign]
        late = client.post(f"{url}/volcano/prioritize",
                           content=orjson.dumps({"task": task, "nodes": _nodes(cluster)}))
        assert stalled.is_set() and not finished.is_set()  # answered while stalled
        assert late.status_code == 200 and late.json() == ABSTAIN
        resumed.set()
        core.prioritize_raw = scored  # type: ignore[method-assign]
        assert session.counts["prioritize-late"] == 1

        def broken(*args: Any) -> bytes:
            raise RuntimeError("a bug in the service")

        # a failure of the service's own code abstains (200), it never drops the task
        core.prioritize_raw = broken  # type: ignore[method-assign]
        core.predicate = broken  # type: ignore[method-assign]
        body = orjson.dumps({"task": task, "nodes": _nodes(cluster)})
        failed = client.post(f"{url}/volcano/prioritize", content=body)
        assert failed.status_code == 200 and failed.json() == ABSTAIN
        body = orjson.dumps({"task": task, "node": _nodes(cluster)[0]})
        failed = client.post(f"{url}/volcano/predicate", content=body)
        assert failed.status_code == 200 and failed.json() == {"status": "", "code": 0}


def test_serve_refuses_extender_beyond_loopback_without_tls(capsys: Any,
                                                             tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    code = main(["serve", "--extender", "--host", "0.0.0.0", "--token-file", str(token)])
    assert code == 2
    assert "the verbs need TLS" in capsys.readouterr().err
    code = main(["serve", "--extender", "--extender-prefix", "volcano", "--port", "0"])
    assert code == 2
    assert "--extender-prefix volcano: expected a path" in capsys.readouterr().err
    code = main(["serve", "--extender", "--port", "0"])
    assert code == 2
    assert "--extender needs the device state" in capsys.readouterr().err


def test_own_view_plans_the_stored_cluster_and_feeds_its_cache(tmp_path: Path) -> None:
    case = generate_case(GenParams("ordinary", nodes=8, seed=2, jobs=2, occupancy=0.2,
                                   unhealthy=0.0, subhealthy=0.0))
    cluster = cluster_from_scenario(case.scenario, "ordinary")
    stored = cluster.scenario()
    config = ServiceConfig(warmup=False, extender=ExtenderConfig(cluster="c1", **SETTINGS))
    with running_server(config) as (url, service), httpx.Client(timeout=60) as client:
        core = service.extender
        assert core is not None
        # no stored cluster yet: the session is refused (Volcano's stock behaviour)
        refused = client.post(f"{url}/volcano/onSessionOpen", content=b"{}")
        assert refused.status_code == 422 and "does not exist" in refused.text
        put = client.put(f"{url}/v1/clusters/c1", content=orjson.dumps(stored.to_dict()))
        assert put.status_code == 201
        report = run_session(client, f"{url}/volcano", cluster, AscendStandIn(), seed=1)
        session = core.session
        assert session is not None and session.error is None
        assert session.counts["snapshot-bytes-dropped"] > 0  # read, not parsed
        steered = [job for job, yes in session.decided.items() if yes]
        assert steered
        for job in steered:
            assert report.bindings[job] == session.jobs[job].ranks
        # Volcano's allocations reached the stored cluster's cache as bind events
        wanted = {(session.owners[job], rank): node for job in steered
                  for rank, node in report.bindings[job].items()}
        for _ in range(600):  # the events are forwarded without waiting: at most 30 s
            cache = client.get(f"{url}/v1/clusters/c1/scenario").json()["affinity-cache"]
            entries = {(e["owner-uid"], e["rank"]): e["node"] for e in cache["entries"]}
            if all(entries.get(key) == node for key, node in wanted.items()):
                break
            threading.Event().wait(0.05)
        assert all(entries.get(key) == node for key, node in wanted.items())


def test_prioritize_from_bytes_answers_as_the_full_parse(
        small: tuple[VolcanoCluster, ExtenderCore]) -> None:
    cluster, core = small
    _open(core, cluster)
    nodes = _nodes(cluster)
    seen = set()
    for job, pod in _pending(cluster):
        task = task_info(pod, job, STATUS["Pending"])
        for candidates in (nodes, nodes[::2], nodes[1::2], []):
            body = {"task": task, "nodes": candidates}
            full = core.prioritize(body)
            # Go's layout: parsed up to the task, the candidates found by their opening
            assert core.prioritize_raw(orjson.dumps(body)) == full
            # another key order or spacing: parsed whole, same answer
            assert core.prioritize_raw(json.dumps(
                {"nodes": candidates, "task": task}, indent=1).encode()) == full
            seen.add(full != orjson.dumps(ABSTAIN))
    assert seen == {True, False}  # steered and abstaining answers both compared
    with pytest.raises(orjson.JSONDecodeError):
        core.prioritize_raw(b'{"task": ')


def test_serve_extender_end_to_end(small: tuple[VolcanoCluster, ExtenderCore],
                                   tmp_path: Path) -> None:
    import signal
    import socket
    import subprocess
    import sys
    import time

    cluster, _ = small
    cluster.write_device_dump(tmp_path / "devices")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "solver.cli", "serve", "--port", str(port), "--extender",
         "--extender-configmaps", str(tmp_path / "devices"), "--extender-engine", "greedy",
         "--extender-http-timeout", "20", "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        with httpx.Client(timeout=30) as client:
            while True:
                try:
                    if client.get(f"{url}/healthz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline and server.poll() is None
                time.sleep(0.1)
            opened = client.post(f"{url}/volcano/onSessionOpen",
                                 content=orjson.dumps(volcano_snapshot(cluster)))
            assert opened.status_code == 200
            job, pod = _pending(cluster)[0]
            body = orjson.dumps({"task": task_info(pod, job, STATUS["Pending"]),
                                 "nodes": _nodes(cluster)})
            scores = client.post(f"{url}/volcano/prioritize", content=body).json()
            assert list(scores["nodeScore"].values()) == [PLANNED_SCORE]
            sessions = client.get(f"{url}/volcano/sessions").json()
            assert client.post(f"{url}/volcano/onSessionClose", content=b"{}").json() == {}
            assert sessions == [] and client.get(f"{url}/volcano/sessions").json()[0][
                "counts"]["prioritize-steered"] == 1
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(60) == 0


def test_a_deleted_job_leaves_the_cache_an_evicted_one_stays(
        small: tuple[VolcanoCluster, ExtenderCore]) -> None:
    cluster, core = small
    _open(core, cluster)
    session = core.session
    assert session is not None
    jobs = sorted(j for j, plan in session.jobs.items() if plan.steer)
    assert len(jobs) >= 2
    for job, pod in _pending(cluster):  # Volcano allocates and binds as planned
        rank = int(pod["spec"]["containers"][0]["env"][0]["value"])
        node = session.jobs[job].ranks[rank]
        core.allocate({"task": task_info(pod, job, STATUS["Allocated"], node)})
        cluster.bind(pod, node, [], None)
    owners = {job: session.owners[job] for job in jobs}
    core.close_session()
    cluster.evict(jobs[0])  # pods deleted, PodGroup kept: the job comes back
    cluster.delete_job(jobs[1])  # PodGroup and pods deleted
    cluster.now += 60
    _open(core, cluster)
    assert core.lifecycle.state(owners[jobs[0]], 0) is not None
    assert core.lifecycle.state(owners[jobs[1]], 0) is None
    assert core.session is not None and core.session.counts["owners-deleted"] == 1


def test_a_superseded_session_is_not_planned(small: tuple[VolcanoCluster,
                                                        ExtenderCore]) -> None:
    cluster, core = small
    body = orjson.dumps(volcano_snapshot(cluster))
    late = core.begin()
    current = core.begin()  # Volcano opened the next session before the first was read
    core.open_session(late, body, float("inf"))
    assert late.ready.is_set() and late.error is not None and "superseded" in late.error
    assert not late.jobs
    core.open_session(current, body, float("inf"))
    assert current.error is None and current.jobs
