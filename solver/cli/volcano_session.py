"""``npu-place volcano``: kubectl dumps -> one Volcano scheduling session played
against a running ``npu-place serve --extender``; prints what Volcano would bind.

The session is the harness of :mod:`benchmarks.volcano_session` (a re-creation of
Volcano's allocate action and of the Ascend plugin's selection, imported when the command
runs): ``onSessionOpen`` with the dumps in Volcano's JSON shape, ``predicate`` and
``prioritize`` per task, ``allocateFunc``/``deallocateFunc``, ``onSessionClose``.  Nothing
is written to any cluster.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, TextIO

from solver.cli.options import in_range, unix_time
from solver.doors import EXIT_OK, CliError, require_extra

HELP = "play one Volcano session from kubectl dumps against serve --extender"
DEFAULT_URL = "http://127.0.0.1:8080/volcano"


def register(sub: Any) -> None:
    """Add the ``volcano`` subcommand to ``sub``."""
    p = sub.add_parser("volcano", help=HELP, description=(
        "Turn kubectl dumps into one Volcano scheduling session (Volcano's allocate action "
        "and a stand-in of the Ascend plugin) against a running 'npu-place serve "
        "--extender', and print what Volcano would bind.  Start the extender with the same "
        "dumps as its device state: npu-place serve --extender --extender-configmaps PATH"))
    p.add_argument("paths", metavar="PATH", nargs="+",
                   help="kubectl get nodes,pods,podgroups,configmaps,priorityclasses -A -o "
                        "json|yaml output: files or directories")
    p.add_argument("--url", default=DEFAULT_URL,
                   help=f"the extender's urlPrefix (default {DEFAULT_URL})")
    p.add_argument("--no-predicate", action="store_true", dest="no_predicate",
                   help="send no predicate calls (a ConfigMap without extender.predicateVerb)")
    p.add_argument("--percentage-nodes-to-find", type=in_range(int, 1, 100), default=100,
                   metavar="P", dest="percentage_nodes_to_find",
                   help="Volcano's --percentage-nodes-to-find (default 100)")
    p.add_argument("--now", type=unix_time, metavar="T",
                   help="session time, unix seconds or ISO 8601 (default: the clock)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of Volcano's random pick among equal scores and of the "
                        "plugin's map order (default 0)")
    p.add_argument("--timeout", type=in_range(float, 0.1, 600.0), default=30.0, metavar="S",
                   help="seconds to wait for each call (default 30)")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="output format (default table)")
    p.set_defaults(run=run)


def _verdicts(summary: dict[str, Any]) -> dict[str, str]:
    """Job -> what npu-place did with it in the session (from ``GET <prefix>/sessions``)."""
    out = {job: "plan" for job in summary.get("steered", [])}
    for job in summary.get("plugin-orders-ranks", []):
        out[job] = "planned set"
    for job in summary.get("left-to-plugin") or {}:
        out[job] = "left to plugin"
    return out


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Play the session and print the bindings (stderr: the session's status)."""
    require_extra("serve", "npu-place volcano")
    import httpx

    from benchmarks.volcano_session import AscendStandIn, VolcanoCluster, run_session

    url = args.url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise CliError(f"--url {args.url}: expected the extender's urlPrefix, such as "
                       f"{DEFAULT_URL}")
    now = args.now if args.now is not None else int(time.time())
    cluster = VolcanoCluster.from_dumps(list(args.paths), now)
    with httpx.Client(timeout=args.timeout) as client:
        try:
            probe = client.get(f"{url}/sessions")
        except httpx.HTTPError as exc:
            raise CliError(f"--url {url}: the extender does not answer ({exc}); start it "
                           "with: npu-place serve --extender --extender-configmaps PATH") \
                from None
        if probe.status_code != 200:
            raise CliError(f"--url {url}: GET {url}/sessions answered {probe.status_code}: "
                           "not an npu-place extender prefix (see serve --extender-prefix)")
        try:
            report = run_session(client, url, cluster, AscendStandIn(args.seed),
                                 seed=args.seed, predicate=not args.no_predicate,
                                 percentage_nodes_to_find=args.percentage_nodes_to_find)
            history = client.get(f"{url}/sessions").json()
        except httpx.HTTPError as exc:
            raise CliError(f"--url {url}: the extender stopped answering: {exc}") from None
    summary = history[-1] if isinstance(history, list) and history else {}
    verdicts = _verdicts(summary if isinstance(summary, dict) else {})
    if args.format == "json":
        out.write(json.dumps({
            "bindings": {job: {str(r): n for r, n in sorted(ranks.items())}
                         for job, ranks in sorted(report.bindings.items())},
            "super-pod-ranks": {job: {str(r): v for r, v in sorted(ranks.items())}
                                for job, ranks in sorted(report.super_pod_ranks.items())},
            "discarded": sorted(report.discarded), "npu-place": verdicts,
            "session": summary}, indent=2) + "\n")
    else:
        rows = [("job", "rank", "node", "super-pod-rank", "npu-place")]
        for job, ranks in sorted(report.bindings.items()):
            for rank, node in sorted(ranks.items()):
                spr = report.super_pod_ranks.get(job, {}).get(rank)
                rows.append((job, str(rank), node, "-" if spr is None else spr or '""',
                             verdicts.get(job, "abstained")))
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        for row in rows:
            out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
                      .rstrip() + "\n")
        for job in sorted(report.discarded):
            out.write(f"{job}: not bound (the gang did not fit: discarded)\n")
        left = summary.get("left-to-plugin") if isinstance(summary, dict) else None
        for job, reason in sorted((left or {}).items()):
            out.write(f"{job}: left to the Ascend plugin: {reason}\n")
        out.write("npu-place: plan = bound as npu-place planned; planned set = on the "
                  "planned nodes, the plugin's rank order; left to plugin / abstained = "
                  "Volcano's stock choice\n")
    if report.open_status != 200:
        sys.stderr.write(f"onSessionOpen answered {report.open_status}: the extender "
                         "abstained for the session (Volcano's stock behaviour); "
                         f"error: {summary.get('error') if isinstance(summary, dict) else ''}\n")
    sys.stderr.write(f"{sum(map(len, report.bindings.values()))} task(s) of "
                     f"{len(report.bindings)} job(s) bound, {len(report.discarded)} job(s) "
                     "discarded; nothing was written to any cluster\n")
    return EXIT_OK
