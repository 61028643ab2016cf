"""``npu-place serve``: run the planning service (HTTP, loopback by default).

The service (FastAPI, uvicorn) is imported when the command runs, so that the other
commands start without it.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from models.limits import MAX_WORKERS, check_time_limit
from solver.cli.options import bounded, in_range
from solver.doors import CliError, require_extra


def register(sub: Any) -> None:
    """Add the ``serve`` subcommand to ``sub``."""
    p = sub.add_parser("serve", help="run the planning service (HTTP, loopback by default)")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=in_range(int, 0, 65535), default=8080,
                   help="port, 0 for any free one (default 8080)")
    p.add_argument("--workers", type=in_range(int, 1, MAX_WORKERS), default=1, metavar="N",
                   help=f"solver worker processes: requests solved at once, 1 to {MAX_WORKERS} "
                        "(default 1)")
    p.add_argument("--queue", type=in_range(int, 0, 1024), default=8, metavar="N",
                   help="plans that may wait in the queue for a worker, 0 to 1024 (default 8); "
                        "admission within that bound is by measured solve times")
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
    p.add_argument("--token-file", metavar="FILE", dest="token_file",
                   help="require 'Authorization: Bearer <token>' (the file's content) on "
                        "every route except /healthz and /readyz")
    p.add_argument("--ssl-certfile", metavar="FILE", dest="ssl_certfile",
                   help="serve HTTPS with this PEM certificate (chain); needs --ssl-keyfile")
    p.add_argument("--ssl-keyfile", metavar="FILE", dest="ssl_keyfile",
                   help="the PEM private key of --ssl-certfile")
    p.add_argument("--insecure", action="store_true",
                   help="allow a non-loopback --host without --token-file")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run the service until SIGTERM (or SIGINT)."""
    import logging

    require_extra("serve", "npu-place serve")
    from solver.service.app import ServiceConfig
    from solver.service.auth import AccessSetupError, check_exposure, check_tls, load_token
    from solver.service.server import build_server, listen_socket, run_server

    try:
        token = None if args.token_file is None else load_token(args.token_file)
        check_exposure(args.host, token is not None, args.insecure)
        check_tls(args.ssl_certfile, args.ssl_keyfile)
    except AccessSetupError as exc:
        raise CliError(str(exc)) from None
    try:
        sock = listen_socket(args.host, args.port)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise CliError(f"--host/--port: cannot listen on {args.host}:{args.port}: "
                       f"{reason}") from None
    config = ServiceConfig(host=args.host, port=args.port, workers=args.workers,
                           queue=args.queue, max_body_mb=args.max_body_mb,
                           default_time_limit=args.default_time_limit,
                           max_clusters=args.max_clusters,
                           recycle_after=args.recycle_after, token=token,
                           ssl_certfile=args.ssl_certfile, ssl_keyfile=args.ssl_keyfile)
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run_server(build_server(config, args.log_level), sock)
