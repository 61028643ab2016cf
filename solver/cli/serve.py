"""``npu-place serve``: run the planning service (HTTP, loopback by default).

The service (FastAPI, uvicorn) is imported when the command runs, so that the other
commands start without it.
"""

from __future__ import annotations

import argparse
import re
from typing import Any, TextIO

from models.limits import MAX_WORKERS, check_time_limit
from solver.cli.options import bounded, in_range
from solver.cli.watch import add_source_options, watch_settings
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
                   choices=("debug", "info", "warning", "error"),
                   help="least severe message logged to stderr (default info)")
    p.add_argument("--token-file", metavar="FILE", dest="token_file",
                   help="require 'Authorization: Bearer <token>' (the file's content) on "
                        "every route except /healthz and /readyz")
    p.add_argument("--ssl-certfile", metavar="FILE", dest="ssl_certfile",
                   help="serve HTTPS with this PEM certificate (chain); needs --ssl-keyfile")
    p.add_argument("--ssl-keyfile", metavar="FILE", dest="ssl_keyfile",
                   help="the PEM private key of --ssl-certfile")
    p.add_argument("--insecure", action="store_true",
                   help="allow a non-loopback --host without --token-file (and the "
                        "extender's verbs without TLS)")
    ext = p.add_argument_group("Volcano extender (docs/extender.md)")
    ext.add_argument("--extender", action="store_true",
                     help="answer Volcano's extender verbs (onSessionOpen, prioritize, "
                          "predicate, allocateFunc, deallocateFunc, onSessionClose) under "
                          "--extender-prefix")
    ext.add_argument("--extender-prefix", default="/volcano", metavar="PATH",
                     dest="extender_prefix", help="route prefix of the verbs (default /volcano)")
    ext.add_argument("--extender-http-timeout", type=in_range(float, 0.05, 300.0),
                     default=1.0, metavar="S", dest="extender_http_timeout",
                     help="Volcano's extender.httpTimeout in seconds (default 1); the session "
                          "open answers within 0.8 of it, the plan takes at most 0.5 of it")
    ext.add_argument("--extender-engine", choices=("auto", "greedy", "cpsat"), default="auto",
                     dest="extender_engine", help="the plan's engine (default auto)")
    ext.add_argument("--extender-configmaps", action="append", default=[], metavar="PATH",
                     dest="extender_configmaps",
                     help="kubectl dump files/directories with the device-info, NodeD, switch "
                          "and scheduler ConfigMaps and PriorityClasses (re-read when changed; "
                          "repeatable)")
    ext.add_argument("--extender-kubeconfig", metavar="FILE", dest="extender_kubeconfig",
                     help="list those objects from the cluster of this kubeconfig instead, "
                          "in the background every --extender-refresh seconds")
    ext.add_argument("--extender-in-cluster", action="store_true", dest="extender_in_cluster",
                     help="list them with the pod's service account instead")
    ext.add_argument("--extender-refresh", type=in_range(float, 1.0, 3600.0), default=30.0,
                     metavar="S", dest="extender_refresh",
                     help="seconds between background listings (default 30)")
    ext.add_argument("--extender-cluster", metavar="NAME", dest="extender_cluster",
                     help="the service's own view: plan the stored cluster NAME (PUT/PATCH "
                          "/v1/clusters/NAME, kept current by a watcher) instead of parsing "
                          "Volcano's snapshot; allocate/deallocate become its cache events")
    ext.add_argument("--extender-predicate", action="store_true", dest="extender_predicate",
                     help="the scheduler ConfigMap sets extender.predicateVerb (Volcano >= "
                          "v1.12): the job-level predicate confines the Ascend plugin to the "
                          "planned nodes, so super-pod, 950 and multilevel jobs are steered "
                          "too (docs/extender.md)")
    ext.add_argument("--extender-max-snapshot-mb", type=in_range(float, 0.001, 4096),
                     default=256.0, metavar="M", dest="extender_max_snapshot_mb",
                     help="largest onSessionOpen body in MB (default 256; 413 above it)")
    watch = p.add_argument_group("Kubernetes watch (docs/watch.md)")
    watch.add_argument("--watch", metavar="NAME", dest="watch",
                       help="keep the stored cluster NAME current from the Kubernetes API "
                            "(list and watch, as npu-place watch); with --extender, the "
                            "extender's own view plans it (--extender-cluster NAME)")
    add_source_options(watch, "watch-")
    p.set_defaults(run=run)


