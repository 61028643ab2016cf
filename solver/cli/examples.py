"""``npu-place examples [NAME]``: list the bundled example scenarios, or print one."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from models.documents import read_text
from solver.doors import EXIT_OK, example_names, example_path


def register(sub: Any) -> None:
    """Add the ``examples`` subcommand to ``sub``."""
    p = sub.add_parser("examples", help="list the bundled example scenarios, or print one")
    p.add_argument("name", nargs="?")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """List the examples (name and path) and the replay days, or print the one named."""
    from benchmarks.replay.api import EXAMPLES as DAYS
    from benchmarks.replay.api import example_path as day_path

    if args.name:
        path = day_path(args.name) if args.name in DAYS else example_path(args.name)
        out.write(read_text(path))
        return EXIT_OK
    for name in example_names():
        out.write(f"{name}\t{example_path(name)}\n")
    for name in DAYS:
        out.write(f"{name}\t{day_path(name)}\t(a day: npu-place replay --example {name})\n")
    return EXIT_OK
