"""``npu-place examples [NAME] [--copy NAME DIR]``: what ships with the package.

Five kinds of example, each listed with a line saying what it is:

* ``scenario``: a scenario file (``plan``, ``compare``, ``validate``, ``simulate`` take it
  with ``--example NAME``; the library with ``load_scenario("example:NAME")``);
* ``events``: a file of sessions for ``simulate``;
* ``day``: a generated day for ``replay --example NAME``;
* ``dump``: kubectl dumps of a cluster (a folder) for ``import``;
* ``grid``: a what-if grid for ``sweep``, written with the scenarios it names;
* ``deploy``: the Kubernetes files that run ``serve --extender`` beside Volcano's scheduler.

``npu-place examples NAME`` prints a file example; ``--copy NAME DIR`` writes any example
(a folder's files too) into ``DIR``, so that a tour can be followed on a fresh install.
"""

from __future__ import annotations

import argparse
import shutil
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from models.documents import read_text
from solver.doors import EXIT_OK, CliError

_ROOT = Path(__file__).resolve().parent.parent.parent
_MODELS = _ROOT / "models"
_DUMPS = _MODELS / "kube" / "examples"
_GRID = _ROOT / "benchmarks" / "sweep" / "examples"
_DEPLOY = _ROOT / "solver" / "deploy"

#: What each kubectl dump folder holds (a folder has no header comment to read).
DUMP_ABOUT: dict[str, str] = {
    "superpod-850": "kubectl dumps of an Atlas 850 cluster at two times (t0, t1: a fault "
                    "evicts a 16-rank job) and events.yaml for simulate: import t0 with "
                    "--now 1764400000, then t1 with --now 1764401800 --previous",
    "rack-950": "kubectl dumps of Atlas 950 super pods in racks (clusterd mode): import "
                "with --now 1764400000",
    "multilevel": "kubectl dumps of a multilevel network tree (CIM config maps): import "
                  "with --now 1764400000",
    "vnpu-inference": "kubectl dumps of vNPU inference next to whole-card training: import "
                      "with --now 1764400000",
}
#: The suffix that names a dump folder among the examples (its scenario has the bare name).
DUMP_SUFFIX = "-dump"


@dataclass(frozen=True)
class Example:
    """One bundled example: its name, kind, what it is, and the files it is made of
    (name in the copy -> file in the package)."""

    name: str
    kind: str
    about: str
    files: dict[str, Path] = field(default_factory=dict)
    #: The file ``npu-place examples NAME`` prints (``None``: a folder, copy it).
    main: Path | None = None


def header_sentence(path: Path) -> str:
    """The first sentence of a file's leading ``#`` comment (what the example is)."""
    lines = []
    for line in read_text(path).splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    text = " ".join(w for w in lines if w)
    end = text.find(". ")
    return text if end < 0 else text[:end + 1]


def catalog() -> dict[str, Example]:
    """Every bundled example by name, in the order the listing shows them."""
    from benchmarks.replay.api import EXAMPLES as DAYS
    from benchmarks.replay.api import example_path as day_path
    from models.io import bundled_example_names, bundled_example_path

    found: list[Example] = []
    for name in bundled_example_names():
        path = bundled_example_path(name)
        found.append(Example(name, "scenario", header_sentence(path), {path.name: path}, path))
    for path in sorted(_MODELS.joinpath("examples").glob("*.events.yaml")):
        name = path.name[:-5]
        found.append(Example(name, "events", header_sentence(path), {path.name: path}, path))
    for name in DAYS:
        path = day_path(name)
        found.append(Example(name, "day", header_sentence(path), {path.name: path}, path))
    for name, about in DUMP_ABOUT.items():
        folder = _DUMPS / name
        files = {str(p.relative_to(folder)): p for p in sorted(folder.rglob("*"))
                 if p.is_file()}
        found.append(Example(name + DUMP_SUFFIX, "dump", about, files))
    grid = _GRID / "grid.yaml"
    scenarios = {p: bundled_example_path(p[:-5]) for p in ("rack-950.yaml",
                                                             "superpod-850.yaml")}
    found.append(Example("sweep-grid", "grid", header_sentence(grid),
                         {"grid.yaml": grid, **scenarios}, grid))
    deploy = {p.name: p for p in sorted(_DEPLOY.glob("*.yaml"))}
    found.append(Example("extender-deploy", "deploy",
                         "the sidecar Deployment patch, its RBAC and the scheduler "
                         "ConfigMap that run serve --extender beside Volcano's scheduler "
                         "(see docs/extender.md)", deploy))
    return {e.name: e for e in found}


def register(sub: Any) -> None:
    """Add the ``examples`` subcommand to ``sub``."""
    p = sub.add_parser("examples", help="list the bundled examples, print one, or copy one")
    p.add_argument("name", nargs="?", metavar="NAME",
                   help="print this example (a scenario, events file, day, grid or "
                        "deploy file); without it, list every example and what it is")
    p.add_argument("--copy", nargs=2, metavar=("NAME", "DIR"),
                   help="write example NAME's files into DIR (created if missing; a file "
                        "already there is not overwritten)")
    p.set_defaults(run=run)


def _unknown(name: str, known: dict[str, Example]) -> CliError:
    from models.errors import closest_name

    close = closest_name(name, list(known))
    hint = f" (did you mean '{close}'?)" if close else ""
    return CliError(f"no bundled example named '{name}'{hint}; npu-place examples lists "
                    f"them: {', '.join(known)}")


def copy_example(example: Example, target: Path) -> list[Path]:
    """Write ``example``'s files into ``target``; returns the paths written.

    Raises
    ------
    CliError
        When ``target`` is a file, or one of the files already exists there (nothing is
        overwritten; nothing is written then).
    """
    if target.exists() and not target.is_dir():
        raise CliError(f"--copy: {target} is a file, not a folder")
    destinations = [target / relative for relative in example.files]
    taken = [str(d) for d in destinations if d.exists()]
    if taken:
        raise CliError(f"--copy {example.name}: {', '.join(taken)} already exist(s); "
                       "nothing was copied (choose an empty folder)")
    for destination, source in zip(destinations, example.files.values(), strict=True):
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)
    return destinations


def run(args: argparse.Namespace, out: TextIO) -> int:
    """List the examples with what each is, print the one named, or copy one."""
    known = catalog()
    if args.copy:
        name, folder = args.copy
        if name not in known:
            raise _unknown(name, known)
        written = copy_example(known[name], Path(folder))
        out.write(f"wrote {len(written)} file(s) of {name} ({known[name].kind}) into "
                  f"{folder}: {', '.join(str(p.relative_to(folder)) for p in written)}\n")
        return EXIT_OK
    if args.name:
        if args.name not in known:
            raise _unknown(args.name, known)
        example = known[args.name]
        if example.main is None:
            raise CliError(f"'{args.name}' is a folder of {len(example.files)} files: write "
                           f"it out with npu-place examples --copy {args.name} DIR")
        out.write(read_text(example.main))
        return EXIT_OK
    width = max(len(n) for n in known)
    for example in known.values():
        lead = f"{example.name:<{width}}  {example.kind:<8}  "
        body = textwrap.wrap(example.about, width=max(40, 100 - len(lead)))
        out.write(lead + body[0] + "\n")
        out.writelines(" " * len(lead) + line + "\n" for line in body[1:])
    out.write("\nprint one: npu-place examples NAME; write one out: npu-place examples "
              "--copy NAME DIR; run a scenario: npu-place plan --example NAME\n")
    return EXIT_OK
