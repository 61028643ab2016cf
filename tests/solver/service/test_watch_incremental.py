"""Each path of the incremental import equals the whole import of the same objects.

A :class:`~models.kube.watch.WatchedCluster` is fed the objects of a bundled dump (no
HTTP: the loopback server's lists and events are handed to it directly); after every
change its next import (:meth:`~models.kube.watch.WatchedCluster.advance`) must be
computed per object (not a whole import) and equal the whole import of the objects with
``--previous`` the import before, and the delta
(:func:`~solver.service.scenario_diff.pieces_delta`) must turn the stored cluster into
that import.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from benchmarks.kube_api import KIND_RESOURCE, LoopbackApiServer
from models.kube import ClusterImport, Diagnostics, ImportResult
from models.kube import build as kube_build
from models.kube import live as kube_live
from models.kube.jobs import BOUND_STAMP_GRAIN_SECONDS, bound_stamp
from models.kube.watch import Advance, WatchedCluster, strip_object
from models.scenario import Health
from models.validation import InputError
from solver.service.scenario_diff import pieces_delta, scenario_delta
from solver.service.state import ClusterStore
from solver.service.watcher import StoreTarget
from tests.solver.service.test_watcher import (
    FREE_NODES,
    NOW,
    _by_kind,
    _pending_copy,
    apply_step,
    dump_objects,
)

pytest.importorskip("kubernetes")
from kubernetes import client

#: The streams of the Nodes, Pods and PodGroups (the order of ``list_calls``).
NODES, PODS, GROUPS = 0, 1, 2


class Chain:
    """A watched cluster beside the import chain of the same objects."""

    def __init__(self) -> None:
        self.server = LoopbackApiServer()
        for obj in dump_objects():
            self.server.apply(obj)
        self.calls = kube_live.list_calls(client.ApiClient())
        self.now = NOW
        self.watched = WatchedCluster(self.calls, clock=lambda: self.now)
        self.relist()
        self.chain = self.whole(None)
        first = self.watched.advance()
        assert first.data() == self.chain.data
        self.watched.commit(first)
        self.store = ClusterStore()
        self.target = StoreTarget(self.store, "w")
        self.version = self.target.put(first.data())
        #: cache owners sent in affinity-cache-owners so far
        self.owners_sent = 0

    def lists(self) -> list[list[dict[str, Any]]]:
        """Every stream's list of the server's objects now (stripped copies)."""
        out = []
        for call in self.calls:
            _, body = self.server.list_page(KIND_RESOURCE[call.kind],
                                            call.kwargs.get("namespace"),
                                            call.kwargs.get("label_selector"),
                                            call.kwargs.get("field_selector"), 0, None)
            for item in body["items"]:
                item.setdefault("kind", call.kind)
            out.append([strip_object(item) for item in body["items"]])
        return out

    def relist(self) -> None:
        """A fresh list of every stream (what a 410 resync does)."""
        for index, items in enumerate(self.lists()):
            self.watched.replace(index, items)

    def whole(self, previous: ImportResult | None) -> ImportResult:
        """The whole import of the server's objects now, with ``--previous``."""
        importer = ClusterImport(Diagnostics())
        for items in self.lists():
            for item in items:
                importer.add(item, "list")
        return importer.build(now=self.now,
                              previous=previous.scenario if previous is not None else None)

    def apply(self, stream: int, obj: dict[str, Any]) -> None:
        """Change an object on the server and send its watch event."""
        self.server.apply(obj)
        meta = obj["metadata"]
        stored = self.server.objects[KIND_RESOURCE[obj["kind"]]][
            (meta.get("namespace", ""), meta["name"])]
        self.watched.event(stream, "MODIFIED", strip_object(copy.deepcopy(stored)))

    def delete(self, stream: int, obj: dict[str, Any]) -> None:
        """Delete an object on the server and send its watch event."""
        meta = obj["metadata"]
        self.server.delete(obj["kind"], meta["name"], meta.get("namespace", ""))
        self.watched.event(stream, "DELETED", strip_object(copy.deepcopy(obj)))

    def check(self, per_object: bool | None = True) -> Advance:
        """The next import equals the next whole import of the chain, and its delta
        turns the stored cluster into it; ``per_object``: it was computed per object
        (``None``: either)."""
        self.chain = self.whole(self.chain)
        step = self.watched.advance()
        if per_object is not None:
            assert (step.changes is not None) == per_object, self.watched.whole_reason
        assert step.data() == self.chain.data
        if step.changes is not None:
            delta = pieces_delta(step.old, step.new, step.changes)  # type: ignore[arg-type]
            if delta is not None:
                # the changed jobs alone are sent (an order puts them in place)
                for key, changed in (("jobs-submitted", step.changes.jobs),
                                     ("running-submitted", step.changes.running)):
                    assert {item["name"] for item in delta.get(key, [])} <= changed, key
                # the cache owners whose entries changed alone, not the whole section
                assert "affinity-cache" not in delta
                before, after = step.old.cache, step.new.cache  # type: ignore[union-attr]
                differ = {key[0] for key in before.keys() | after.keys()
                          if before.get(key) != after.get(key)}
                assert {item["owner-uid"] for item in delta.get(
                    "affinity-cache-owners", [])} == differ
                self.owners_sent += len(delta.get("affinity-cache-owners", []))
                delta["expect-version"] = self.version
                self.version = self.target.patch(delta)
        elif step.old is not None:  # a whole import: its difference, as the watcher sends
            assert step.result is not None
            delta = scenario_delta(step.old.scenario(), step.result.scenario)
            if delta is not None:
                delta["expect-version"] = self.version
                self.version = self.target.patch(delta)
        cluster = self.store.get("w")
        assert cluster is not None
        assert cluster.snapshot.problem.scenario.to_dict() == self.chain.scenario.to_dict()
        self.watched.commit(step)
        return step


