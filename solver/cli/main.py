"""The ``npu-place`` entry point: the parser of every subcommand and the error handling.

Each subcommand is a module of this package with ``register(sub)`` (its options) and
``run(args, out)`` (a thin call into the library).  Only the module of the command being
run is imported (the others are listed in ``--help`` by name and help line), so that
``npu-place plan`` does not load what ``bench``, ``replay`` or ``serve`` need.  Errors
become exit codes here (:mod:`solver.doors`): 0 ok, 2 invalid input with a message naming
the file, job or node and the field, 1 an internal error or a failed check.  No
traceback is shown unless ``NPU_PLACE_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import TextIO

#: The subcommands in the order ``--help`` lists them: name, module of this package, and
#: the help line (the same as the module's ``register`` gives; a test keeps them equal).
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("validate", "validate", "check a scenario, and optionally a placement"),
    ("plan", "plan", "place the pending jobs of a scenario"),
    ("compare", "compare", "greedy vs CP-SAT side by side, or the regression suite"),
    ("simulate", "simulate", "multi-session what-if: events, placements, cache"),
    ("replay", "replay", "replay a generated day with upstream, rfc and cpsat: image pulls, "
                         "GB, minutes, hit rate, waits"),
    ("bench", "bench", "solver-vs-greedy benchmark suite with reports and plots"),
    ("import", "kube_import", "kubectl dumps or a live cluster -> a scenario"),
    ("sweep", "sweep", "what-if grid of scenarios x overrides x engines on Dask"),
    ("serve", "serve", "run the planning service (HTTP, loopback by default)"),
    ("volcano", "volcano_session",
     "play one Volcano session from kubectl dumps against serve --extender"),
    ("watch", "watch", "keep a service's stored cluster current from the Kubernetes API"),
    ("examples", "examples", "list the bundled examples, print one, or copy one"),
    ("schema", "schema", "print the JSON Schema of the scenario or placement file"),
)


#: The last line after input errors: what did not happen, in the command's words.
CLOSING = {
    "validate": "the input is not valid",
    "plan": "nothing was placed",
    "compare": "nothing was compared",
    "simulate": "nothing was simulated",
    "replay": "nothing was replayed",
    "bench": "the suite did not run",
    "import": "nothing was imported",
    "sweep": "no cell was run",
    "serve": "the service did not start",
    "volcano": "no session was played",
    "watch": "the cluster was not watched",
}


def version() -> str:
    """The installed npu-place version (read only when asked: importing
    :mod:`importlib.metadata` costs ~30 ms of every command's start)."""
    from importlib import metadata

    try:
        return metadata.version("npu-place")
    except metadata.PackageNotFoundError:  # pragma: no cover - a bare checkout
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """``--version``: print the version and exit (looked up only then)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default,
                         help=help or "show the installed version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        sys.stdout.write(f"npu-place {version()}\n")  # stdout, as argparse's own action
        parser.exit()


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` runs (its first word that is not an option), if known."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if any(word == name for name, _module, _help in COMMANDS) else None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of ``npu-place``.

    Parameters
    ----------
    command
        Build only this subcommand's options (and import only its module); the others
        are listed by name and help line.  ``None``: every subcommand in full; ``""``:
        none (enough for ``--help``, ``--version`` and a misspelt command).
    """
    parser = argparse.ArgumentParser(
        prog="npu-place",
        description="Placement engine for Ascend NPU gang jobs (greedy port + CP-SAT), "
                    "preferring each pod's previous node.",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module, help_line in COMMANDS:
        if command is None or name == command:
            importlib.import_module(f"solver.cli.{module}").register(sub)
        else:
            sub.add_parser(name, help=help_line)
    return parser


def unknown_options_message(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """``unrecognized arguments: ...``, with the closest option of ``parser`` for each typo."""
    from models.errors import closest_name  # only on this error: --help loads no library

    options = [o for action in parser._actions for o in action.option_strings
               if o.startswith("--")]
    hints = []
    for extra in extras:
        if not extra.startswith("-"):
            continue
        name = extra.split("=", 1)[0]
        close = closest_name(name, options)
        if close:
            hints.append(f"{name}: did you mean {close}?")
    return (f"unrecognized arguments: {' '.join(extras)}"
            + (f" ({'; '.join(hints)})" if hints else ""))


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``; an unknown option is reported by its subcommand's parser.

    The subcommand's usage is shown (not the top-level one) with the closest option it
    has ("did you mean --time-limit?").  Exits (``SystemExit``) as argparse does.
    """
    args, extras = parser.parse_known_args(argv)
    if extras:
        subparsers = next(a for a in parser._actions
                          if isinstance(a, argparse._SubParsersAction))
        command_parser = subparsers.choices[args.command]
        command_parser.error(unknown_options_message(command_parser, extras))
    return args


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    """Entry point of ``npu-place``; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:  # bare ``npu-place``: what it can do, not argparse's one-line complaint
        err.write(build_parser("").format_help())
        err.write("\nnpu-place COMMAND --help shows a command's options; start with "
                  "npu-place plan --example rack-950\n")
        return 2
    # without a known command (--help, --version, a usage error) no command is built
    parser = build_parser(chosen_command(argv) or "")
    try:
        with contextlib.redirect_stderr(err):  # argparse reports usage errors on stderr
            args = parse(parser, argv)
    except SystemExit as exc:
        if isinstance(exc.code, int):
            return exc.code
        from solver.doors import EXIT_INVALID

        return EXIT_INVALID
    # imported here, not at the top: ``--version`` and ``--help`` load no library (the
    # command's own module has loaded these by now)
    from models.errors import InputError
    from models.limits import MAX_ERRORS_SHOWN, escape_text
    from solver.doors import EXIT_FAILED, EXIT_INVALID, CliError
    from solver.model.cancel import deferred_cleanup

    try:
        # a command's process is the tool's own: answers on time, cleanup just after
        with contextlib.redirect_stderr(err), deferred_cleanup():  # notes go to ``err`` too
            code: int = args.run(args, out)
        return code
    except InputError as exc:
        # The listing is capped: a file with 10^6 mistakes gets N lines and a count.
        for message in exc.messages[:MAX_ERRORS_SHOWN]:
            err.write(f"error: {escape_text(message, 2000)}\n")
        hidden = len(exc.messages) - MAX_ERRORS_SHOWN
        if hidden > 0:
            err.write(f"... and {hidden} more error(s) not shown\n")
        err.write(f"{len(exc.messages)} input error(s); "
                  f"{CLOSING.get(args.command, 'nothing was done')}\n")
        return EXIT_INVALID
    except CliError as exc:
        err.write(f"error: {escape_text(str(exc), 2000)}\n")
        return exc.code
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130
    except Exception as exc:  # the CLI never shows a traceback unless asked to
        if os.environ.get("NPU_PLACE_DEBUG"):
            traceback.print_exc(file=err)
        err.write(f"internal error: {type(exc).__name__}: {escape_text(str(exc), 2000)}\n"
                  "(set NPU_PLACE_DEBUG=1 for a traceback; please report it)\n")
        return EXIT_FAILED
