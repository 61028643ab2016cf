"""``npu-place examples [NAME]``: list the bundled example scenarios, or print one."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from solver.doors import EXIT_OK, example_names, example_path


def register(sub: Any) -> None:
    """Add the ``examples`` subcommand to ``sub``."""
    p = sub.add_parser("examples", help="list the bundled example scenarios, or print one")
    p.add_argument("name", nargs="?")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """List the examples (name and path), or print the one named."""
    if args.name:
        out.write(example_path(args.name).read_text(encoding="utf-8"))
        return EXIT_OK
    for name in example_names():
        out.write(f"{name}\t{example_path(name)}\n")
    return EXIT_OK
