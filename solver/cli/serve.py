"""``npu-place serve``: run the planning service (HTTP, loopback by default).

The service (FastAPI, uvicorn) is imported when the command runs, so that the other
commands start without it.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from models.limits import MAX_WORKERS, check_time_limit
from solver.cli.options import bounded, in_range


def register(sub: Any) -> None:
    """Add the ``serve`` subcommand to ``sub``."""
    p = sub.add_parser("serve", help="run the planning service (HTTP, loopback by default)")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=in_range(int, 0, 65535), default=8080,
                   help="port, 0 for any free one (default 8080)")
    p.add_argument("--workers", type=in_range(int, 1, MAX_WORKERS), default=1, metavar="N",
                   help=f"solver worker processes: requests solved at once, 1 to {MAX_WORKERS} "
                        "(default 1)")
    p.add_argument("--queue", type=in_range(int, 0, 1024), default=2, metavar="N",
                   help="solves that may wait for a worker before 503, 0 to 1024 (default 2)")
    p.add_argument("--max-body-mb", type=in_range(float, 0.001, 1024), default=64.0,
                   metavar="M", dest="max_body_mb",
                   help="largest request body in MB, at most 1024 (default 64)")
    p.add_argument("--default-time-limit", type=bounded(check_time_limit, float),
                   default=1.0, metavar="S", dest="default_time_limit",
                   help="time limit of plan calls without time-limit (default 1)")
    p.add_argument("--max-clusters", type=in_range(int, 1, 1024), default=16, metavar="N",
                   dest="max_clusters", help="stored clusters at most, 1 to 1024 (default 16)")
    p.add_argument("--recycle-after", type=in_range(int, 0, 10**9), default=1000,
                   metavar="N", dest="recycle_after",
                   help="replace a worker process after N requests (0: never; default 1000)")
    p.add_argument("--log-level", default="info", dest="log_level",
                   choices=("debug", "info", "warning", "error"))
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run the service until SIGTERM (or SIGINT)."""
    import logging

    from solver.service.app import ServiceConfig
    from solver.service.server import build_server

    config = ServiceConfig(host=args.host, port=args.port, workers=args.workers,
                           queue=args.queue, max_body_mb=args.max_body_mb,
                           default_time_limit=args.default_time_limit,
                           max_clusters=args.max_clusters,
                           recycle_after=args.recycle_after)
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = build_server(config, args.log_level)
    server.run()
    return 0
