"""``npu-place schema [scenario|placement]``: the contract as JSON Schema.

Generated from the pydantic models that read every file, so it is the contract the code
enforces (the cross-field rules of :mod:`models.validation` come on top; the prose
reference is ``models/docs/scenario-format.md``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from pydantic import BaseModel

from models.placement import PlacementFile
from models.scenario import Scenario
from solver.doors import EXIT_OK

SCHEMAS: dict[str, type[BaseModel]] = {"scenario": Scenario, "placement": PlacementFile}


def register(sub: Any) -> None:
    """Add the ``schema`` subcommand to ``sub``."""
    p = sub.add_parser("schema", help="print the JSON Schema of the scenario or placement file")
    p.add_argument("kind", nargs="?", choices=tuple(SCHEMAS), default="scenario",
                   help="which file (default: scenario)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Print the schema (JSON, 2-space indent)."""
    model = SCHEMAS[args.kind]
    schema = model.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    out.write(json.dumps(schema, indent=2, sort_keys=False) + "\n")
    return EXIT_OK
