"""The watcher keeps a stored cluster equal to the chain of imports of the watched objects.

A loopback API server (:mod:`benchmarks.kube_api`) holds the objects of a bundled dump;
random sequences of object changes (pods evicted, bound back, failed, deleted; nodes
cordoned, relabelled, deleted and restored; PodGroups and device-info ConfigMaps deleted
before or after their pods) and disruptions (dropped watches, compaction with ``410
Gone``, bookmarks) are applied to it.  After each change the oracle imports the objects
through the same list calls as ``import --kubeconfig``, with ``--previous`` the import
before; the watcher's stored cluster must end equal to the last import of that chain.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.kube_api import KIND_RESOURCE, LoopbackApiServer
from models.kube import ClusterImport, Diagnostics, ImportResult, pages
from models.kube import live as kube_live
from models.kube import stream as kube_stream
from models.kube.source import iter_objects
from models.kube.watch import WatchSettings, strip_object, wanted
from models.scenario import Scenario
from models.validation import InputError
from solver.service.state import ClusterStore
from solver.service.watcher import ClusterWatcher, StoreTarget, start_watch

pytest.importorskip("kubernetes")
from kubernetes import client

NOW = 1_764_400_000
DUMP = Path(__file__).resolve().parents[3] / "models/kube/examples/superpod-850/t0"
FAST = WatchSettings(page_size=7, watch_seconds=30, quiet_seconds=5.0, backoff=0.05,
                     backoff_max=0.5)
#: Seconds the watcher may take to catch up in a test (a loaded machine).
CATCH_UP = 30.0
#: Nodes of the dump with every chip free.
FREE_NODES = ("sp2-node-4", "sp2-node-5", "sp2-node-6", "sp1-node-7")


def dump_objects() -> list[dict[str, Any]]:
    """Every object of the bundled dump."""
    out: list[dict[str, Any]] = []
    for path in sorted(DUMP.glob("*.json")):
        out += list(iter_objects(json.loads(path.read_text()), str(path)))
    return out


def oracle(server: LoopbackApiServer, previous: Scenario | None,
           monkeypatch: pytest.MonkeyPatch) -> ImportResult:
    """``import --kubeconfig`` of the server's objects now, with ``--previous``."""
    monkeypatch.setattr(kube_live, "api_client", lambda *a, **k: client.ApiClient(
        client.Configuration(host=server.url)))
    importer = ClusterImport(Diagnostics())
    kube_live.read_live(importer.add, importer.diag, page_size=5)
    return importer.build(now=NOW, previous=previous)


def oracle_at_once(server: LoopbackApiServer, previous: Scenario | None,
                   objects: dict[str, Any] | None = None) -> ImportResult:
    """The same import as :func:`oracle`, from the server's lists without HTTP (so that a
    burst of changes is not spread out by the oracle's own list calls); ``objects``: a
    copy of the server's objects taken earlier, imported instead of the current ones."""
    if objects is not None:
        server = LoopbackApiServer()
        server.objects = objects
    importer = ClusterImport(Diagnostics())
    for call in kube_live.list_calls(client.ApiClient()):
        resource = KIND_RESOURCE[call.kind]
        _, body = server.list_page(resource, call.kwargs.get("namespace"),
                                   call.kwargs.get("label_selector"),
                                   call.kwargs.get("field_selector"), 0, None)
        for item in body["items"]:
            item.setdefault("kind", call.kind)
            importer.add(item, f"API list of {call.what}")
    return importer.build(now=NOW, previous=previous)


