"""The scheduler daemon's loop against a stored cluster: CPU time per ``PATCH``.

::

    python -m benchmarks.daemon_loop [--family 850] [--nodes 10000] [--sessions 40]
                                     [--changes 5] [--seed 0] [--out FILE.json]

A generated ``--nodes`` cluster is stored in a service worker
(:class:`solver.service.worker.Worker`, in this process, as ``benchmarks.session_reuse``
does) and moved forward by the deltas of the documented daemon loop (``docs/service.md``,
*The daemon side, per session*): every session sends ``now`` (one second later than the
last) and ``expect-version``, with ``--changes`` nodes changing health or free chips.
Three loops, each on its own copy of the cluster:

* ``now``: the documented loop (``now`` with every delta);
* ``no-now``: the same node changes without ``now``;
* ``now+refresh``: the documented loop with one cache ``refresh`` event per session (what
  a session that carries cache events pays: the ``jobs`` tier).

Per loop it reports the worker's thread CPU seconds per ``PATCH`` (parsing the body,
applying the delta, the summary and the compact log: :func:`time.thread_time`), median /
p90 / max, and the tiers paid.  CPU time depends on the machine, less on its load than
wall time; the tiers do not depend on either.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from typing import Any

from benchmarks.generators import GenParams, generate_case
from solver.service.messages import PatchCluster, PutCluster, Reply
from solver.service.worker import DEFAULT_SOLVE, Worker

#: The loops measured: name -> (send ``now``, add a cache refresh event).
LOOPS = {"now": (True, False), "no-now": (False, False), "now+refresh": (True, True)}


class _Pipe:
    """Stands in for the worker's connection: keeps the last reply."""

    def __init__(self) -> None:
        self.last: Any = None

    def send(self, message: Any) -> None:
        self.last = message


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def run_loop(body: bytes, names: list[str], npus: dict[str, int], owner: str | None,
             now0: int, sessions: int, changes: int, seed: int, send_now: bool,
             refresh: bool) -> dict[str, Any]:
    """One loop of ``sessions`` PATCHes on a fresh copy of the cluster."""
    pipe = _Pipe()
    worker = Worker(pipe, DEFAULT_SOLVE)  # type: ignore[arg-type]
    worker.handle(0, PutCluster("daemon", body, 1))
    rng = random.Random(seed)
    cpu: list[float] = []
    tiers: dict[str, int] = {}
    for session in range(1, sessions + 1):
        updates: list[dict[str, Any]] = []
        for name in rng.sample(names, changes):
            if rng.random() < 0.5:
                updates.append({"name": name, "health": rng.choice(["healthy", "subhealthy"])})
            else:
                updates.append({"name": name, "free": rng.randint(0, npus[name])})
        delta: dict[str, Any] = {"expect-version": session, "node-updates": updates}
        if send_now:
            delta["now"] = now0 + session
        if refresh and owner is not None:
            delta["cache-events"] = [{"event": "refresh", "owner-uid": owner}]
        raw = json.dumps(delta).encode()
        start = time.thread_time()
        worker.handle(session, PatchCluster("daemon", raw))
        cpu.append(time.thread_time() - start)
        answer = pipe.last
        if not isinstance(answer, Reply):
            raise SystemExit(f"session {session}: the worker answered {answer}")
        tier = answer.value.info["last-update"]
        tiers[tier] = tiers.get(tier, 0) + 1
    return {"sessions": sessions, "tiers": tiers,
            "cpu-median": round(statistics.median(cpu), 4),
            "cpu-p90": round(_percentile(cpu, 90), 4), "cpu-max": round(max(cpu), 4)}


def measure(family: str, nodes: int, sessions: int, changes: int, seed: int
            ) -> dict[str, Any]:
    """Every loop of :data:`LOOPS` on one generated cluster."""
    scenario = generate_case(GenParams(family, nodes=nodes, seed=seed, jobs=4)).scenario
    body = json.dumps(scenario.to_dict()).encode()
    names = [n.name for n in scenario.nodes if n.vnpu is None]
    npus = {n.name: n.npus for n in scenario.nodes}
    entries = scenario.affinity_cache.entries
    owner = entries[0].owner_uid if entries else None
    out: dict[str, Any] = {"family": family, "nodes": len(scenario.nodes),
                           "cache-entries": len(entries), "body-bytes": len(body),
                           "changes": changes}
    for name, (send_now, refresh) in LOOPS.items():
        out[name] = run_loop(body, names, npus, owner, scenario.now or 0, sessions, changes,
                             seed, send_now, refresh)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the loops and print (or write) the JSON report."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.daemon_loop",
                                     description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--family", default="850")
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--changes", type=int, default=5, help="node changes per session")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the report as JSON")
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 10_000 or not 0 <= args.changes <= 1_000:
        parser.error("--sessions must be 1..10000 and --changes 0..1000")
    report = measure(args.family, args.nodes, args.sessions, args.changes, args.seed)
    text = json.dumps(report, indent=2)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
