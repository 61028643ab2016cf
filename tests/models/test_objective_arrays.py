"""The objective's array forms against their plain definitions.

``domain_keys`` and the fragment, bound and reserve terms are computed on numpy arrays and
kept per compiled problem; these properties compare them with straightforward per-node
definitions on random problems and valid placements of every family.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.compiled import Problem
from models.eligibility import eligible_nodes
from models.fragment import domain_keys, job_fragment, multilevel_fragment
from models.objective import evaluate, placement_nodes
from models.scenario import Family
from tests.strategies import problems, valid_placements


def _reference_keys(problem: Problem, tree: int, level: int) -> np.ndarray:
    """Domain ids by first appearance of the label-value path at levels ``level..D``."""
    view = problem.trees[problem.tree_names[tree]]
    keys: dict[tuple[int, ...], int] = {}
    out = np.full(problem.num_nodes, -1, dtype=np.int64)
    for n in np.flatnonzero(view.member).tolist():
        key = tuple(int(view.level_value[i][n]) for i in range(level - 1, view.depth))
        out[n] = keys.setdefault(key, len(keys))
    return out


def _reference_fragment(problem: Problem, j: int, used: np.ndarray, tree: int) -> int:
    """The multilevel fragment through the dict form :func:`multilevel_fragment`."""
    job = problem.jobs[j]
    eligible = eligible_nodes(problem, job, tree)
    l1 = _reference_keys(problem, tree, 1)
    left = Counter(l1[eligible & (used == 0)].tolist())
    for g in set(l1[eligible].tolist()):
        left.setdefault(g, 0)
    parents = []
    for i in range(1, len(job.levels)):
        lower = _reference_keys(problem, tree, i)
        upper = _reference_keys(problem, tree, i + 1)
        parents.append({int(lower[n]): int(upper[n]) for n in np.flatnonzero(lower >= 0)})
    return multilevel_fragment(dict(left), parents, job.levels)


@given(problems(families=[Family.MULTILEVEL], max_nodes=40))
def test_domain_keys_match_the_per_node_definition(problem: Problem) -> None:
    for t, name in enumerate(problem.tree_names):
        for level in range(1, problem.trees[name].depth + 1):
            got = domain_keys(problem, t, level)
            assert np.array_equal(got, _reference_keys(problem, t, level))
            assert domain_keys(problem, t, level) is got  # computed once per problem
            with pytest.raises(ValueError):
                got[0] = 0  # shared, hence read-only


@given(st.data(), problems(families=[Family.MULTILEVEL], max_nodes=40))
def test_multilevel_fragment_matches_the_dict_form(data: st.DataObject,
                                                   problem: Problem) -> None:
    placement = data.draw(valid_placements(problem))
    placed = placement_nodes(problem, placement)
    used = np.zeros(problem.num_nodes, dtype=np.int64)
    for j, nodes in placed.items():
        np.add.at(used, np.asarray(nodes), problem.jobs[j].npu_per_task)
    for j, nodes in placed.items():
        tree = int(problem.node_tree[nodes[0]])
        assert (job_fragment(problem, problem.jobs[j], used, nodes, tree)
                == _reference_fragment(problem, j, used, tree))


@given(st.data(), problems(max_nodes=40))
def test_evaluate_is_the_same_on_a_second_call(data: st.DataObject, problem: Problem) -> None:
    """Cached per-problem arrays do not leak state from one evaluation into the next."""
    placement = data.draw(valid_placements(problem))
    first = evaluate(problem, placement)
    assert evaluate(problem, placement) == first