class Harness:
    """The server, the watcher into a stored cluster, and the oracle's chain."""

    def __init__(self, server: LoopbackApiServer, monkeypatch: pytest.MonkeyPatch,
                 over_http: bool = True) -> None:
        self.server = server
        self.monkeypatch = monkeypatch
        self.store = ClusterStore()
        # the first import over HTTP (``import --kubeconfig``'s paged lists: about 1 s on
        # the loopback server), or from the server's lists directly (the same objects)
        self.chain: ImportResult = (oracle(server, None, monkeypatch) if over_http
                                    else oracle_at_once(server, None))
        self.watcher, self.streams = start_watch(
            client.ApiClient(client.Configuration(host=server.url)),
            StoreTarget(self.store, "watched"), interval=0.05, settings=FAST,
            clock=lambda: NOW, sync_timeout=CATCH_UP)

    def step(self, at_once: bool = False) -> None:
        """One event boundary: the next import of the chain (``at_once``: without HTTP)."""
        try:
            self.chain = (oracle_at_once(self.server, self.chain.scenario) if at_once
                          else oracle(self.server, self.chain.scenario, self.monkeypatch))
        except InputError as exc:
            raise AssertionError(f"the importer refuses a state: {exc}") from None

    def stored(self) -> dict[str, Any] | None:
        cluster = self.store.get("watched")
        return cluster.snapshot.problem.scenario.to_dict() if cluster is not None else None

    def caught_up(self) -> bool:
        """Wait until the stored cluster equals the chain's last import."""
        want = self.chain.scenario.to_dict()
        ends = time.monotonic() + CATCH_UP
        while time.monotonic() < ends:
            if self.watcher.coalescer.idle() and self.stored() == want:
                return True
            time.sleep(0.02)
        return self.stored() == want

    def close(self) -> None:
        self.streams.stop()
        self.watcher.stop()


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    with LoopbackApiServer(bookmark_seconds=0.1) as server:
        for obj in dump_objects():
            server.apply(obj)
        h = Harness(server, monkeypatch)
        try:
            yield h
        finally:
            h.close()


