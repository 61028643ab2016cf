"""The watch inside the service (``serve --watch``), the extender's own view on it, and the
own view's cache events coalesced into few PATCHes."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from benchmarks.generators import GenParams, generate_case
from benchmarks.kube_api import LoopbackApiServer
from benchmarks.volcano_session import (
    STATUS,
    AscendStandIn,
    cluster_from_scenario,
    run_session,
    task_info,
)
from models.kube.jobs import bound_stamp
from models.kube.source import iter_objects
from models.kube.watch import WatchSettings
from solver.cli import main
from solver.service.app import ServiceConfig
from solver.service.extender import ExtenderConfig
from solver.service.extender import forward as extender_events
from solver.service.watcher import WatchConfig
from tests.solver.service.conftest import running_server
from tests.solver.service.test_watcher import NOW, oracle_at_once

pytest.importorskip("kubernetes")

DUMP = Path(__file__).resolve().parents[3] / "models/kube/examples/superpod-850/t0"
FAST = WatchSettings(page_size=7, watch_seconds=30, quiet_seconds=5.0, backoff=0.05,
                     backoff_max=0.5)


def _objects() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(DUMP.glob("*.json")):
        out += list(iter_objects(json.loads(path.read_text()), str(path)))
    return out


def _stored(client: httpx.Client, url: str, name: str) -> dict[str, Any] | None:
    answer = client.get(f"{url}/v1/clusters/{name}/scenario")
    return answer.json() if answer.status_code == 200 else None


def _wait(check: Any, seconds: float = 60.0) -> bool:
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        if check():
            return True
        time.sleep(0.05)
    return bool(check())


def test_serve_watch_keeps_the_stored_cluster_equal_to_the_import() -> None:
    """``serve --watch``: the service stores the import of the listed objects, then each
    change arrives as a PATCH through the worker pool (the whole-section fields of a
    delta included: running jobs, the cache); the extender's own view plans the watched
    cluster and Volcano's snapshot is dropped unparsed."""
    with LoopbackApiServer(bookmark_seconds=0.2) as api:
        for obj in _objects():
            api.apply(obj)
        watch = WatchConfig(cluster="kube", host=api.url, interval=0.05, settings=FAST,
                            clock=lambda: NOW)
        config = ServiceConfig(warmup=False, watch=watch,
                               extender=ExtenderConfig(cluster="kube", engine="greedy",
                                                       http_timeout=30.0))
        chain = oracle_at_once(api, None)
        with running_server(config) as (url, service), httpx.Client(timeout=60) as client:
            assert _wait(lambda: _stored(client, url, "kube") == chain.scenario.to_dict())
            version = client.get(f"{url}/v1/clusters/kube").json()["version"]
            pods = [o for o in _objects() if o["kind"] == "Pod"
                    and o["metadata"]["name"].startswith("finetune-worker-")]
            for pod in pods:  # the job evicted: its pods created again, pending
                pending = copy.deepcopy(pod)
                pending["spec"].pop("nodeName")
                pending["status"] = {"phase": "Pending"}
                api.apply(pending)
                chain = oracle_at_once(api, chain.scenario)
            assert _wait(lambda: _stored(client, url, "kube") == chain.scenario.to_dict())
            info = client.get(f"{url}/v1/clusters/kube").json()
            assert info["version"] > version
            assert info["last-update"] != "full"  # PATCHes, not a PUT
            status = service.extender  # the own view plans the watched cluster
            assert status is not None and status.config.cluster == "kube"
            opened = client.post(f"{url}/volcano/onSessionOpen", content=b'{"Jobs": {}}')
            assert opened.status_code == 200
            session = status.session
            assert session is not None and session.error is None
            assert session.counts["snapshot-bytes-dropped"] > 0
            assert any("finetune" in job for job in session.owners)


