"""The assignment inside the rank relabelling (``heuristics.multilevel.ranks``).

The hand-written Hungarian method must find a maximum-weight assignment: its total is
compared with brute force over every permutation of small matrices.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from heuristics.multilevel.ranks import _assign, _hungarian_max


@st.composite
def weights(draw: st.DrawFn) -> list[list[int]]:
    """A square matrix of 1–6 rows of small non-negative weights (many ties)."""
    n = draw(st.integers(1, 6))
    return [draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)) for _ in range(n)]


def _best(weight: list[list[int]]) -> int:
    n = len(weight)
    return max(sum(weight[i][p[i]] for i in range(n)) for p in itertools.permutations(range(n)))


@settings(max_examples=300, deadline=None)
@given(weights())
def test_hungarian_total_is_the_brute_force_maximum(weight: list[list[int]]) -> None:
    cols = _hungarian_max(weight)
    assert sorted(cols) == list(range(len(weight)))  # a permutation
    assert sum(weight[i][cols[i]] for i in range(len(weight))) == _best(weight)


@settings(max_examples=100, deadline=None)
@given(weights())
def test_assign_returns_the_maximum_and_its_total(weight: list[list[int]]) -> None:
    total, cols = _assign(weight)
    assert sorted(cols) == list(range(len(weight)))
    assert total == sum(weight[i][cols[i]] for i in range(len(weight))) == _best(weight)