def _pending_copy(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod Volcano creates again after an eviction: same name, not bound."""
    out = copy.deepcopy(pod)
    out["spec"].pop("nodeName", None)
    out["status"] = {"phase": "Pending"}
    for key in ("huawei.com/npu", "huawei.com/AscendReal"):
        out["metadata"]["annotations"].pop(key, None)
    return out


def apply_step(server: LoopbackApiServer, base: dict[str, list[dict[str, Any]]],
               step: tuple[Any, ...]) -> bool:
    """Apply one random step to the server; whether it changed an object."""
    what, index = step[0], step[1]
    pods, nodes, groups, maps = base["Pod"], base["Node"], base["PodGroup"], base["ConfigMap"]
    if what == "evict":
        pod = pods[index % len(pods)]
        server.apply(_pending_copy(pod))
    elif what == "bind":
        server.apply(pods[index % len(pods)])  # back on its node, as it ran
    elif what in ("place", "unplace"):  # a pending job's pod bound to a free node, or not
        pending = [p for p in pods if not p["spec"].get("nodeName")]
        pod = copy.deepcopy(pending[index % len(pending)])
        if what == "place":
            pod["spec"]["nodeName"] = FREE_NODES[step[2] % len(FREE_NODES)]
            pod["status"] = {"phase": "Running"}
        server.apply(pod)
    elif what == "fail":
        pod = copy.deepcopy(pods[index % len(pods)])
        pod["status"] = {"phase": "Failed"}
        server.apply(pod)
    elif what == "delete-pod":
        pod = pods[index % len(pods)]["metadata"]
        return server.delete("Pod", pod["name"], pod["namespace"])
    elif what in ("cordon", "label", "cordon-pod-node"):
        if what == "cordon-pod-node":  # the node a pod ran on (its job's cache entry)
            name = pods[index % len(pods)]["spec"].get("nodeName")
            node = copy.deepcopy(next((n for n in nodes if n["metadata"]["name"] == name),
                                      nodes[index % len(nodes)]))
        else:
            node = copy.deepcopy(nodes[index % len(nodes)])
        if what != "label":
            node["spec"]["unschedulable"] = bool(step[2] % 2)
        else:
            node["metadata"].setdefault("labels", {})["rack"] = f"r{step[2]}"
        server.apply(node)
    elif what == "delete-node":
        return server.delete("Node", nodes[index % len(nodes)]["metadata"]["name"])
    elif what == "restore-node":
        server.apply(nodes[index % len(nodes)])
    elif what == "delete-group":
        meta = groups[index % len(groups)]["metadata"]
        return server.delete("PodGroup", meta["name"], meta["namespace"])
    elif what == "restore-group":
        server.apply(groups[index % len(groups)])
    elif what == "delete-map":
        meta = maps[index % len(maps)]["metadata"]
        return server.delete("ConfigMap", meta["name"], meta.get("namespace", ""))
    elif what == "restore-map":
        server.apply(maps[index % len(maps)])
    return True


def import_after(server: LoopbackApiServer, base: dict[str, list[dict[str, Any]]],
                 step: tuple[Any, ...], previous: Scenario) -> ImportResult | None:
    """The chain's next import: the objects after ``step`` (tried on a copy of the
    server's) imported with ``previous``; ``None`` when the importer refuses them, as the
    chain has no import at such a boundary and the step is left out."""
    trial = LoopbackApiServer()
    trial.objects = copy.deepcopy(server.objects)
    apply_step(trial, base, step)
    try:
        return oracle_at_once(trial, previous)
    except InputError:
        return None


CHANGES = st.tuples(
    st.sampled_from(["evict", "evict", "bind", "bind", "place", "place", "unplace", "fail",
                     "delete-pod", "cordon", "label", "delete-node", "restore-node",
                     "delete-group", "restore-group", "delete-map", "restore-map",
                     "blip", "blip", "evict-cordon", "evict-cordon"]),
    st.integers(0, 40), st.integers(0, 3))
#: Steps that are two changes in a row (two event boundaries of the chain, most often
#: one import of the watcher): a pending rank bound and unbound at once (the chain's
#: cache keeps the node only the boundary between saw), and a rank evicted then its
#: node cordoned (the pending job's cache entry on a node whose health changed).
PAIRS = {"blip": lambda i, j: [("place", i, j), ("unplace", i, 0)],
         "evict-cordon": lambda i, j: [("evict", i, 0), ("cordon-pod-node", i, 1)]}
#: "down": the watches refused and cut, the next one to three changes made meanwhile,
#: then compacted away and the watches allowed (a 410 and a fresh list of every stream)
DISRUPTIONS = st.tuples(st.sampled_from(["drop", "gone", "sync", "down", "down"]),
                        st.just(0), st.integers(0, 2))
STEPS = st.lists(st.one_of(CHANGES, CHANGES, CHANGES, DISRUPTIONS), min_size=1,
                 max_size=24)


def _by_kind(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {"Pod": [], "Node": [], "PodGroup": [],
                                            "ConfigMap": []}
    for obj in objects:
        kind = obj["kind"]
        if kind == "ConfigMap" and "mx-consumer-cim" not in (
                obj["metadata"].get("labels") or {}):
            continue  # the device-info ConfigMaps only
        if kind in out:
            out[kind].append(obj)
    return out


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(steps=STEPS)
def test_stored_cluster_equals_the_import_chain(monkeypatch: pytest.MonkeyPatch,
                                                steps: list[tuple[Any, ...]]) -> None:
    """After random changes, reconnects, 410s and bookmarks, the stored cluster is the
    chain of imports at every event boundary (each with --previous the one before)."""
    with LoopbackApiServer(bookmark_seconds=0.1) as server:
        objects = dump_objects()
        for obj in objects:
            server.apply(obj)
        base = _by_kind(objects)
        # the oracle over HTTP is the harness fixture's (the tests below): here every
        # link of the chain is imported from the server's lists directly
        h = Harness(server, monkeypatch, over_http=False)
        try:
            assert h.caught_up(), "the first stored cluster is not the first import"
            #: while the watches are down: changes still to make, and the chain's
            #: import before they went down (the watcher sees none of the boundaries
            #: between: its next import is of the objects it lists after the 410)
            down: list[Any] = []
            for step in [*steps, ("up", 0, 0)]:
                if down and (step[0] in ("drop", "gone", "sync", "down", "up")
                             or down[0] == 0):
                    server.compact()  # the changes' events are gone: every watch gets 410
                    server.refuse_watches = False
                    h.chain = oracle_at_once(server, down[1].scenario)
                    down = []
                if step[0] == "up":
                    continue
                if step[0] == "down":
                    assert h.caught_up(), "not caught up before the watches went down"
                    server.refuse_watches = True
                    server.drop_watches()
                    down = [step[2] + 1, h.chain]
                elif step[0] == "drop":
                    server.drop_watches()
                elif step[0] in ("gone", "sync"):
                    # a 410 loses the changes made while disconnected: first catch up
                    assert h.caught_up(), f"not caught up before {step[0]}"
                    if step[0] == "gone":  # down, compacted, back: every stream gets 410
                        server.refuse_watches = True
                        server.drop_watches()
                        server.compact()
                        server.refuse_watches = False
                else:
                    # the same objects the server holds after the step: the import of
                    # the copy is the chain's next link (the first link came over HTTP)
                    pair = PAIRS.get(step[0])
                    for change in pair(step[1], step[2]) if pair else [step]:
                        following = import_after(server, base, change, h.chain.scenario)
                        if following is not None and apply_step(server, base, change):
                            h.chain = following
                    if down:
                        down[0] -= 1
            assert h.caught_up(), (
                f"stored cluster differs from the import chain; watcher: "
                f"{h.watcher.counts()}")
        finally:
            h.close()


def test_a_410_resync_sends_one_delta_of_the_differences(harness: Harness) -> None:
    """Changes made while the watch is cut and compacted away (pods evicted, failed and
    deleted, nodes cordoned and deleted, a PodGroup and a device ConfigMap deleted) arrive
    by a fresh list, as PATCHes (not a PUT) of the differences: the stored cluster is the
    import of the listed objects with --previous the import before the watch went down
    (the watcher saw none of the boundaries between)."""
    assert harness.caught_up()
    before = harness.chain
    puts, patches = harness.watcher.puts, harness.watcher.patches
    parsed_whole: list[bytes] = []
    loads = kube_stream._loads

    def counted(data: bytes) -> Any:
        if data.startswith((b'{"kind":"PodList"', b'{"kind":"NodeList"')):
            parsed_whole.append(data)
        return loads(data)

    harness.monkeypatch.setattr(kube_stream, "_loads", counted)
    harness.server.refuse_watches = True  # the reconnects are refused meanwhile
    harness.server.drop_watches()
    base = _by_kind(dump_objects())
    for step in (("evict", 0, 0), ("evict", 1, 0), ("cordon", 5, 1), ("fail", 6, 0),
                 ("delete-pod", 7, 0), ("delete-node", 2, 0), ("delete-group", 1, 0),
                 ("delete-map", 1, 0), ("label", 7, 2)):
        assert apply_step(harness.server, base, step), step
    harness.server.compact()
    harness.server.refuse_watches = False  # the watch from the old version gets 410
    harness.chain = oracle_at_once(harness.server, before.scenario)
    assert harness.chain.scenario.to_dict() != before.scenario.to_dict()
    assert harness.caught_up(), harness.watcher.counts()
    counts = harness.watcher.counts()
    assert counts["gone"] >= 1, counts
    assert harness.watcher.puts == puts
    assert harness.watcher.patches > patches
    if pages.page_identities(b'{"items":[]}') is not None:  # msgspec installed
        assert parsed_whole == []  # the lists were read by identity, the changes alone


def test_a_quiet_watch_is_restarted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A watch on which nothing arrives (no event, no bookmark) is ended by the read
    timeout and started again from its version."""
    quiet = WatchSettings(page_size=50, watch_seconds=60, quiet_seconds=0.3, backoff=0.05,
                          backoff_max=0.1)
    with LoopbackApiServer(bookmark_seconds=3600) as server:
        for obj in dump_objects():
            server.apply(obj)
        watcher, streams = start_watch(
            client.ApiClient(client.Configuration(host=server.url)),
            StoreTarget(ClusterStore(), "quiet"), settings=quiet, clock=lambda: NOW,
            sync_timeout=CATCH_UP)
        try:
            ends = time.monotonic() + CATCH_UP
            while time.monotonic() < ends and server.requests["watch"] < 16:
                time.sleep(0.05)
            assert server.requests["watch"] >= 16  # every stream watched twice at least
            assert watcher.counts()["gone"] == 0
        finally:
            streams.stop()
            watcher.stop()


def test_bursts_coalesce_into_few_patches(harness: Harness) -> None:
    """Forty changes in a burst are a handful of PATCHes (one per interval), and the
    stored cluster still ends equal to the chain."""
    assert harness.caught_up()
    patches = harness.watcher.patches
    base = _by_kind(dump_objects())
    harness.watcher.coalescer.interval = 3.0  # the burst (well under 3 s) in 1-2 sends
    states = []
    for i in range(20):  # the objects at every event boundary, imported after the burst
        # a running rank evicted and bound again; a pending rank bound, then unbound: its
        # node stays in the cache of the chain although no build sees it bound
        for step in (("evict", i, 0), ("bind", i, 0), ("place", i, i), ("unplace", i, 0)):
            apply_step(harness.server, base, step)
            states.append(copy.deepcopy(harness.server.objects))
    for objects in states:
        harness.chain = oracle_at_once(harness.server, harness.chain.scenario, objects)
    assert harness.caught_up()
    sent = harness.watcher.patches - patches
    assert 1 <= sent <= 3, sent  # 80 changes


def test_unused_subtrees_are_dropped_on_arrival() -> None:
    """managedFields, the last-applied annotation and unread subtrees are not kept, and
    pods that neither request NPUs nor belong to a Volcano group are not kept at all."""
    pod: dict[str, Any] = {"kind": "Pod", "metadata": {
        "name": "p", "managedFields": [{"manager": "kubectl"}],
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "a": "b"}},
        "spec": {"volumes": [{"name": "v"}], "containers": []},
        "status": {"phase": "Running", "conditions": [{"type": "Ready"}]}}
    stripped = strip_object(copy.deepcopy(pod))
    assert "managedFields" not in stripped["metadata"]
    assert stripped["metadata"]["annotations"] == {"a": "b"}
    assert "volumes" not in stripped["spec"] and "conditions" not in stripped["status"]
    assert not wanted(stripped)
    npu = copy.deepcopy(pod)
    npu["spec"]["containers"] = [{"resources": {"requests": {"huawei.com/Ascend910": "8"}}}]
    assert wanted(npu)


