"""Load test of ``npu-place serve`` (loopback only, bounded in time and requests).

Three modes::

    python -m benchmarks.loadtest load [--clients N] [--duration S] [--sizes 64,512,...]
    python -m benchmarks.loadtest stateful [--nodes 8192] [--repeats R]
    python -m benchmarks.loadtest burst [--requests 8] [--time-limit 3] [--example NAME]

``load`` starts the service (``python -m solver.cli serve`` on a free loopback port, or
uses ``--url``), then runs N concurrent clients for ``--duration`` seconds.  Each client
loops: pick a generated scenario (families × ``--sizes``) and a time limit from
``--time-limits``, ``POST /v1/plan``, record the latency; a share of the clients
(``--stateful-share``) instead push a small delta to a stored cluster and plan it.  A 503
is counted as a rejection and the client waits for ``Retry-After``.  It reports
throughput, latency and lateness (latency − requested limit) percentiles, error and
rejection counts, answer sources (solve / greedy-fallback / empty), the server's RSS
after warm-up and at the end, and checks a sample of answers with the validator after the
run (so the check does not compete for CPU).

``stateful`` compares, at ``--nodes`` nodes, a full ``POST /v1/plan`` with a small
``PATCH`` followed by ``POST /v1/clusters/{name}/plan``.

``burst`` sends ``--requests`` plans of one bundled example at the same moment to a server
started with its default flags (or ``--workers``/``--queue``) and reports how many were
answered, how late, and how long they waited in the service's queue.

``--token-file FILE`` (every mode) sends ``Authorization: Bearer <token>`` with every
request, for a service started with ``npu-place serve --token-file``; a server this module
starts itself gets the same ``--token-file``, so the protected path is what is measured.
A token the service refuses (401) ends the run at its first request, with exit status 2.

All print a table and can write JSON (``--out FILE``).  Every figure depends on the
machine and its load; the README quotes runs on a shared 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.generators import GenParams, generate_case
from models.check import check
from models.compiled import compile_scenario
from models.io import load_scenario
from models.numbers import parse_int
from models.placement import PlacementFile
from models.scenario import Scenario
from solver.doors import CliError, example_path
from solver.service.auth import AccessSetupError, load_token
from solver.service.client import AsyncPlanClient, PlanClient, ServiceError

DEFAULT_FAMILIES = ("850", "950", "a3", "multilevel", "ordinary")


# --------------------------------------------------------------------------- server


@dataclass
class Served:
    """A service under test: its URL and, when this module started it, its process."""

    url: str
    proc: subprocess.Popen[bytes] | None = None

    def rss_mb(self) -> float | None:
        """RSS in MB of the server and all its descendants (worker processes, the fork
        server), from Linux ``/proc``; ``None`` when unknown."""
        if self.proc is None:
            return None
        total = 0.0
        todo = [self.proc.pid]
        seen: set[int] = set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) / 1024.0
                for task in Path(f"/proc/{pid}/task").iterdir():
                    todo += [int(c) for c in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
        return total if seen else None

    def stop(self) -> int | None:
        """SIGTERM the server (if started here) and wait for it."""
        if self.proc is None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(workers: int | None, queue: int | None,
                 extra: list[str] | None = None) -> Served:
    """Start ``npu-place serve`` on a free loopback port and wait until it is ready
    (``None``: the server's default for that flag)."""
    port = _free_port()
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    flags = [] if workers is None else ["--workers", str(workers)]
    flags += [] if queue is None else ["--queue", str(queue)]
    cmd = [sys.executable, "-m", "solver.cli", "serve", "--host", "127.0.0.1", "--port",
           str(port), *flags, "--log-level", "warning", *(extra or [])]
    proc = subprocess.Popen(cmd, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return Served(url, proc)
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the server did not become ready in 120 s")


# --------------------------------------------------------------------------- scenarios


@dataclass
class Case:
    """One generated scenario and its JSON body."""

    key: str
    nodes: int
    scenario: Scenario
    body: bytes


def make_cases(families: list[str], sizes: list[int], seed: int) -> list[Case]:
    """Generate one batch scenario per family and size."""
    cases = []
    for family in families:
        for size in sizes:
            scenario = generate_case(GenParams(family, nodes=size, seed=seed, jobs=4)).scenario
            body = json.dumps(scenario.to_dict()).encode()
            cases.append(Case(f"{family}-{size}", len(scenario.nodes), scenario, body))
    return cases


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100.0 * (len(ordered) - 1))))
    return ordered[k]


