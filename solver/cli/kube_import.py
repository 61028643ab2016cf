"""``npu-place import``: kubectl dumps or a live cluster -> a contract scenario."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from models.io import format_for_path, load_scenario
from solver.cli.options import unix_time
from solver.cli.output import emit
from solver.doors import EXIT_OK, CliError, require_extra


def register(sub: Any) -> None:
    """Add the ``import`` subcommand to ``sub``."""
    p = sub.add_parser("import", help="kubectl dumps or a live cluster -> a scenario")
    p.add_argument("paths", metavar="PATH", nargs="*",
                   help="kubectl get -o json|yaml output: files, directories, or - (stdin)")
    p.add_argument("--kubeconfig", metavar="FILE", nargs="?", const="", default=None,
                   help="read the cluster live (list calls only); FILE defaults to "
                        "$KUBECONFIG or ~/.kube/config")
    p.add_argument("--context", metavar="C", help="kubeconfig context (default: current)")
    p.add_argument("--in-cluster", action="store_true",
                   help="read the cluster live with the pod's service account")
    p.add_argument("--now", type=unix_time, metavar="T",
                   help="session time, unix seconds or ISO 8601 (default: the clock)")
    p.add_argument("--previous", metavar="SCENARIO",
                   help="merge the affinity cache of an earlier imported scenario")
    p.add_argument("--format", choices=("yaml", "json"), default=None,
                   help="output format (default: from --output's suffix, else yaml)")
    p.add_argument("--output", metavar="FILE", help="write the scenario to FILE")
    p.add_argument("--allow-no-devices", action="store_true", dest="allow_no_devices",
                   help="write the scenario even when no node has device information "
                        "(device-info ConfigMaps): every node then has free 0")
    p.add_argument("--strict", action="store_true",
                   help="refuse the whole import (exit 2) when any object is malformed or a "
                        "running job breaks a rule; by default such an object takes out only "
                        "its own job (or node), named in a warning")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Import and print (or write) the scenario; warnings and a summary on stderr."""
    from models.kube import ClusterImport, Diagnostics, import_dumps

    live = args.kubeconfig is not None or args.in_cluster
    if live and args.paths:
        raise CliError("give dump PATHs or --kubeconfig/--in-cluster, not both")
    if not live and not args.paths:
        raise CliError("import needs dump PATHs (files, directories or '-'), or --kubeconfig")
    previous = load_scenario(args.previous) if args.previous else None
    if live:
        require_extra("kube", "npu-place import --kubeconfig/--in-cluster")
        from models.kube.live import read_live  # the kubernetes client: only when live

        importer = ClusterImport(Diagnostics(), strict=args.strict)
        read_live(importer.add, importer.diag, kubeconfig=args.kubeconfig or None,
                  context=args.context, in_cluster=args.in_cluster)
        result = importer.build(now=args.now, previous=previous)
    else:
        result = import_dumps(args.paths, now=args.now, previous=previous, strict=args.strict)
    refused = result.without_devices and not args.allow_no_devices
    if not refused:
        fmt = args.format or (format_for_path(args.output) if args.output else "yaml")
        emit(result.render(fmt), args.output, out)
    for line in result.warnings:
        sys.stderr.write(f"warning: {line}\n")
    sys.stderr.write(result.summary() + "\n")
    if refused:
        raise CliError(f"{result.no_devices_advice()}; nothing was written")
    return EXIT_OK
