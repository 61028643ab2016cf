"""Digests of the CP-SAT models a solve hands to the solver.

:func:`recording_proto_digests` is a context manager for tools that prove a refactoring
changed nothing (``python -m benchmarks.digests``): while it is open, every
:meth:`CpSolver.solve` call first records the SHA-256 (16 hex digits) of its model's
``CpModelProto`` in text format, hints included.  It lives in ``solver/`` because only the
solver imports OR-Tools.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ortools.sat.python import cp_model

__all__ = ["recording_proto_digests"]


@contextmanager
def recording_proto_digests() -> Iterator[list[str]]:
    """Record the digest of every CP-SAT model solved inside the ``with`` block.

    Yields
    ------
    list of str
        The digests in solving order; the list grows while the block runs.
    """
    seen: list[str] = []
    original = cp_model.CpSolver.solve

    def recording(self: cp_model.CpSolver, model: cp_model.CpModel, *args: Any,
                  **kwargs: Any) -> Any:
        data = str(model.Proto()).encode()
        seen.append(hashlib.sha256(data).hexdigest()[:16])
        return original(self, model, *args, **kwargs)

    cp_model.CpSolver.solve = recording  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        cp_model.CpSolver.solve = original  # type: ignore[method-assign]