def test_an_evicted_job_returns_home_only_in_the_watched_cluster(harness: Harness) -> None:
    """A running job is evicted (its pods deleted and created again, pending): the watched
    cluster keeps the ranks' nodes in its cache and the plan puts every rank back on the
    node it ran on; a fresh import of the same objects has no entry for the job."""
    from solver.facade import solve

    assert harness.caught_up()
    pods = [p for p in _by_kind(dump_objects())["Pod"]
            if p["metadata"]["name"].startswith("finetune-worker-")]
    home = {p["metadata"]["annotations"]["hccl/rankIndex"]: p["spec"]["nodeName"]
            for p in pods}
    assert len(home) == 4
    for pod in pods:
        harness.server.apply(_pending_copy(pod))
        harness.step()
    assert harness.caught_up()
    cluster = harness.store.get("watched")
    assert cluster is not None
    watched = cluster.snapshot.problem.scenario
    job = next(j for j in watched.jobs if "finetune" in j.name)
    placed = solve(watched, engine="greedy").placement.job(job.name)
    assert placed is not None and placed.placed
    assert placed.ranks == home  # every rank on the node it ran on
    assert placed.origin_hits == 4
    fresh = oracle(harness.server, None, harness.monkeypatch).scenario
    assert not [e for e in fresh.affinity_cache.entries if e.owner_uid == job.owner_uid]
    fresh_job = solve(fresh, engine="greedy").placement.job(job.name)
    assert fresh_job is not None and fresh_job.origin_candidates == 0


