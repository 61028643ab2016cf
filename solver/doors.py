"""What every door of npu-place shares: exit codes, the user-facing error, bundled examples.

The command line (:mod:`solver.cli`), the planning service (:mod:`solver.service`),
``simulate`` and the benchmark commands import these from here, below all of them, so
that no module needs the command line itself.

Exit codes: 0 ok, 2 invalid input (a message naming the file, job or node and the field),
1 an internal error or a check that failed (``validate`` finding violations, ``compare``
or ``sweep`` finding a regression).
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from models.compiled import Problem, compile_scenario
from models.io import model_from_data, read_document
from models.scenario import Scenario

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2

#: The bundled example ``plan`` runs when no scenario is given.
DEFAULT_EXAMPLE = "superpod-850"


class CliError(Exception):
    """A user-facing error with an exit code (default :data:`EXIT_INVALID`)."""

    def __init__(self, message: str, code: int = EXIT_INVALID) -> None:
        super().__init__(message)
        self.code = code


def example_names() -> list[str]:
    """Names of the bundled example scenarios."""
    folder = resources.files("models") / "examples"
    return sorted(p.name[:-5] for p in folder.iterdir()
                  if p.name.endswith(".yaml") and not p.name.endswith(".events.yaml"))


def example_path(name: str) -> Path:
    """Path of a bundled example scenario.

    Raises
    ------
    CliError
        When no bundled example has that name (the message lists the names).
    """
    folder = resources.files("models") / "examples"
    path = folder / f"{name}.yaml"
    if name not in example_names() or not path.is_file():  # never a path outside examples/
        raise CliError(f"no bundled example named '{name}'; choose one of "
                       f"{', '.join(example_names())}")
    return Path(str(path))


def load_problem(path: str | os.PathLike[str]) -> Problem:
    """Load, validate and compile a scenario file (raises :class:`models.errors.InputError`)."""
    source = str(path)
    # compile_scenario runs the cross-field rules itself (once), naming ``source``
    scenario = model_from_data(Scenario, read_document(path), source)
    return compile_scenario(scenario, source)