def extender_settings(args: argparse.Namespace) -> Any:
    """The :class:`~solver.service.extender.ExtenderConfig` of the options (``None``
    without ``--extender``).

    Raises
    ------
    CliError
        A prefix that is not a path; the verbs beyond loopback without TLS (Volcano's
        extender sends no credentials: the path token and the traffic need TLS) unless
        ``--insecure``.
    """
    if not args.extender:
        return None
    from solver.service.app import CLUSTER_NAME
    from solver.service.auth import is_loopback
    from solver.service.extender import ExtenderConfig

    prefix = args.extender_prefix.rstrip("/")
    if not prefix.startswith("/") or any(not part for part in prefix[1:].split("/")) or (
            not all(ch.isalnum() or ch in "/-_." for ch in prefix)):
        raise CliError(f"--extender-prefix {args.extender_prefix}: expected a path such as "
                       "/volcano (letters, digits, '-', '_', '.', '/')")
    if not is_loopback(args.host) and args.ssl_certfile is None and not args.insecure:
        raise CliError(f"--extender with --host {args.host}: Volcano's extender sends no "
                       "credentials, so beyond loopback the verbs need TLS (--ssl-certfile/"
                       "--ssl-keyfile; the --token-file token then rides in urlPrefix), or "
                       "--insecure if the network is protected otherwise; the default is a "
                       "loopback sidecar in the scheduler's pod")
    if args.watch is not None:  # the own view plans the watched cluster
        if args.extender_cluster not in (None, args.watch):
            raise CliError(f"--extender-cluster {args.extender_cluster} with --watch "
                           f"{args.watch}: the extender plans the watched cluster (give one "
                           "name)")
        args.extender_cluster = args.watch
    if args.extender_cluster is not None and not re.fullmatch(CLUSTER_NAME,
                                                              args.extender_cluster):
        raise CliError(f"--extender-cluster {args.extender_cluster}: not a cluster name "
                       "(letters, digits, '.', '_', '-'; at most 63)")
    live = bool(args.extender_kubeconfig or args.extender_in_cluster)
    if live and args.extender_configmaps:
        raise CliError("--extender-configmaps and --extender-kubeconfig/--extender-in-cluster "
                       "are alternatives: give one")
    if not live and not args.extender_configmaps and args.extender_cluster is None:
        raise CliError("--extender needs the device state Volcano's snapshot lacks (device-"
                       "info ConfigMaps, super pod and rack IDs): give --extender-in-cluster, "
                       "--extender-kubeconfig FILE or --extender-configmaps PATH (or plan a "
                       "stored cluster with --extender-cluster NAME)")
    return ExtenderConfig(prefix=prefix, http_timeout=args.extender_http_timeout,
                          engine=args.extender_engine,
                          configmaps=tuple(args.extender_configmaps), live=live,
                          kubeconfig=args.extender_kubeconfig,
                          in_cluster=args.extender_in_cluster,
                          refresh_seconds=args.extender_refresh,
                          max_snapshot_mb=args.extender_max_snapshot_mb,
                          predicate_verb=args.extender_predicate,
                          cluster=args.extender_cluster)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run the service until SIGTERM (or SIGINT)."""
    import logging

    require_extra("serve", "npu-place serve")
    from solver.service.app import ServiceConfig
    from solver.service.auth import AccessSetupError, check_exposure, check_tls, load_token
    from solver.service.extender.config import PrefixOverlap
    from solver.service.server import build_server, listen_socket, run_server

    try:
        token = None if args.token_file is None else load_token(args.token_file)
        check_exposure(args.host, token is not None, args.insecure)
        check_tls(args.ssl_certfile, args.ssl_keyfile)
    except AccessSetupError as exc:
        raise CliError(str(exc)) from None
    extender = extender_settings(args)
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
                           ssl_certfile=args.ssl_certfile, ssl_keyfile=args.ssl_keyfile,
                           extender=extender,
                           watch=None if args.watch is None
                           else watch_settings(args, args.watch))
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        server = build_server(config, args.log_level)
    except PrefixOverlap as exc:
        sock.close()
        raise CliError(str(exc)) from None
    return run_server(server, sock)
