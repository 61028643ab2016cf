"""``npu-place validate SCENARIO [PLACEMENT]``: check a scenario, and a placement against it."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from models.errors import InputError
from models.io import dump_data, load_placement, read_document
from models.placement import MetricsModel, PlacementFile
from solver.cli.options import scenario_argument
from solver.cli.output import metrics_rows, table
from solver.doors import EXIT_FAILED, EXIT_INVALID, EXIT_OK, Verdict, validate_data


def register(sub: Any) -> None:
    """Add the ``validate`` subcommand to ``sub`` (an ``add_subparsers`` result)."""
    p = sub.add_parser("validate", help="check a scenario, and optionally a placement")
    p.add_argument("scenario", metavar="SCENARIO",
                   help="scenario file (YAML or JSON), or example:NAME for a bundled example")
    p.add_argument("placement", metavar="PLACEMENT", nargs="?",
                   help="a placement file (plan --output) to check against the scenario's "
                        "hard constraints")
    p.add_argument("--format", choices=("table", "json", "yaml"), default="table",
                   help="table (default), or json/yaml: the answer of the service's "
                        "POST /v1/validate (valid, errors, violations, metrics, nodes, jobs)")
    p.set_defaults(run=run)


def _verdict(args: argparse.Namespace) -> Verdict:
    """Read both files and check them; every input error of both is in ``errors``."""
    errors: list[str] = []
    scenario: Any = None
    try:
        scenario = read_document(scenario_argument(args.scenario))
    except InputError as exc:
        errors += exc.messages
    placement: PlacementFile | None = None
    if args.placement:
        try:
            placement = load_placement(args.placement)
        except InputError as exc:
            errors += exc.messages
    if errors:
        if scenario is not None:  # the scenario's own errors too, all in one run
            errors = validate_data(scenario, str(args.scenario)).errors + errors
        return Verdict(valid=False, errors=errors)
    return validate_data(scenario, str(args.scenario), placement)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Validate: 0 valid, 1 the placement breaks a hard constraint, 2 an input error.

    With ``--format json|yaml`` the answer is the service's ``/v1/validate`` object on
    stdout whatever the outcome (input errors included, exit 2); with the table, input
    errors are listed on stderr.
    """
    verdict = _verdict(args)
    if args.format in ("json", "yaml"):
        out.write(dump_data(verdict.to_dict(), args.format))
        if verdict.errors:
            sys.stderr.write(f"{len(verdict.errors)} input error(s), listed in the answer; "
                             "the input is not valid\n")
            return EXIT_INVALID
        return EXIT_FAILED if verdict.violations else EXIT_OK
    if verdict.errors:
        raise InputError(verdict.errors)
    lines = [f"{args.scenario}: valid scenario: {verdict.nodes} nodes, "
             f"{verdict.jobs} pending jobs"]
    if not args.placement:
        out.write("\n".join(lines) + "\n")
        return EXIT_OK
    if verdict.violations:
        lines.append(f"{args.placement}: {len(verdict.violations)} hard-constraint "
                     "violation(s):")
        lines += [f"  [{v['rule']}] {v['message']}" for v in verdict.violations]
        out.write("\n".join(lines) + "\n")
        return EXIT_FAILED
    lines.append(f"{args.placement}: the placement satisfies every hard constraint")
    metrics = MetricsModel.model_validate(verdict.metrics)
    out.write("\n".join(lines) + "\n\n" + table(metrics_rows(metrics)) + "\n")
    return EXIT_OK

