"""A CP-SAT model whose constraint-adding calls are cancellation checkpoints.

Apart from :mod:`solver.model.cancel` (which imports no OR-Tools, so that the facade
and the greedy path start without it).
"""

from __future__ import annotations

from typing import Any

from ortools.sat.python import cp_model
from ortools.sat.python import cp_model_helper as cmh

from solver.model.cancel import checkpoint

#: Objective terms written between two checkpoints by :meth:`CancellableModel.maximize`
#: (the same slice as :data:`solver.model.variables.CHUNK_TERMS`).
OBJECTIVE_CHUNK = 4096


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

    def maximize(self, obj: Any) -> None:
        """As :meth:`CpModel.maximize`, written in slices with a checkpoint before each."""
        self._set_objective_in_slices(obj, maximize=True)

    def minimize(self, obj: Any) -> None:
        """As :meth:`CpModel.minimize`, written in slices with a checkpoint before each."""
        self._set_objective_in_slices(obj, maximize=False)

    def _set_objective_in_slices(self, obj: Any, maximize: bool) -> None:
        """The objective proto exactly as CP-SAT's ``_set_objective`` writes it for an
        integer linear expression, but by slices of :data:`OBJECTIVE_CHUNK` terms with a
        checkpoint before each: CP-SAT appends the terms one Python call at a time
        (about 3 µs a term: 0.15 s for 5·10^4 terms without a checkpoint).  Anything
        else (a constant, a float expression) is left to CP-SAT."""
        checkpoint()
        if not isinstance(obj, cp_model.LinearExpr) or not obj.is_integer():
            if maximize:
                super().maximize(obj)
            else:
                super().minimize(obj)
            return
        self.clear_objective()
        flat = cmh.FlatIntExpr(obj)  # one call: merges repeated variables, folds constants
        objective = self.proto.objective
        sign = -1 if maximize else 1
        variables, coefs = list(flat.vars), list(flat.coeffs)
        for start in range(0, len(variables), OBJECTIVE_CHUNK):
            checkpoint()
            objective.vars.extend([v.index for v in variables[start:start + OBJECTIVE_CHUNK]])
            objective.coeffs.extend([sign * c for c in coefs[start:start + OBJECTIVE_CHUNK]])
        objective.scaling_factor = -1.0 if maximize else 1.0
        objective.offset = sign * flat.offset
