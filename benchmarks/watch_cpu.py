"""The watcher's work per event, in CPU seconds, without HTTP (docs/watch.md).

The objects of :func:`benchmarks.kube_dump.synthetic` are handed to a
:class:`~models.kube.watch.WatchedCluster` directly (as its streams would, stripped, each
with a resourceVersion), stored in a :class:`~solver.service.state.ClusterStore`, and then
single events are imported and applied one at a time, each step timed in CPU seconds of
this process (load-free, unlike :mod:`benchmarks.watch_lag`'s wall-clock lags):

* the first list (records read), the first import, the first ``PUT``;
* a running rank evicted (its pod re-created pending) and bound again, ``--events``
  times each: the event's intake, the incremental import, the delta, the ``PATCH``;
* a node cordoned: the same four steps together;
* a fresh list of the Pods with ``--resync-pods`` pods changed (a 410 resync): the
  comparison with the held objects, the import and delta, the ``PATCH``.

Usage::

    python -m benchmarks.watch_cpu --nodes 16384
    python -m benchmarks.watch_cpu --nodes 16384 65536 --plain
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from typing import Any

NOW = 1_764_400_000


def _stream_of(obj: dict[str, Any]) -> int:
    """The index of the list call (``models.kube.live.list_calls``) listing ``obj``."""
    kind = obj["kind"]
    if kind == "ConfigMap":
        labels = obj["metadata"].get("labels") or {}
        if labels.get("mx-consumer-volcano") == "true":
            return 4
        if labels.get("mx-consumer-cim") == "true":
            return 5
        return 6 if obj["metadata"]["name"] == "volcano-scheduler-configmap" else 7
    return {"Node": 0, "Pod": 1, "PodGroup": 2, "PriorityClass": 3}[kind]


def run(nodes: int, events: int, resync_pods: int, realistic: bool = True
        ) -> dict[str, Any]:
    """Measure one cluster size; the figures (CPU seconds) as a dict."""
    from kubernetes import client

    from benchmarks.kube_dump import synthetic
    from models.kube.live import list_calls
    from models.kube.watch import WatchedCluster, strip_object
    from solver.service.scenario_diff import pieces_delta
    from solver.service.state import ClusterStore
    from solver.service.watcher import StoreTarget

    lists: dict[int, list[dict[str, Any]]] = {}
    for i, obj in enumerate(synthetic(nodes, now=NOW, realistic=realistic).objects()):
        obj = strip_object(obj)
        obj["metadata"]["resourceVersion"] = str(i + 1)
        obj["metadata"].setdefault("uid", f"uid-{i}")
        lists.setdefault(_stream_of(obj), []).append(obj)
    calls = list_calls(client.ApiClient())
    watched = WatchedCluster(calls, clock=lambda: NOW)
    out: dict[str, Any] = {"nodes": nodes, "realistic": realistic}
    cpu = time.process_time()
    for index in range(len(calls)):
        watched.replace(index, lists.get(index, []))
    out["first-list-read"] = round(time.process_time() - cpu, 3)
    cpu = time.process_time()
    step = watched.advance()
    out["first-import"] = round(time.process_time() - cpu, 3)
    target = StoreTarget(ClusterStore(), "bench")
    cpu = time.process_time()
    version = target.put(step.data())
    watched.commit(step)
    out["first-put"] = round(time.process_time() - cpu, 3)
    running = [o for o in lists[1] if o["spec"].get("nodeName")]
    serial = 10 ** 9

    def one(index: int, kind: str, obj: dict[str, Any]) -> tuple[float, ...]:
        nonlocal version, serial
        serial += 1
        obj["metadata"]["resourceVersion"] = str(serial)
        t0 = time.process_time()
        watched.event(index, kind, obj)
        t1 = time.process_time()
        step = watched.advance()
        t2 = time.process_time()
        assert step.changes is not None, watched.whole_reason
        delta = pieces_delta(step.old, step.new, step.changes)  # type: ignore[arg-type]
        t3 = time.process_time()
        if delta is not None:
            delta["expect-version"] = version
            version = target.patch(delta)
        watched.commit(step)
        t4 = time.process_time()
        return t1 - t0, t2 - t1, t3 - t2, t4 - t3

    samples: list[tuple[float, ...]] = []
    for k in range(events):
        pod = running[(k * 97) % len(running)]
        pending = copy.deepcopy(pod)
        pending["spec"].pop("nodeName")
        pending["status"] = {"phase": "Pending"}
        samples.append(one(1, "MODIFIED", pending))
        samples.append(one(1, "MODIFIED", copy.deepcopy(pod)))
    for name, column in zip(("intake", "import", "delta", "apply"), zip(*samples),
                            strict=True):
        out[f"pod-event-{name}-ms"] = {"median": round(1000 * statistics.median(column), 2),
                                       "max": round(1000 * max(column), 2)}
    node = copy.deepcopy(lists[0][7])
    node.setdefault("spec", {})["unschedulable"] = True
    out["node-cordon-ms"] = round(1000 * sum(one(0, "MODIFIED", node)), 2)
    fresh = list(lists[1])
    where = {id(p): i for i, p in enumerate(fresh)}
    for pod in running[:resync_pods]:
        changed = copy.deepcopy(pod)
        changed["spec"].pop("nodeName")
        changed["status"] = {"phase": "Pending"}
        serial += 1
        changed["metadata"]["resourceVersion"] = str(serial)
        fresh[where[id(pod)]] = changed
    t0 = time.process_time()
    watched.replace(1, fresh)
    t1 = time.process_time()
    step = watched.advance()
    assert step.changes is not None, watched.whole_reason
    delta = pieces_delta(step.old, step.new, step.changes)  # type: ignore[arg-type]
    t2 = time.process_time()
    assert delta is not None
    delta["expect-version"] = version
    version = target.patch(delta)
    watched.commit(step)
    t3 = time.process_time()
    out["resync"] = {"pods-changed": resync_pods, "compare-ms": round(1000 * (t1 - t0), 1),
                     "import-and-delta-ms": round(1000 * (t2 - t1), 1),
                     "apply-ms": round(1000 * (t3 - t2), 1), "whole-imports":
                     watched.whole_builds - 1}
    print(json.dumps(out), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: sizes, events, pods changed in the resync."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[16384])
    parser.add_argument("--events", type=int, default=20)
    parser.add_argument("--resync-pods", type=int, default=64, dest="resync_pods")
    parser.add_argument("--plain", action="store_true",
                        help="objects without the realistic bulk (images, labels, "
                        "managedFields): at 65,536 realistic nodes the import is larger "
                        "than the scenario readers accept (4,000,000 values)")
    args = parser.parse_args(argv)
    for nodes in args.nodes:
        run(nodes, args.events, args.resync_pods, realistic=not args.plain)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
