"""A built CP-SAT model with what hinting, solving, recovering and bounding it need.

:func:`solver.cpsat.build_model` builds it; the bounds outside the model
(:mod:`solver.bounds`) read it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from models.compiled import Problem
from solver.model.objective import ObjectiveTerms
from solver.model.structure import Structure
from solver.model.variables import Lin, ModelVariables


@dataclass
class BuiltModel:
    """A built CP-SAT model with everything needed to hint, solve and recover."""

    problem: Problem
    model: cp_model.CpModel
    structure: Structure
    variables: ModelVariables
    terms: ObjectiveTerms
    objective: Lin
    pinned: dict[int, np.ndarray]
    build_seconds: float
    best_possible: int  # every term at its best value: a valid upper bound
    focused: bool = False  # built on a focus mask: no optimality, no bound
