"""Every placement family has its rules in every layer (models, heuristics, solver), and
the rules say what the validator checks (docs/development.md, "Adding a rule family")."""

from __future__ import annotations

import pytest

from heuristics.families import GREEDY_FAMILIES
from models.families import FAMILY_RULES
from models.scenario import Family
from solver.families import SOLVER_FAMILIES


@pytest.mark.parametrize("table", [FAMILY_RULES, GREEDY_FAMILIES, SOLVER_FAMILIES],
                         ids=["models", "heuristics", "solver"])
def test_every_family_is_registered_in_every_layer(table: object) -> None:
    assert isinstance(table, dict) or hasattr(table, "items")
    entries = dict(table.items())  # type: ignore[attr-defined]
    assert set(entries) == set(Family)
    assert all(hooks.family is family for family, hooks in entries.items())


def test_each_layers_greedy_strategy_loads() -> None:
    for hooks in GREEDY_FAMILIES.values():
        assert callable(hooks.load_strategy())


def test_the_rules_nest_as_the_topology_does() -> None:
    """A rack sits in a super pod; trees and super pods are separate; only grouped
    families have topology rules."""
    for rules in FAMILY_RULES.values():
        assert not rules.in_rack or rules.in_super_pod
        assert not (rules.in_tree and rules.in_super_pod)
        assert rules.grouped == (rules.in_super_pod or rules.in_tree)
