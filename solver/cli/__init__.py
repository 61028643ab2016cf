"""The ``npu-place`` command line: the top floor of the house.

One module per subcommand (``register`` its options, ``run`` a thin call into the
library), :mod:`solver.cli.options` and :mod:`solver.cli.output` for what they share,
and :mod:`solver.cli.main` for the parser and the exit codes.  Nothing outside this
package imports it; what the doors share (exit codes, the user-facing error, bundled
examples) lives below, in :mod:`solver.doors`.
"""

from solver.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
