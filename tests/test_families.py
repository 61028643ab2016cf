"""Every placement family has its rules in every layer (models, heuristics, solver), and
the rules say what the validator checks (docs/development.md, "Adding a rule family")."""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from heuristics.families import GREEDY_FAMILIES
from models.families import FAMILY_RULES
from models.scenario import Family
from solver.families import SOLVER_FAMILIES


@pytest.mark.parametrize("table", [FAMILY_RULES, GREEDY_FAMILIES, SOLVER_FAMILIES],
                         ids=["models", "heuristics", "solver"])
def test_every_family_is_registered_in_every_layer(table: Mapping[Family, Any]) -> None:
    assert set(table) == set(Family)
    assert all(hooks.family is family for family, hooks in table.items())


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


def test_a_grouped_familys_innermost_group_sits_in_its_leaf_domain() -> None:
    job = SimpleNamespace(tasks=16, sp_block=8, tp_block=4, levels=(4, 8))
    for family, hooks in SOLVER_FAMILIES.items():
        if not FAMILY_RULES[family].grouped:
            assert hooks.leaf_domain is None
            with pytest.raises(NotImplementedError):
                hooks.group_levels(job)  # type: ignore[arg-type]
            continue
        levels = hooks.group_levels(job)  # type: ignore[arg-type]
        assert levels[-1][0] == hooks.leaf_domain
        assert [size for _, size in levels] == sorted(size for _, size in levels)[::-1]
