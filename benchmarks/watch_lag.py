"""The watcher at scale: first list, sustained pod events, a 410 resync (docs/watch.md).

A loopback API server (:mod:`benchmarks.kube_api`) holding a synthetic cluster of the
project's dump generator (:func:`benchmarks.kube_dump.synthetic`) runs in a child process,
so that its JSON work is not counted in the watcher's CPU or memory.  The watcher runs
here, into a stored cluster of this process (:class:`~solver.service.watcher.StoreTarget`:
the worker's apply, without the HTTP hop), and this script measures:

* the first list and the first stored cluster (wall and CPU seconds);
* sustained pod events (a running rank evicted, i.e. its pod re-created pending, then
  bound again, alternately) at each ``--rates`` for ``--seconds`` each: the lag from an
  event's arrival at the watcher to the stored version that holds it (p50, p99), the
  PATCHes sent (and whole imports among their imports), CPU seconds of this process,
  the events the server wrote, and per PATCH the CPU milliseconds of the watcher's
  import and delta and of the stored cluster's apply (the sending thread's);
* after the first stored cluster, the process's long-lived objects are moved out of
  the garbage collector's reach (:func:`solver.service.worker.settle_heap`, what the
  service's worker does after a ``PUT``);
* one plan (greedy) on the stored cluster: a version is seen by every plan that starts
  after it is stored, so the lag to a plan that sees an event is the lag above plus the
  wait for the next plan;
* a 410 resync (``--resyncs`` of them): watches refused and cut, ``--resync-pods`` bound
  pods evicted (:class:`PodChurn`: pods that are bound now, so each is a change; pending
  ones bound back when too few are bound), the
  history compacted, watches allowed again; seconds until the stored cluster holds the
  changes (one PATCH);
* peak resident memory of this process (the watcher and the stored cluster), absolute
  and above its level before the watch started (``VmHWM``,
  :class:`benchmarks.common.MemoryProbe`), and the API server's resident memory.

The machine's load average is printed with every figure (a shared machine: prefer CPU
seconds).  Usage::

    python -m benchmarks.watch_lag --nodes 16384 --rates 100 1000 5000 --seconds 10
    python -m benchmarks.watch_lag --nodes 65536 --plain --rates 100 1000 5000 \
        --seconds 10 --resync-pods 4096
    python -m benchmarks.watch_lag --nodes 16384 --plain --rates --resync-pods 4096 \
        --resyncs 3     # the resync alone, three times
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from benchmarks.common import MemoryProbe

NOW = 1_764_400_000


def _drain(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """``items`` one at a time, each dropped from the list as it is handed out (so that
    the generator's dicts are freed as the server serialises them)."""
    items.reverse()
    while items:
        yield items.pop()


class PodChurn:
    """The pod events the benchmark writes: running NPU pods evicted (re-created pending)
    and bound back, each pod's state kept, so that every write changes what the importer
    reads.

    The ``n``-th event of the run flips pod ``n // 2`` (modulo the running pods): evicted
    if it is bound, bound back if it is pending, whatever the rate phases wrote before.
    :meth:`evict` (the 410 resync's changes) evicts pods that are bound now: a pod
    already pending would be written again with only a new ``resourceVersion``, which
    the watcher rightly imports as no change (no ``PATCH``, and a resync that waited for
    one waited forever: the rate phases left the first pods pending whenever the events
    written before the last phase were an odd number).

    Parameters
    ----------
    server
        The API server holding the pods.
    running
        (name, namespace) of each running NPU pod, as the load stored them.
    """

    def __init__(self, server: Any, running: list[tuple[str, str]]) -> None:
        self.server = server
        self.running = running
        #: the bound JSON of each pod an event touched, as the load stored it
        self._originals: dict[int, bytes] = {}
        #: the pods evicted now (pending), by index in :attr:`running`
        self.pending: set[int] = set()
        self.written = 0

    def _bound(self, at: int) -> dict[str, Any]:
        """A fresh copy of pod ``at`` as it was bound at the start."""
        if at not in self._originals:
            name, namespace = self.running[at]
            data = self.server.stored_json("Pod", name, namespace)
            assert data is not None
            self._originals[at] = data
        loaded: dict[str, Any] = json.loads(self._originals[at])
        return loaded

    def flip(self, at: int) -> None:
        """Evict pod ``at`` if it is bound, bind it back if it is pending."""
        at %= len(self.running)
        obj = self._bound(at)
        if at in self.pending:
            self.pending.discard(at)
        else:
            obj["spec"].pop("nodeName", None)
            obj["status"] = {"phase": "Pending"}
            self.pending.add(at)
        self.server.apply(obj)

    def next_event(self) -> None:
        """The run's next event (pod ``n // 2`` flipped)."""
        self.flip(self.written // 2)
        self.written += 1

    def evict(self, count: int) -> int:
        """Evict the first ``count`` pods that are bound now; how many were evicted."""
        evicted = 0
        for at in range(len(self.running)):
            if evicted == count:
                break
            if at not in self.pending:
                self.flip(at)
                evicted += 1
        return evicted

    def bind_back(self, count: int) -> int:
        """Bind back the first ``count`` pods that are pending now; how many."""
        chosen = sorted(self.pending)[:count]
        for at in chosen:
            self.flip(at)
        return len(chosen)

    def resync_changes(self, count: int) -> int:
        """The changes of one resync: ``count`` bound pods evicted, or, when fewer are
        bound (after earlier resyncs), ``count`` pending pods bound back; how many pods
        changed."""
        if len(self.running) - len(self.pending) >= count:
            return self.evict(count)
        return self.bind_back(count)


def _child(conn: Connection, nodes: int, realistic: bool) -> None:
    """The API server's process: build, serve, and write events on command."""
    from benchmarks.kube_api import LoopbackApiServer
    from benchmarks.kube_dump import synthetic

    files = synthetic(nodes, now=NOW, realistic=realistic).files()
    server = LoopbackApiServer(bookmark_seconds=5.0)
    running: list[tuple[str, str]] = []
    for items in files.values():
        for obj in _drain(items):
            if obj["kind"] == "Pod" and obj["spec"].get("nodeName") and \
                    obj["spec"].get("schedulerName") == "volcano":
                meta = obj["metadata"]
                running.append((meta["name"], meta.get("namespace", "")))
            server.apply(obj)
    del files
    server.compact()  # the watcher lists first: the load's history is not needed
    server.start()
    conn.send((server.url, _rss_mb()))
    churn = PodChurn(server, running)
    while True:
        command = conn.recv()
        if command[0] == "stop":
            server.stop()
            conn.send("stopped")
            return
        if command[0] == "events":
            rate, seconds = command[1], command[2]
            started = time.monotonic()
            written = 0
            while time.monotonic() - started < seconds:
                due = int((time.monotonic() - started) * rate) + 1
                while written < due:
                    churn.next_event()
                    written += 1
                time.sleep(0.001)
            conn.send((written, _rss_mb()))
        elif command[0] == "resync":
            server.refuse_watches = True
            server.drop_watches()
            changed = churn.resync_changes(command[1])
            server.compact()
            conn.send(("compacted", changed))
            conn.recv()  # allow
            server.refuse_watches = False
            conn.send("allowed")


def _rss_mb(key: str = "VmRSS") -> float:
    """This process's resident memory (``VmRSS``) or its peak (``VmHWM``) in MB."""
    kb = MemoryProbe._status_kb(key)
    return round(kb / 1024, 1) if kb is not None else 0.0


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f}/{five:.1f}"


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def _cpu_figures(watcher: Any) -> dict[str, float]:
    """Per PATCH: the watcher's import and delta, and the stored cluster's apply, in CPU
    milliseconds of the sending thread (median and p99)."""
    out = {}
    for name, samples in (("import", list(watcher.import_cpu)),
                          ("apply", list(watcher.patch_cpu))):
        out[f"{name}-cpu-ms-p50"] = round(1000 * _percentile(samples, 0.5), 2)
        out[f"{name}-cpu-ms-p99"] = round(1000 * _percentile(samples, 0.99), 2)
    return out


def _resync(parent: Connection, watcher: Any, streams: int, count: int) -> dict[str, Any]:
    """One 410 resync: watches refused and cut, ``count`` pods changed
    (:meth:`PodChurn.resync_changes`), the history compacted, watches allowed; the figures
    once the stored cluster holds the changes (or after 600 s: ``completed`` false)."""
    gone, patches = watcher.counts()["gone"], watcher.patches
    empty, failed = watcher.empty, watcher.failed_builds
    watcher.import_cpu.clear()
    watcher.patch_cpu.clear()
    parent.send(("resync", count))
    _, changed = parent.recv()
    cpu, wall = time.process_time(), time.perf_counter()
    parent.send("allow")
    parent.recv()
    first_gone: float | None = None
    while changed and (watcher.counts()["gone"] < gone + streams
                       or watcher.patches == patches):
        if first_gone is None and watcher.counts()["gone"] > gone:
            first_gone = time.perf_counter()
        time.sleep(0.01)
        if time.perf_counter() - wall > 600:
            break
    watcher.coalescer.wait_idle(600)
    done = time.perf_counter()
    counts = watcher.counts()
    return {"changes": changed, "completed": watcher.patches > patches,
            "gone": counts["gone"] - gone, "empty-sends": watcher.empty - empty,
            "failed-builds": watcher.failed_builds - failed,
            "coalescer-errors": watcher.coalescer.last_error,
            "wall": round(done - wall, 2),
            # from the first 410 the watcher saw (the wall above also has the streams'
            # reconnect backoff, grown while the watches were refused)
            "wall-from-410": round(done - (first_gone or wall), 2),
            "cpu": round(time.process_time() - cpu, 2),
            "patches": watcher.patches - patches, "puts-total": watcher.puts,
            **_cpu_figures(watcher), "load": _load()}


def run(nodes: int, rates: list[int], seconds: float, interval: float,
        resync_pods: int, realistic: bool = True, moving_clock: bool = False,
        resyncs: int = 1) -> dict[str, Any]:
    """Measure one cluster size; the figures as a dict (printed as they come).

    ``moving_clock``: each import's ``now`` moves with the wall clock (from the dump's
    time), so that every second's import stamps the bound ranks' cache entries again, as
    a watcher with the real clock does; else ``now`` stays the dump's time.  ``resyncs``:
    410 resyncs one after another."""
    from kubernetes import client

    from models.kube.watch import WatchSettings
    from solver.facade import solve
    from solver.service.state import ClusterStore
    from solver.service.watcher import StoreTarget, start_watch
    from solver.service.worker import settle_heap

    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_child, args=(child, nodes, realistic), daemon=True)
    process.start()
    url, server_mb = parent.recv()
    out: dict[str, Any] = {"nodes": nodes, "objects": "realistic" if realistic else "plain",
                           "clock": "moving" if moving_clock else "fixed",
                           "api-server-rss-mb": server_mb}
    print(f"API server of {nodes} nodes ({out['objects']} objects) up: {server_mb} MB",
          flush=True)
    probe = MemoryProbe()
    base_rss = probe.reset()
    store = ClusterStore()
    clock_zero = time.time()  # its own name: the closure reads it after the plans below
    clock = (lambda: NOW + (time.time() - clock_zero)) if moving_clock else (lambda: NOW)
    cpu, wall = time.process_time(), time.perf_counter()
    watcher, streams = start_watch(client.ApiClient(client.Configuration(host=url)),
                                   StoreTarget(store, "bench"), interval=interval,
                                   settings=WatchSettings(page_size=500), clock=clock,
                                   sync_timeout=1800)
    listed = time.perf_counter() - wall
    while watcher.version is None:
        time.sleep(0.05)
    watcher.coalescer.wait_idle(600)
    # as the service's worker does after a PUT: the stored cluster's (and here the
    # watcher's) long-lived objects out of the collector's full collections
    settle_heap()
    out["first"] = {"list-wall": round(listed, 2),
                    "stored-wall": round(time.perf_counter() - wall, 2),
                    "cpu": round(time.process_time() - cpu, 2), "load": _load(),
                    "objects": watcher.counts()["objects"],
                    "peak-rss-mb": round(probe.peak(), 1),
                    "rss-mb": _rss_mb()}
    print(f"first list + stored cluster at {nodes} nodes: {out['first']}", flush=True)
    out["rates"] = []
    for rate in rates:
        watcher.lags.clear()
        watcher.import_cpu.clear()
        watcher.patch_cpu.clear()
        whole = watcher.counts()["whole-builds"]
        patches, cpu, wall = watcher.patches, time.process_time(), time.perf_counter()
        parent.send(("events", rate, seconds))
        written, server_mb = parent.recv()
        watcher.coalescer.wait_idle(600)
        time.sleep(interval * 2)
        watcher.coalescer.wait_idle(600)
        lags = list(watcher.lags)
        row = {"rate": rate, "written": written, "lag-samples": len(lags),
               "lag-p50": round(_percentile(lags, 0.5), 3),
               "lag-p99": round(_percentile(lags, 0.99), 3),
               "patches": watcher.patches - patches,
               "whole-imports": watcher.counts()["whole-builds"] - whole,
               **_cpu_figures(watcher),
               "wall": round(time.perf_counter() - wall, 2),
               "cpu": round(time.process_time() - cpu, 2),
               "cpu-per-second": round((time.process_time() - cpu) / seconds, 2),
               "api-server-rss-mb": server_mb, "load": _load()}
        out["rates"].append(row)
        print(f"{rate} events/s for {seconds} s: {row}", flush=True)
    cluster = store.get("bench")
    assert cluster is not None
    plans = []
    for _ in range(3):
        started = time.perf_counter()
        solve(cluster.snapshot.problem, engine="greedy", time_limit=60)
        plans.append(time.perf_counter() - started)
    out["plan"] = {"greedy-wall-median": round(statistics.median(plans), 3), "load": _load()}
    print(f"greedy plan on the stored cluster: {out['plan']}", flush=True)
    out["resyncs"] = []
    for _ in range(resyncs):
        out["resyncs"].append(_resync(parent, watcher, len(streams.streams), resync_pods))
        print(f"410 resync: {out['resyncs'][-1]}", flush=True)
    out["resync"] = out["resyncs"][0] if out["resyncs"] else None
    out["peak-rss-mb"] = round(probe.peak(), 1)
    out["peak-mb-above-start"] = round(probe.peak() - base_rss, 1)
    print(f"peak resident memory of the watcher and the stored cluster's process: "
          f"{out['peak-rss-mb']} MB ({out['peak-mb-above-start']} MB above the start)",
          flush=True)
    streams.stop()
    watcher.stop()
    parent.send(("stop",))
    parent.recv()
    process.join(30)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: sizes, rates, seconds per rate, interval; prints JSON at the end."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[16384])
    parser.add_argument("--rates", type=int, nargs="*", default=[100, 1000, 5000],
                        help="pod events per second of each rate phase (none: no rate "
                        "phase, e.g. to measure the resync alone)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--resync-pods", type=int, default=64, dest="resync_pods")
    parser.add_argument("--resyncs", type=int, default=1,
                        help="410 resyncs one after another (each evicts --resync-pods "
                        "more bound pods, or binds back as many when too few are bound)")
    parser.add_argument("--plain", action="store_true",
                        help="objects without the realistic bulk (images, labels, "
                        "managedFields, system pods): at 65,536 realistic nodes the import "
                        "is larger than the scenario readers accept (4,000,000 values)")
    parser.add_argument("--moving-clock", action="store_true", dest="moving_clock",
                        help="each import's now moves with the wall clock, so that every "
                        "second's import stamps the bound ranks' cache entries again (a "
                        "watcher's real clock); default: the dump's time throughout")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args(argv)
    results = [run(n, args.rates, args.seconds, args.interval, args.resync_pods,
                   realistic=not args.plain, moving_clock=args.moving_clock,
                   resyncs=args.resyncs)
               for n in args.nodes]
    text = json.dumps(results, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
