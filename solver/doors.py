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
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from models.check import check
from models.compiled import Problem, compile_scenario
from models.errors import InputError
from models.io import read_document, scenario_model
from models.joblist import job_count
from models.limits import MAX_ERRORS_SHOWN, capped
from models.objective import evaluate
from models.placement import PlacementFile

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


#: The optional doors (``pip install 'npu-place[EXTRA]'``): each extra and the modules it
#: brings that npu-place imports.  ``all`` installs every one; ``plan``, ``validate``,
#: ``compare`` of scenarios, ``simulate``, ``replay`` of one seed, ``import`` of dumps,
#: ``examples`` and ``schema`` need none.
EXTRAS: dict[str, tuple[str, ...]] = {
    "serve": ("fastapi", "uvicorn", "prometheus_client", "httpx"),
    "kube": ("kubernetes",),
    "sweep": ("dask", "distributed"),
    "plot": ("matplotlib",),
}


def missing_extra_module(extra: str) -> str | None:
    """The first module of ``extra`` (a key of :data:`EXTRAS`) that cannot be imported
    here, or ``None`` when all can (found, not imported: the door imports them itself)."""
    from importlib.util import find_spec

    for module in EXTRAS[extra]:
        try:
            if find_spec(module) is None:  # also None when sys.modules[module] is None
                return module
        except (ImportError, ValueError):  # a broken install, or a stub without a spec
            return module
    return None


def extra_hint(extra: str, module: str) -> str:
    """How to get ``extra``, in one line: ``... (pip install 'npu-place[serve]')``."""
    return f"{module} is not installed (pip install 'npu-place[{extra}]')"


def require_extra(extra: str, door: str) -> None:
    """Stop before ``door`` (the command and option using it, for the message) when a
    module of ``extra`` is missing.

    Raises
    ------
    CliError
        Exit 2, one line naming the door, the missing module and the extra to install.
    """
    module = missing_extra_module(extra)
    if module is not None:
        raise CliError(f"{door} needs the '{extra}' extra: {extra_hint(extra, module)}")


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


#: How a bundled example is named in output and may be named on the command line.
EXAMPLE_PREFIX = "example:"


def source_label(path: str | os.PathLike[str]) -> str:
    """``example:NAME`` for a bundled example scenario, else ``path`` as given (output shows
    the example's name, not its long installed path)."""
    folder = resources.files("models") / "examples"
    try:
        resolved = Path(path).resolve()
        if (resolved.suffix == ".yaml" and resolved.parent == Path(str(folder)).resolve()
                and resolved.stem in example_names()):
            return EXAMPLE_PREFIX + resolved.stem
    except (OSError, RuntimeError):  # an unreadable path is shown as given
        pass
    return str(path)


def load_problem(path: str | os.PathLike[str]) -> Problem:
    """Load, validate and compile a scenario file (raises :class:`models.errors.InputError`).

    Every error at once: field errors and the cross-field rules of what did parse.
    """
    return problem_from_data(read_document(path), str(path))


def problem_from_data(data: Any, source: str) -> Problem:
    """Validate and compile plain scenario data (raises :class:`models.errors.InputError`)."""
    # compile_scenario runs the cross-field rules itself (once), naming ``source``
    return compile_scenario(scenario_model(data, source), source)


@dataclass
class Verdict:
    """What ``validate`` (the command and ``POST /v1/validate``) answers.

    Attributes
    ----------
    valid
        No input error and no hard-constraint violation.
    errors
        Input errors of the scenario (or placement), each naming file, item and field.
    violations
        Hard constraints the placement breaks (``rule``, ``job``, ``node``, ``message``).
    metrics
        The placement's metrics (contract keys) when it is valid.
    nodes, jobs
        Size of the valid scenario.
    """

    valid: bool
    errors: list[str] = field(default_factory=list)
    violations: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] | None = None
    nodes: int = 0
    jobs: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The answer as plain data (the service's ``ValidateResponse`` shape): the lists
        capped as the CLI prints them, with their totals."""
        return {"valid": self.valid, "errors": capped(list(self.errors)),
                "errors-total": len(self.errors),
                "violations": list(self.violations)[:MAX_ERRORS_SHOWN],
                "violations-total": len(self.violations), "metrics": self.metrics,
                "nodes": self.nodes, "jobs": self.jobs}


def validate_data(scenario: Any, source: str = "scenario",
                  placement: PlacementFile | None = None) -> Verdict:
    """Check scenario data, and a placement against it: the one ``validate`` of npu-place.

    Parameters
    ----------
    scenario
        The parsed scenario document.
    source
        Its name in messages (a file name, or ``scenario`` in a request body).
    placement
        An engine's answer to check against the scenario.

    Returns
    -------
    Verdict
        ``valid`` false with every input error of the scenario, or the placement's
        violations (or metrics when it breaks no hard constraint).
    """
    try:
        problem = problem_from_data(scenario, source)
    except InputError as exc:
        return Verdict(valid=False, errors=list(exc.messages))
    verdict = Verdict(valid=True, nodes=problem.num_nodes, jobs=job_count(problem.scenario))
    if placement is None:
        return verdict
    violations = check(problem, placement)
    verdict.violations = [{"rule": v.rule.value, "job": v.job, "node": v.node,
                           "message": v.message} for v in violations]
    verdict.valid = not violations
    if not violations:
        verdict.metrics = evaluate(problem, placement).to_model().model_dump(by_alias=True)
    return verdict
