"""A CP-SAT model whose constraint-adding calls are cancellation checkpoints.

Apart from :mod:`solver.model.cancel` (which imports no OR-Tools, so that the facade
and the greedy path start without it).
"""

from __future__ import annotations

from typing import Any

from ortools.sat.python import cp_model

from solver.model.cancel import checkpoint


class CancellableModel(cp_model.CpModel):
    """A CP-SAT model whose constraint-adding calls are checkpoints.

    ``hinted`` names the warm start its hints hold (a digest of the plan) and that
    start's objective value, or is ``None``; :func:`solver.cpsat.add_hint` skips setting
    the same hints again on a kept model (:mod:`solver.model.reuse`)."""

    hinted: tuple[bytes, int] | None = None

    def add(self, ct: Any) -> cp_model.Constraint:
        """As :meth:`CpModel.add`, after a checkpoint."""
        checkpoint()
        return super().add(ct)

    def add_multiplication_equality(self, target: Any, *expressions: Any) -> cp_model.Constraint:
        """As :meth:`CpModel.add_multiplication_equality`, after a checkpoint."""
        checkpoint()
        return super().add_multiplication_equality(target, *expressions)

    def add_modulo_equality(self, target: Any, expr: Any, mod: Any) -> cp_model.Constraint:
        """As :meth:`CpModel.add_modulo_equality`, after a checkpoint."""
        checkpoint()
        return super().add_modulo_equality(target, expr, mod)

    def add_division_equality(self, target: Any, num: Any, denom: Any) -> cp_model.Constraint:
        """As :meth:`CpModel.add_division_equality`, after a checkpoint."""
        checkpoint()
        return super().add_division_equality(target, num, denom)

    def add_max_equality(self, target: Any, *expressions: Any) -> cp_model.Constraint:
        """As :meth:`CpModel.add_max_equality`, after a checkpoint."""
        checkpoint()
        return super().add_max_equality(target, *expressions)
