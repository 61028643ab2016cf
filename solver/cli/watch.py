"""``npu-place watch``: keep a service's stored cluster current from the Kubernetes API.

List, then watch, every object ``import --kubeconfig`` reads; ``PUT`` the first import to
the service, then ``PATCH`` one delta of the differences at most every ``--interval``
seconds (docs/watch.md).  ``serve --watch NAME`` runs the same code inside the service.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any, TextIO

from solver.cli.options import in_range
from solver.doors import EXIT_OK, CliError, require_extra

#: A stored cluster's name (as the service's routes accept it).
CLUSTER_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}"


def add_source_options(p: Any, prefix: str = "") -> None:
    """The options naming the cluster to read (``--kubeconfig``, ``--context``,
    ``--in-cluster``), with ``prefix`` before each name (``watch-`` for ``serve``)."""
    p.add_argument(f"--{prefix}kubeconfig", metavar="FILE", nargs="?", const="",
                   default=None, dest="watch_kubeconfig",
                   help="the cluster of this kubeconfig (default $KUBECONFIG or "
                        "~/.kube/config); RBAC: list and watch (docs/watch.md)")
    p.add_argument(f"--{prefix}context", metavar="C", dest="watch_context",
                   help="kubeconfig context (default: current)")
    p.add_argument(f"--{prefix}in-cluster", action="store_true", dest="watch_in_cluster",
                   help="read the cluster with the pod's service account")
    p.add_argument(f"--{prefix}interval", type=in_range(float, 0.0, 60.0), default=0.1,
                   metavar="S", dest="watch_interval",
                   help="at most one delta per S seconds (default 0.1)")


def register(sub: Any) -> None:
    """Add the ``watch`` subcommand to ``sub``."""
    p = sub.add_parser("watch", help="keep a service's stored cluster current from the "
                                     "Kubernetes API")
    p.add_argument("cluster", metavar="NAME", help="the stored cluster's name")
    p.add_argument("--service", metavar="URL", default="http://127.0.0.1:8080",
                   help="the planning service (default http://127.0.0.1:8080)")
    p.add_argument("--token-file", metavar="FILE", dest="token_file",
                   help="the service's bearer token (serve --token-file)")
    add_source_options(p)
    p.add_argument("--status-every", type=in_range(float, 0.0, 86400.0), default=60.0,
                   metavar="S", dest="status_every",
                   help="print the watcher's counts every S seconds on stderr (0: never; "
                        "default 60)")
    p.add_argument("--seconds", type=in_range(float, 0.0, 10**9), default=0.0, metavar="S",
                   help="stop after S seconds (default 0: until interrupted)")
    p.set_defaults(run=run)


def watch_settings(args: argparse.Namespace, cluster: str) -> Any:
    """The :class:`~solver.service.watcher.WatchConfig` of the options.

    Raises
    ------
    CliError
        When the name is not a cluster name.
    """
    if not re.fullmatch(CLUSTER_NAME, cluster):
        raise CliError(f"--watch {cluster}: not a cluster name (letters, digits, '.', '_', "
                       "'-'; at most 63)")
    require_extra("kube", "npu-place watch / serve --watch")
    from solver.service.watcher import WatchConfig

    return WatchConfig(cluster=cluster, kubeconfig=args.watch_kubeconfig or None,
                       context=args.watch_context, in_cluster=args.watch_in_cluster,
                       interval=args.watch_interval)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Watch until interrupted (or ``--seconds``)."""
    import logging

    require_extra("serve", "npu-place watch")
    from solver.service.auth import AccessSetupError, load_token

    config = watch_settings(args, args.cluster)
    try:
        token = None if args.token_file is None else load_token(args.token_file)
    except AccessSetupError as exc:
        raise CliError(str(exc)) from None
    logger = logging.getLogger("npu_place")
    handler = logging.StreamHandler(sys.stderr)  # this command's lines, removed at the end
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        return _watch(args, config, token)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _watch(args: argparse.Namespace, config: Any, token: str | None) -> int:
    """Start the watcher into the service and run it until interrupted (or --seconds)."""
    from models.validation import InputError
    from solver.service.client import PlanClient
    from solver.service.watcher import HttpTarget, start_watch
    from solver.service.worker import settle_heap

    client = PlanClient(args.service, token=token)
    try:
        # the watched objects, once stored, out of the collector's full collections
        watcher, streams = start_watch(config.api(), HttpTarget(client, config.cluster),
                                       interval=config.interval, settle=settle_heap)
    except InputError as exc:
        client.close()
        raise CliError("; ".join(exc.messages[:5])) from None
    ends = time.monotonic() + args.seconds if args.seconds else None
    last = time.monotonic()
    try:
        while ends is None or time.monotonic() < ends:
            time.sleep(0.2)
            if args.status_every and time.monotonic() - last >= args.status_every:
                last = time.monotonic()
                sys.stderr.write(f"watch {config.cluster}: {watcher.counts()}\n")
    except KeyboardInterrupt:
        pass
    finally:
        streams.stop()
        watcher.stop()
        client.close()
    sys.stderr.write(f"watch {config.cluster}: {watcher.counts()}\n")
    return EXIT_OK