def _objects(kind: str) -> list[dict[str, Any]]:
    return [o for o in dump_objects() if o["kind"] == kind]


def _running_pods() -> list[dict[str, Any]]:
    return [p for p in _objects("Pod") if p["spec"].get("nodeName")]


@pytest.fixture
def chain() -> Chain:
    return Chain()


def test_a_pod_evicted_bound_failed_and_deleted_is_its_job_alone(chain: Chain) -> None:
    """Running ranks evicted (re-created pending), one of them failed, both bound
    again; a pending pod deleted: each its job's item, its node's chips and its cache
    entries."""
    # the running job first in the import's order: bound again, it goes back there
    first, second = [p for p in _running_pods() if p["metadata"]["name"].startswith("finetune")][:2]
    chain.apply(PODS, _pending_copy(first))
    step = chain.check()
    assert step.changes is not None and step.changes.jobs and step.changes.nodes
    chain.apply(PODS, _pending_copy(second))
    chain.check()
    failed = _pending_copy(second)
    failed["status"] = {"phase": "Failed"}
    chain.apply(PODS, failed)
    assert chain.check().changes.jobs  # type: ignore[union-attr]
    chain.apply(PODS, first)
    chain.apply(PODS, second)
    chain.check()
    chain.delete(PODS, next(p for p in _objects("Pod") if not p["spec"].get("nodeName")))
    chain.check()


def test_a_rank_bound_and_unbound_between_imports_stays_in_the_cache(chain: Chain) -> None:
    """A pending rank bound and unbound again before the next import: the chain's
    import at the boundary between recorded its node, so the cache keeps it."""
    pending = next(p for p in _objects("Pod") if not p["spec"].get("nodeName"))
    placed = copy.deepcopy(pending)
    placed["spec"]["nodeName"] = FREE_NODES[0]
    placed["status"] = {"phase": "Running"}
    chain.apply(PODS, placed)
    chain.chain = chain.whole(chain.chain)  # the import at that boundary
    chain.apply(PODS, pending)
    step = chain.check()
    assert step.changes is not None and step.changes.cache
    assert any(e["node"] == FREE_NODES[0] for e in step.new.cache.values())
    assert chain.owners_sent == len(step.changes.cache_owners) == 1  # its owner alone


def test_a_cordoned_node_updates_the_node_and_the_jobs_that_read_its_health(
        chain: Chain) -> None:
    """A cordoned node is a node update; the pending job with a cache entry on it gets
    that rank as a fault rank (its item computed again), and uncordoning undoes it."""
    pod = _running_pods()[0]
    chain.apply(PODS, _pending_copy(pod))
    chain.check()
    node = next(n for n in _objects("Node") if n["metadata"]["name"] == pod["spec"]["nodeName"])
    cordoned = copy.deepcopy(node)
    cordoned["spec"]["unschedulable"] = True
    chain.apply(NODES, cordoned)
    step = chain.check()
    assert step.changes is not None and step.changes.nodes == [node["metadata"]["name"]]
    assert step.new.health[node["metadata"]["name"]] is Health.UNHEALTHY
    assert step.changes.jobs and any("fault-ranks" in j for j in step.new.jobs.values())
    chain.apply(NODES, node)
    chain.check()
    relabelled = copy.deepcopy(node)
    relabelled["metadata"].setdefault("labels", {})["rack"] = "r9"
    chain.apply(NODES, relabelled)
    assert chain.check().changes.nodes  # type: ignore[union-attr]


