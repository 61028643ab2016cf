"""The watcher benchmark's pod events (:class:`benchmarks.watch_lag.PodChurn`): every write
is a change the importer reads, so that a resync that waits for the ``PATCH`` of its
changes gets one."""

from __future__ import annotations

import json

import pytest

from benchmarks.kube_api import LoopbackApiServer
from benchmarks.watch_lag import PodChurn


def _server(pods: int) -> tuple[LoopbackApiServer, list[tuple[str, str]]]:
    server = LoopbackApiServer()
    running = []
    for i in range(pods):
        server.apply({"kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "team"},
                      "spec": {"nodeName": f"n{i}", "schedulerName": "volcano"},
                      "status": {"phase": "Running"}})
        running.append((f"p{i}", "team"))
    return server, running


def _node(server: LoopbackApiServer, name: str) -> str | None:
    data = server.stored_json("Pod", name, "team")
    assert data is not None
    node: str | None = json.loads(data)["spec"].get("nodeName")
    return node


@pytest.mark.parametrize("events", [0, 1, 7, 12, 13, 25])
def test_the_resync_evicts_pods_that_are_bound_whatever_the_events_before(
        events: int) -> None:
    """After any number of rate-phase events (an odd number leaves pods pending), the
    resync's evictions each unbind a bound pod: a pending pod written again would differ
    only in its resourceVersion, which the watcher imports as no change."""
    server, running = _server(10)
    churn = PodChurn(server, running)
    for _ in range(events):
        churn.next_event()
    bound_before = {name for name, _ in running if _node(server, name)}
    assert len(bound_before) == 10 - len(churn.pending)
    version = server.version
    evicted = churn.evict(4)
    assert evicted == 4
    changed = [e.obj.name for e in server.events if e.version > version]
    assert len(changed) == 4
    assert set(changed) <= bound_before
    assert all(_node(server, name) is None for name in changed)


def test_each_event_flips_its_pod_and_pairs_restore_it() -> None:
    """Event ``n`` flips pod ``n // 2``: an even run of events leaves every pod bound."""
    server, running = _server(3)
    churn = PodChurn(server, running)
    churn.next_event()
    assert _node(server, "p0") is None and churn.pending == {0}
    churn.next_event()
    assert _node(server, "p0") == "n0" and not churn.pending
    for _ in range(8):  # past the last pod: the first ones again
        churn.next_event()
    assert not churn.pending
    assert [_node(server, name) for name, _ in running] == ["n0", "n1", "n2"]


def test_resyncs_bind_pods_back_once_too_few_are_bound() -> None:
    """A resync with fewer bound pods than it changes binds pending ones back: every
    resync of a run changes as many pods as asked."""
    server, running = _server(10)
    churn = PodChurn(server, running)
    assert churn.resync_changes(6) == 6 and len(churn.pending) == 6
    version = server.version
    assert churn.resync_changes(6) == 6 and not churn.pending
    assert all(_node(server, name) for name, _ in running)
    assert server.version == version + 6