def test_a_cluster_changed_by_someone_else_is_stored_again(harness: Harness) -> None:
    """A PATCH refused for its expect-version (the cluster was replaced) is followed by a
    PUT of the whole current import."""
    assert harness.caught_up()
    cluster = harness.store.get("watched")
    assert cluster is not None
    harness.store.put("watched", cluster.snapshot.problem, cluster.snapshot.version + 5)
    puts = harness.watcher.puts
    apply_step(harness.server, _by_kind(dump_objects()), ("cordon", 3, 1))
    harness.step()
    assert harness.caught_up()
    assert harness.watcher.puts == puts + 1


def test_watcher_counts_lag_per_event(harness: Harness) -> None:
    """Every change's arrival gets a lag sample once the version holding it is stored."""
    assert harness.caught_up()
    before = len(harness.watcher.lags)
    apply_step(harness.server, _by_kind(dump_objects()), ("evict", 2, 0))
    harness.step()
    assert harness.caught_up()
    assert len(harness.watcher.lags) > before
    assert isinstance(harness.watcher, ClusterWatcher)


def test_a_watch_arriving_as_watches_are_refused_is_not_left_open() -> None:
    """A watch request past the handler's check when ``refuse_watches`` is set, but not
    yet open for ``drop_watches`` to cut, must end at once: left open, it would miss the
    drop and the compaction's 410, and a resync that waits for every stream's 410 waits
    forever (seen in ``benchmarks/watch_lag.py`` at 16,384 and 65,536 nodes)."""
    import socket

    from benchmarks.kube_api import _Watcher

    server = LoopbackApiServer()
    server.refuse_watches = True
    assert server.drop_watches() == 0
    left, right = socket.socketpair()
    try:
        lines = list(server.watch_events("pods", None, None, None, server.version, True,
                                         5.0, _Watcher(left)))
    finally:
        left.close()
        right.close()
    assert lines == []
    assert server.open_watches() == 0
    assert server.requests["refused"] == 1