def test_a_podgroup_deleted_changed_and_restored(chain: Chain) -> None:
    """A PodGroup deleted, restored with another priority class, and restored as it
    was: its job computed again each time."""
    group = _objects("PodGroup")[0]
    chain.delete(GROUPS, group)
    chain.check()
    changed = copy.deepcopy(group)
    classes = [c["metadata"]["name"] for c in _objects("PriorityClass")]
    changed["spec"]["priorityClassName"] = next(
        c for c in classes if c != group["spec"].get("priorityClassName"))
    chain.apply(GROUPS, changed)
    chain.check()
    chain.apply(GROUPS, group)
    chain.check()


def _bound_owners(chain: Chain) -> set[str]:
    """The owners of the bound ranks of the last import."""
    pieces = chain.watched.pieces
    assert pieces is not None
    return {spec.owner for spec in pieces.specs.values() if spec.owner and spec.bound}


def _restamped(owners: set[str], old: int, new: int) -> set[str]:
    """The owners whose bound ranks an import at ``new`` stamps otherwise than one at
    ``old``."""
    return {owner for owner in owners if bound_stamp(owner, new) != bound_stamp(owner, old)}


def test_a_moved_now_stamps_only_the_owners_whose_grain_moved(chain: Chain) -> None:
    """``now`` moves a second: the owners whose stamp stays (nearly all) are not sent
    again, and the ``PATCH`` carries no cache entry; a second at which owners' stamps
    move re-stamps those owners alone; a whole grain re-stamps every bound owner."""
    owners = _bound_owners(chain)
    assert len(owners) >= 2
    quiet = next(t for t in range(NOW + 1, NOW + 120) if not _restamped(owners, t - 1, t))
    chain.now = quiet - 1
    chain.check()
    sent = chain.owners_sent
    chain.now = quiet
    step = chain.check()
    assert step.changes is not None and step.changes.now_moved and not step.changes.cache
    assert chain.owners_sent == sent  # no affinity-cache-owners in that PATCH
    moving = next(t for t in range(chain.now + 1, chain.now + 120)
                  if _restamped(owners, t - 1, t))
    chain.now = moving - 1
    chain.check()
    chain.now = moving
    step = chain.check()
    assert step.changes is not None
    assert step.changes.cache_owners == _restamped(owners, moving - 1, moving) != owners
    assert any(e["updated"] == moving for e in step.new.cache.values())
    chain.now += BOUND_STAMP_GRAIN_SECONDS
    step = chain.check()
    assert step.changes is not None and step.changes.cache_owners >= owners


def test_a_moving_clock_keeps_the_import_chain(chain: Chain) -> None:
    """Random changes (a seeded walk: the setup of a chain costs more than its steps)
    with the clock moving between them by a second or more than a grain: every import
    equals the chain's and its delta stores it."""
    rng = random.Random(4646)
    base = _by_kind(dump_objects())
    kinds = ["evict", "bind", "place", "unplace", "fail", "delete-pod", "cordon",
             "cordon-pod-node", "delete-node", "restore-node", "delete-group",
             "restore-group"]
    for _ in range(16):
        change = (rng.choice(kinds), rng.randrange(40), rng.randrange(4))
        kept = copy.deepcopy(chain.server.objects)
        if not apply_step(chain.server, base, change):
            continue
        chain.now += rng.choice([0, 1, 1, 2, 29, 61])
        try:
            chain.whole(chain.chain)
        except InputError:  # the importer refuses that state: no link of the chain
            chain.server.objects = kept
            continue
        chain.relist()
        chain.check(per_object=None)