# --------------------------------------------------------------------------- load


@dataclass
class Sample:
    """One request of the load test."""

    kind: str  # plan or cluster
    case: str
    nodes: int
    limit: float
    latency: float
    status: int
    source: str = ""
    server: float | None = None  # the service's own receipt-to-send time (header)
    patch: float | None = None  # stateful clients: the PATCH before the plan
    parsed: float | None = None  # the service had parsed the body this long after receipt
    queued: float | None = None  # seconds the plan waited in the service's queue (header)


@dataclass
class LoadReport:
    """Everything the load test measured."""

    args: dict[str, Any]
    samples: list[Sample] = field(default_factory=list)
    rss_before_mb: float | None = None
    rss_after_mb: float | None = None
    wall_seconds: float = 0.0
    checked: int = 0
    invalid: int = 0
    server_exit: int | None = None
    rss_timeline: list[tuple[float, float]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """Aggregates (the JSON output and the table)."""
        ok = [s for s in self.samples if s.status == 200]
        late = [s.latency - s.limit for s in ok]
        by_size: dict[str, Any] = {}
        for nodes in sorted({s.nodes for s in ok}):
            rows = [s for s in ok if s.nodes == nodes]
            by_size[str(nodes)] = {
                "ok": len(rows),
                "p50-latency": round(_pct([s.latency for s in rows], 50), 4),
                "p99-latency": round(_pct([s.latency for s in rows], 99), 4),
                "p99-lateness": round(_pct([s.latency - s.limit for s in rows], 99), 4),
                "sources": dict(Counter(s.source for s in rows)),
            }
        codes = Counter(s.status for s in self.samples)
        server_late = [s.server - s.limit for s in ok if s.server is not None]
        waits = [s.queued for s in self.samples if s.queued is not None]
        patches = [s.patch for s in self.samples if s.patch is not None]
        late_rows = [s for s in ok if s.latency > s.limit]
        return {
            "requests": len(self.samples),
            "ok": len(ok),
            "rejected-503": codes.get(503, 0),
            "errors": sum(c for code, c in codes.items() if code not in (200, 503)),
            "answered-share": round(len(ok) / len(self.samples), 4) if self.samples else None,
            "queue-wait-p50": round(_pct(waits, 50), 4) if waits else None,
            "queue-wait-p99": round(_pct(waits, 99), 4) if waits else None,
            "status-codes": {str(k): v for k, v in sorted(codes.items())},
            "throughput-rps": round(len(ok) / self.wall_seconds, 3) if self.wall_seconds else 0,
            "p50-latency": round(_pct([s.latency for s in ok], 50), 4),
            "p99-latency": round(_pct([s.latency for s in ok], 99), 4),
            "p50-latency/limit": round(_pct([s.latency / s.limit for s in ok], 50), 4),
            "p99-latency/limit": round(_pct([s.latency / s.limit for s in ok], 99), 4),
            "p50-lateness": round(_pct(late, 50), 4),
            "p99-lateness": round(_pct(late, 99), 4),
            "max-lateness": round(max(late), 4) if late else None,
            "late-answers": sum(1 for x in late if x > 0),
            "server-p99-lateness": round(_pct(server_late, 99), 4),
            "server-max-lateness": round(max(server_late), 4) if server_late else None,
            "late-parsed-after-limit": sum(1 for s in late_rows
                                           if s.parsed is not None and s.parsed > s.limit),
            "late-detail": [(s.nodes, s.limit, round(s.latency, 3),
                             None if s.server is None else round(s.server, 3),
                             None if s.parsed is None else round(s.parsed, 3), s.source)
                            for s in late_rows[:15]],
            "stateful-plans": sum(1 for s in ok if s.kind == "cluster"),
            "patch-p50": round(_pct(patches, 50), 4) if patches else None,
            "patch-p99": round(_pct(patches, 99), 4) if patches else None,
            "sources": dict(Counter(s.source for s in ok)),
            "by-nodes": by_size,
            "rss-before-mb": self.rss_before_mb,
            "rss-after-mb": self.rss_after_mb,
            "rss-timeline-mb": self.rss_timeline,
            "answers-checked": self.checked,
            "answers-invalid": self.invalid,
            "wall-seconds": round(self.wall_seconds, 2),
            "server-exit": self.server_exit,
        }


async def _client(idx: int, client: AsyncPlanClient, cases: list[Case], limits: list[float],
                  stop_at: float, budget: list[int], report: LoadReport, keep: list[Any],
                  check_every: int, stateful: bool, rng: random.Random,
                  token: str | None = None) -> None:
    cluster = f"load-{idx}"
    names: list[str] = []
    if stateful:
        base = cases[rng.randrange(len(cases))]
        await asyncio.to_thread(_put, client, cluster, base, token)
        names = [n.name for n in base.scenario.nodes]
    while time.monotonic() < stop_at and budget[0] > 0:
        budget[0] -= 1
        limit = rng.choice(limits)
        case = cases[rng.randrange(len(cases))]
        started = time.perf_counter()
        patch = None
        try:
            if stateful:
                node = rng.choice(names)
                await client.patch_cluster(cluster, {"node-updates": [
                    {"name": node, "health": rng.choice(["healthy", "subhealthy"])}]})
                patch = time.perf_counter() - started
                started = time.perf_counter()  # the limit covers the plan call
                response = await client.plan_cluster_raw(cluster, time_limit=limit)
            else:
                response = await client.plan_raw(case.body, time_limit=limit)
            status = response.status_code
        except httpx.HTTPError:
            response, status = None, 599
        latency = time.perf_counter() - started
        headers = response.headers if response is not None else {}
        server = headers.get("x-elapsed-before-send")
        parsed = headers.get("x-parsed-after")
        queued = headers.get("x-queue-wait")
        report.samples.append(Sample("cluster" if stateful else "plan",
                                     cluster if stateful else case.key,
                                     case.nodes if not stateful else len(names), limit,
                                     latency, status, headers.get("x-plan-source", ""),
                                     float(server) if server else None, patch,
                                     float(parsed) if parsed else None,
                                     float(queued) if queued else None))
        if status == 200 and not stateful and len(report.samples) % check_every == 0 \
                and response is not None:
            keep.append((case, response.content))
        if status == 503:
            retry = response.headers.get("retry-after", "1") if response is not None else "1"
            seconds = parse_int(retry)
            await asyncio.sleep(min(2.0, 1.0 if seconds is None else float(seconds)) / 4)


def _put(client: AsyncPlanClient, name: str, case: Case, token: str | None = None) -> None:
    with PlanClient(client.base_url, token=token) as sync:
        sync.put_cluster(name, case.body)


async def run_load(url: str, cases: list[Case], *, clients: int, duration: float,
                   limits: list[float], max_requests: int, check_every: int,
                   stateful_share: float, seed: int, report: LoadReport,
                   rss: Callable[[], float | None] | None = None,
                   token: str | None = None) -> list[Any]:
    """Run the clients; returns the answers kept for validation.

    ``rss`` (the server's RSS in MB) is sampled every 5 s into ``report.rss_timeline``;
    ``token`` is sent as the bearer token of every request.
    """
    rng = random.Random(seed)
    client = AsyncPlanClient(url, max_connections=clients + 2, token=token)
    keep: list[Any] = []
    budget = [max_requests]
    stop_at = time.monotonic() + duration
    n_stateful = round(clients * stateful_share)
    started = time.perf_counter()

    async def sample() -> None:
        while rss is not None and time.monotonic() < stop_at:
            value = rss()
            if value is not None:
                report.rss_timeline.append((round(time.perf_counter() - started, 1),
                                            round(value, 1)))
            await asyncio.sleep(5.0)

    try:
        await asyncio.gather(sample(), *[
            _client(i, client, cases, limits, stop_at, budget, report, keep, check_every,
                    i < n_stateful, random.Random(rng.random()), token)
            for i in range(clients)])
    finally:
        report.wall_seconds = time.perf_counter() - started
        await client.aclose()
    return keep


def cmd_load(args: argparse.Namespace) -> dict[str, Any]:
    """The ``load`` mode."""
    families = args.families.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    limits = [float(x) for x in args.time_limits.split(",")]
    print(f"generating {len(families) * len(sizes)} scenarios ...", flush=True)
    cases = make_cases(families, sizes, args.seed)
    extra = [] if args.recycle_after is None else ["--recycle-after", str(args.recycle_after)]
    token = args.token
    served = Served(args.url) if args.url else start_server(args.workers, args.queue,
                                                            extra + _token_flags(args))
    report = LoadReport(args=_shown(args))
    try:
        # warm-up: every case once with greedy, then --warmup seconds of the same load
        # (not reported), so that "RSS before" is a loaded steady state
        with PlanClient(served.url, token=token) as warm:
            for case in cases:
                warm.plan(case.body, engine="greedy", time_limit=30)
        if args.warmup > 0:
            asyncio.run(run_load(
                served.url, cases, clients=args.clients, duration=args.warmup,
                limits=limits, max_requests=args.max_requests, check_every=10**9,
                stateful_share=args.stateful_share, seed=args.seed + 1,
                report=LoadReport(args={}), token=token))
        report.rss_before_mb = served.rss_mb()
        keep = asyncio.run(run_load(
            served.url, cases, clients=args.clients, duration=args.duration, limits=limits,
            max_requests=args.max_requests, check_every=args.check_every,
            stateful_share=args.stateful_share, seed=args.seed, report=report,
            rss=served.rss_mb, token=token))
        time.sleep(2.0)  # let abandoned solves end before measuring
        report.rss_after_mb = served.rss_mb()
    finally:
        report.server_exit = served.stop()
    for case, content in keep[: args.max_checks]:
        placement = PlacementFile.model_validate_json(content)
        report.checked += 1
        if check(compile_scenario(case.scenario), placement):
            report.invalid += 1
    return report.summary()


# --------------------------------------------------------------------------- burst


async def _burst(url: str, body: bytes, requests: int, limit: float,
                 report: LoadReport, refusals: list[str],
                 token: str | None = None) -> list[bytes]:
    client = AsyncPlanClient(url, max_connections=requests + 2, token=token)
    started = time.perf_counter()

    async def one() -> bytes | None:
        t0 = time.perf_counter()
        try:
            response: httpx.Response | None = await client.plan_raw(body, time_limit=limit)
        except httpx.HTTPError:
            response = None
        latency = time.perf_counter() - t0
        headers = response.headers if response is not None else {}
        server, queued = headers.get("x-elapsed-before-send"), headers.get("x-queue-wait")
        report.samples.append(Sample(
            "plan", "burst", 0, limit, latency, 599 if response is None else
            response.status_code, headers.get("x-plan-source", ""),
            float(server) if server else None, None, None,
            float(queued) if queued else None))
        if response is not None and response.status_code == 503:
            refusals.append(str(response.json().get("messages", [""])[0]))
        return response.content if response is not None and response.is_success else None

    try:
        answers = await asyncio.gather(*(one() for _ in range(requests)))
    finally:
        report.wall_seconds = time.perf_counter() - started
        await client.aclose()
    return [a for a in answers if a is not None]


def cmd_burst(args: argparse.Namespace) -> dict[str, Any]:
    """The ``burst`` mode: ``--requests`` plans sent at once, ``--rounds`` times."""
    try:
        scenario = load_scenario(example_path(args.example))
    except CliError as exc:
        raise SystemExit(f"--example: {exc}") from None
    body = json.dumps(scenario.to_dict()).encode()
    served = Served(args.url) if args.url else start_server(args.workers, args.queue,
                                                            _token_flags(args))
    report = LoadReport(args=_shown(args))
    answers: list[bytes] = []
    refusals: list[str] = []
    try:
        with PlanClient(served.url, token=args.token) as warm:
            warm.plan(body, engine="greedy", time_limit=30)
        for _ in range(args.rounds):
            answers += asyncio.run(_burst(served.url, body, args.requests, args.time_limit,
                                          report, refusals, args.token))
            time.sleep(args.time_limit + 1.5)  # every abandoned solve has ended
    finally:
        report.server_exit = served.stop()
    problem = compile_scenario(scenario)
    for content in answers:
        report.checked += 1
        if check(problem, PlacementFile.model_validate_json(content)):
            report.invalid += 1
    summary = report.summary()
    keep = ("requests", "ok", "answered-share", "rejected-503", "errors", "status-codes",
            "late-answers", "max-lateness", "p50-latency", "p99-latency", "queue-wait-p50",
            "queue-wait-p99", "sources", "answers-checked", "answers-invalid", "server-exit")
    return {"example": args.example, "time-limit": args.time_limit,
            **{k: summary[k] for k in keep}, "refusals": refusals[:10]}


# --------------------------------------------------------------------------- stateful


def _delta(kind: str, scenario: Scenario, names: list[str], rng: random.Random,
           step: int) -> dict[str, Any]:
    """A small delta of one tier: ``values``, ``jobs`` or ``structure``."""
    if kind == "values":
        return {"node-updates": [{"name": rng.choice(names),
                                  "health": rng.choice(["healthy", "subhealthy"])}]}
    if kind == "jobs":
        entry = scenario.affinity_cache.entries[0] if scenario.affinity_cache.entries else None
        delta: dict[str, Any] = {"now": (scenario.now or 0) + step}
        if entry is not None:
            delta["cache-events"] = [{"event": "refresh", "owner-uid": entry.owner_uid}]
        return delta
    node = rng.choice(names)
    return {"node-updates": [{"name": node, "labels": {"touched": str(step)}}]}


def cmd_stateful(args: argparse.Namespace) -> dict[str, Any]:
    """The ``stateful`` mode: full snapshot vs small delta at ``--nodes`` nodes."""
    scenario = generate_case(GenParams(args.family, nodes=args.nodes, seed=args.seed,
                                       jobs=4)).scenario
    body = json.dumps(scenario.to_dict()).encode()
    served = Served(args.url) if args.url else start_server(1, 2, _token_flags(args))
    names = [n.name for n in scenario.nodes]
    rng = random.Random(args.seed)
    out: dict[str, Any] = {"nodes": len(scenario.nodes), "family": args.family,
                           "body-bytes": len(body), "repeats": args.repeats}
    runs = [("greedy", 30.0, kind) for kind in ("values", "jobs", "structure")]
    runs.append(("auto", args.auto_limit, "values"))
    step = 0
    try:
        with PlanClient(served.url, timeout=120, token=args.token) as client:
            put = time.perf_counter()
            client.put_cluster("bench", body)
            out["put-seconds"] = round(time.perf_counter() - put, 4)
            for engine, limit, kind in runs:
                full, delta, patch, plan, applied = [], [], [], [], []
                objectives: list[tuple[int | None, int | None]] = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    whole = client.plan(body, engine=engine, time_limit=limit)
                    full.append(time.perf_counter() - t0)
                    step += 1
                    t0 = time.perf_counter()
                    info = client.patch_cluster("bench", _delta(kind, scenario, names, rng,
                                                                step))
                    t1 = time.perf_counter()
                    stored = client.plan_cluster("bench", engine=engine, time_limit=limit)
                    t2 = time.perf_counter()
                    delta.append(t2 - t0)
                    patch.append(t1 - t0)
                    plan.append(t2 - t1)
                    applied.append(info["apply-seconds"])
                    objectives.append((whole.objective, stored.objective))
                    assert info["last-update"] == kind, info
                out[f"{engine}-{kind}"] = {
                    "time-limit": limit,
                    "full-post-median": round(statistics.median(full), 4),
                    "full-post-p90": round(_pct(full, 90), 4),
                    "patch+plan-median": round(statistics.median(delta), 4),
                    "patch+plan-p90": round(_pct(delta, 90), 4),
                    "patch-median": round(statistics.median(patch), 4),
                    "cluster-plan-median": round(statistics.median(plan), 4),
                    "server-apply-median": round(statistics.median(applied), 5),
                    "speed-up": round(statistics.median(full) / statistics.median(delta), 2),
                    # the full POST sends the original body; the cluster has the deltas
                    "last-objectives (full, cluster)": objectives[-1],
                }
    finally:
        served.stop()
    return out


# --------------------------------------------------------------------------- main


def _token_flags(args: argparse.Namespace) -> list[str]:
    """The server flags of a token run (the server this module starts reads the same
    file)."""
    return [] if args.token_file is None else ["--token-file", str(args.token_file)]


def _shown(args: argparse.Namespace) -> dict[str, Any]:
    """The arguments as the report shows them: never the token itself."""
    return {k: v for k, v in vars(args).items() if k != "token"}


def _add_token(p: argparse.ArgumentParser) -> None:
    p.add_argument("--token-file", dest="token_file", default=None, metavar="FILE",
                   help="bearer token of a service started with --token-file (a server "
                        "started here gets the same file)")


def build_parser() -> argparse.ArgumentParser:
    """The load test's arguments."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.loadtest",
                                     description=__doc__.split("\n\n")[0] if __doc__ else "")
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("load", help="N concurrent clients × mixed sizes for a while")
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--duration", type=float, default=60.0, help="seconds (default 60)")
    p.add_argument("--warmup", type=float, default=0.0,
                   help="seconds of the same load before measuring (default 0)")
    p.add_argument("--max-requests", type=int, default=100_000, dest="max_requests")
    p.add_argument("--families", default=",".join(DEFAULT_FAMILIES))
    p.add_argument("--sizes", default="64,512,2048,8192")
    p.add_argument("--time-limits", default="0.5,1,2", dest="time_limits")
    p.add_argument("--stateful-share", type=float, default=0.25, dest="stateful_share",
                   help="share of clients that PATCH a stored cluster and plan it")
    p.add_argument("--workers", type=int, default=2, help="server --workers")
    p.add_argument("--queue", type=int, default=2, help="server --queue")
    p.add_argument("--recycle-after", type=int, default=None, dest="recycle_after",
                   help="server --recycle-after (default: the server's)")
    p.add_argument("--check-every", type=int, default=5, dest="check_every")
    p.add_argument("--max-checks", type=int, default=60, dest="max_checks")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--url", help="use a running server instead of starting one")
    p.add_argument("--out", help="write the summary as JSON")
    p.add_argument("--fail-on-late", type=float, default=None, dest="fail_on_late",
                   help="exit 1 when an answer is later than this many seconds past its "
                        "limit, or on any error or invalid answer")
    _add_token(p)
    p = sub.add_parser("burst", help="N plans sent at the same moment")
    p.add_argument("--requests", type=int, default=8)
    p.add_argument("--rounds", type=int, default=1, help="bursts, one after another")
    p.add_argument("--time-limit", type=float, default=3.0, dest="time_limit")
    p.add_argument("--example", default="superpod-850", help="bundled example scenario")
    p.add_argument("--workers", type=int, default=None, help="server --workers (default: "
                   "the server's)")
    p.add_argument("--queue", type=int, default=None, help="server --queue (default: the "
                   "server's)")
    p.add_argument("--url", help="use a running server instead of starting one")
    p.add_argument("--out", help="write the summary as JSON")
    p.add_argument("--fail-on-late", type=float, default=None, dest="fail_on_late",
                   help="exit 1 when an answer is later than this many seconds past its "
                        "limit, or on any error or invalid answer")
    _add_token(p)
    p = sub.add_parser("stateful", help="full POST vs small delta + plan at N nodes")
    p.add_argument("--nodes", type=int, default=8192)
    p.add_argument("--family", default="850")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--auto-limit", type=float, default=1.0, dest="auto_limit")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--url")
    p.add_argument("--out")
    _add_token(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = build_parser().parse_args(argv)
    run = {"load": cmd_load, "burst": cmd_burst, "stateful": cmd_stateful}[args.mode]
    try:
        args.token = None if args.token_file is None else load_token(args.token_file)
    except AccessSetupError as exc:  # names the option and the file
        print(f"loadtest: {exc}", file=sys.stderr)
        return 2
    try:
        summary = run(args)
    except ServiceError as exc:
        if exc.status != 401:
            raise
        print("loadtest: the service refused the request (401): "
              + ("no --token-file given" if args.token is None
                 else f"--token-file {args.token_file}: not the service's token"),
              file=sys.stderr)
        return 2
    text = json.dumps(summary, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    if args.mode in ("load", "burst") and args.fail_on_late is not None:
        late = summary["max-lateness"]
        if summary["errors"] or summary["answers-invalid"] or summary["ok"] == 0 or (
                late is not None and late > args.fail_on_late):
            print("load test FAILED", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