def test_own_view_events_are_coalesced_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Own view without a watch: a flood of allocateFunc events becomes few PATCHes of
    cache events (not one each), a bad event is dropped alone, and every good bind
    reaches the stored cluster's cache; the next session opens.  The interval is 1 s here,
    so that the count does not depend on how fast a loaded machine posts the events."""
    monkeypatch.setattr(extender_events, "EVENT_INTERVAL", 1.0)
    case = generate_case(GenParams("ordinary", nodes=8, seed=2, jobs=2, occupancy=0.2,
                                   unhealthy=0.0, subhealthy=0.0))
    cluster = cluster_from_scenario(case.scenario, "ordinary")
    config = ServiceConfig(warmup=False, extender=ExtenderConfig(cluster="c1", engine="greedy",
                                                                 http_timeout=30.0))
    with running_server(config) as (url, service), httpx.Client(timeout=60) as client:
        put = client.put(f"{url}/v1/clusters/c1",
                         content=orjson.dumps(cluster.scenario().to_dict()))
        assert put.status_code == 201
        run_session(client, f"{url}/volcano", cluster, AscendStandIn(), seed=1)
        session = service.extender.session
        assert session is not None and session.error is None
        steered = [job for job, yes in session.decided.items() if yes]
        assert steered
        job = steered[0]
        planned = session.jobs[job].ranks
        pods = [p for p in cluster.pods if p["metadata"].get("annotations", {}).get(
            "scheduling.k8s.io/group-name") == job.split("/", 1)[1]]
        version = client.get(f"{url}/v1/clusters/c1").json()["version"]
        sent = 0
        for round_ in range(40):
            for pod in pods:
                rank = int(pod["metadata"]["annotations"].get("hccl/rankIndex", -1))
                node = planned.get(rank) if rank >= 0 else None
                if node is None:
                    continue
                if round_ == 20 and sent % 7 == 0:
                    node = "no-such-node"  # refused by the cluster: dropped alone
                body = {"task": task_info(pod, job, STATUS["Allocated"], node)}
                answer = client.post(f"{url}/volcano/allocateFunc", content=orjson.dumps(body))
                assert answer.status_code == 200
                sent += 1
        assert sent >= 40
        owner = session.owners[job]

        def cached() -> bool:
            scenario = _stored(client, url, "c1") or {}
            entries = {(e["owner-uid"], e["rank"]): e["node"]
                       for e in scenario.get("affinity-cache", {}).get("entries", [])}
            return all(entries.get((owner, r)) == n for r, n in planned.items())

        assert _wait(cached)
        patches = client.get(f"{url}/v1/clusters/c1").json()["version"] - version
        assert 1 <= patches < sent // 2, (patches, sent)
        opened = client.post(f"{url}/volcano/onSessionOpen", content=b"{}")
        assert opened.status_code == 200


def test_watch_command_refuses_a_bad_name_and_an_unreachable_cluster(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Bad input: a clear message and exit 2, no traceback."""
    assert main(["watch", "bad/name"]) == 2
    assert "not a cluster name" in capsys.readouterr().err
    missing = tmp_path / "nope.yaml"
    code = main(["watch", "c", "--kubeconfig", str(missing)])
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "kubeconfig" in err


def test_watch_command_stores_and_patches_a_service_cluster(tmp_path: Path) -> None:
    """``npu-place watch NAME --kubeconfig FILE --service URL``: the service's cluster is the
    import of the API server's objects (at the watcher's clock)."""
    with LoopbackApiServer(bookmark_seconds=0.2) as api, \
            running_server(ServiceConfig(warmup=False)) as (url, _), \
            httpx.Client(timeout=60) as client:
        for obj in _objects():
            api.apply(obj)
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "loop",
            "clusters": [{"name": "loop", "cluster": {"server": api.url}}],
            "users": [{"name": "u", "user": {}}],
            "contexts": [{"name": "loop", "context": {"cluster": "loop", "user": "u"}}]}))
        code = main(["watch", "w1", "--kubeconfig", str(kubeconfig), "--service", url,
                     "--seconds", "3", "--status-every", "0"])
        assert code == 0
        stored = _stored(client, url, "w1")
        assert stored is not None
        want = oracle_at_once(api, None).scenario.to_dict()
        want["now"] = stored["now"]
        for entry in want["affinity-cache"]["entries"]:  # bound now: stamped at that now
            entry["updated"] = bound_stamp(entry["owner-uid"], stored["now"])
        assert stored == want