def test_a_fresh_list_reads_only_the_changed_objects(chain: Chain,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh list (a 410 resync) re-reads only the objects whose resourceVersion
    moved, and imports the difference per object."""
    pods = _running_pods()
    chain.server.apply(_pending_copy(pods[0]))
    chain.server.apply(_pending_copy(pods[1]))
    read: list[str] = []
    add = kube_build.ClusterImport.add

    def counted(self: ClusterImport, obj: dict[str, Any], source: str = "<input>") -> None:
        read.append(obj["metadata"]["name"])
        add(self, obj, source)

    monkeypatch.setattr(kube_build.ClusterImport, "add", counted)
    chain.relist()
    assert sorted(read) == sorted(p["metadata"]["name"] for p in pods[:2])
    monkeypatch.undo()
    chain.check()


def test_changes_it_cannot_import_alone_are_whole_imports(chain: Chain) -> None:
    """A node that leaves the import, a ConfigMap: whole imports (still the chain's)."""
    node = next(n for n in _objects("Node") if n["metadata"]["name"] == FREE_NODES[0])
    chain.delete(NODES, node)
    chain.check(per_object=False)
    chain.apply(NODES, node)
    chain.check(per_object=False)
    chain.now += 1  # and per object again afterwards
    chain.check()


def test_a_device_info_configmap_changes_its_node_alone(chain: Chain) -> None:
    """A chip of a free node reported unhealthy in its device-info ConfigMap: that
    node's free chips and health again (a node update), not a whole import; back
    healthy, the same."""
    cim = next(i for i, c in enumerate(chain.calls)
               if c.kwargs.get("label_selector") == "mx-consumer-cim=true")
    node = FREE_NODES[0]
    record = next(o for o in _objects("ConfigMap")
                  if o["metadata"]["name"] == f"mindx-dl-deviceinfo-{node}")
    sick = copy.deepcopy(record)
    info = json.loads(sick["data"]["DeviceInfoCfg"])
    info["DeviceInfo"]["DeviceList"]["huawei.com/npu-Unhealthy"] = "npu-3"
    sick["data"]["DeviceInfoCfg"] = json.dumps(info)
    chain.apply(cim, sick)
    step = chain.check()
    assert step.changes is not None and step.changes.nodes == [node]
    chain.apply(cim, record)
    chain.check()


def test_a_fresh_list_notes_its_ranks_once_at_the_list(chain: Chain) -> None:
    """A fresh list is one event boundary: two ranks of a job evicted while the watch was
    down keep the cache entries of the import before (with their time), as the import of
    the listed objects has them; the list's pods taken one by one are not boundaries (the
    rank evicted later in the list was bound when the first was taken)."""
    chain.now += 5
    chain.check()
    pods = _running_pods()
    chain.server.apply(_pending_copy(pods[0]))
    chain.server.apply(_pending_copy(pods[1]))
    chain.now += 5
    chain.relist()
    chain.check()


def test_a_list_page_keeps_only_the_objects_held_unchanged(chain: Chain) -> None:
    """A page of a fresh list: an object with the held uid and resourceVersion is kept
    as it is (its key noted); a new resourceVersion, another uid (deleted and created
    again between the lists), no resourceVersion or a new name make it read again."""
    held = chain.lists()[PODS][:5]
    page = copy.deepcopy(held)
    page[1]["metadata"]["resourceVersion"] += "0"
    page[2]["metadata"]["uid"] = "another"
    del page[3]["metadata"]["resourceVersion"]
    page[4]["metadata"]["name"] += "-new"
    kept: set[tuple[str, str]] = set()
    changed = chain.watched.split_page(PODS, [*page, "not an object"], kept)
    assert kept == {(held[0]["metadata"]["namespace"], held[0]["metadata"]["name"])}
    assert changed == page[1:]


def test_a_list_skips_the_unchanged_pods_it_does_not_keep(chain: Chain) -> None:
    """A pod that is not an NPU pod is not kept, but its uid and resourceVersion are: the
    next fresh list skips it unread while it is unchanged, reads it again when it
    changed, and forgets it once it is deleted (by a list or by a watch event)."""
    plain = {"kind": "Pod", "metadata": {"name": "web", "namespace": "apps", "uid": "w1"},
             "spec": {"nodeName": FREE_NODES[0], "containers": [{"name": "c"}]},
             "status": {"phase": "Running"}}
    chain.server.apply(plain)
    chain.relist()
    stream, key = chain.watched.streams[PODS], ("apps", "web")
    assert key not in stream.objects and key in stream.skipped

    def listed() -> list[dict[str, Any]]:
        return [p for p in chain.lists()[PODS] if p["metadata"]["name"] == "web"]

    kept: set[tuple[str, str]] = set()
    assert chain.watched.split_page(PODS, listed(), kept) == [] and kept == {key}
    chain.server.apply(plain)  # a new resourceVersion
    assert chain.watched.split_page(PODS, listed(), set()) == listed()
    chain.relist()
    assert stream.skipped[key][1] == listed()[0]["metadata"]["resourceVersion"]
    chain.server.delete("Pod", "web", "apps")
    chain.relist()
    assert key not in stream.skipped
    chain.watched.event(PODS, "ADDED", copy.deepcopy(plain))
    assert key in stream.skipped
    chain.watched.event(PODS, "DELETED", copy.deepcopy(plain))
    assert key not in stream.skipped
    chain.check()
