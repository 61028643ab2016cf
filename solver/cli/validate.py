"""``npu-place validate SCENARIO [PLACEMENT]``: check a scenario, and a placement against it."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from models.check import check
from models.io import dump_data, load_placement
from models.objective import evaluate
from solver.cli.output import metrics_rows, table
from solver.doors import EXIT_FAILED, EXIT_OK, load_problem


def register(sub: Any) -> None:
    """Add the ``validate`` subcommand to ``sub`` (an ``add_subparsers`` result)."""
    p = sub.add_parser("validate", help="check a scenario, and optionally a placement")
    p.add_argument("scenario", metavar="SCENARIO")
    p.add_argument("placement", metavar="PLACEMENT", nargs="?")
    p.add_argument("--format", choices=("table", "json", "yaml"), default="table")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Validate; exit 1 when the placement breaks a hard constraint."""
    problem = load_problem(args.scenario)
    lines = [f"{args.scenario}: valid scenario: {problem.num_nodes} nodes, "
             f"{len(problem.jobs)} pending jobs"]
    if not args.placement:
        out.write("\n".join(lines) + "\n")
        return EXIT_OK
    placement = load_placement(args.placement)
    violations = check(problem, placement)
    if args.format == "json" or args.format == "yaml":
        data: dict[str, Any] = {"valid": not violations,
                                "violations": [{"rule": v.rule.value, "job": v.job,
                                                "node": v.node, "message": v.message}
                                               for v in violations]}
        if not violations:
            data["metrics"] = evaluate(problem, placement).to_model().model_dump(by_alias=True)
        out.write(dump_data(data, args.format))
        return EXIT_FAILED if violations else EXIT_OK
    if violations:
        lines.append(f"{args.placement}: {len(violations)} hard-constraint violation(s):")
        lines += [f"  {v}" for v in violations]
        out.write("\n".join(lines) + "\n")
        return EXIT_FAILED
    lines.append(f"{args.placement}: the placement satisfies every hard constraint")
    metrics = evaluate(problem, placement)
    out.write("\n".join(lines) + "\n\n" + table(metrics_rows(metrics)) + "\n")
    return EXIT_OK
