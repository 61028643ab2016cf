"""A warm start that differs from the plan the model was built with is
representable when it only uses other, interchangeable nodes of a cell.

The model keeps for node-level jobs the first nodes of each cell of identical whole free
nodes; the origin-first construction (or an earlier answer) may use other nodes of the
cell.  Before, such a start was refused ("warm start not representable: no variable for
(0, 7)" on stderr in replays) and CP-SAT searched without it.
"""

from __future__ import annotations

import contextlib
import random

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from heuristics.greedy import greedy_plan
from models.compiled import Problem
from models.objective import evaluate, resolve_weights
from models.plan import Plan
from solver.cpsat import add_hint, build_model
from solver.model.hints import HintError
from tests.models.builders import job, node, problem, scenario
from tests.strategies import problems, random_plan


def _shuffled_within_cells(p: Problem, plan: Plan, seed: int) -> Plan:
    """``plan`` with every node-level job's nodes moved to random unused nodes of the
    same cell of the model built from ``plan`` (an equally good plan)."""
    structure = build_model(p, resolve_weights(p), plan).structure
    rng = random.Random(seed)
    used = {int(n) for nodes in plan.nodes if nodes is not None for n in nodes}
    out = plan.copy()
    for j in structure.ordinary:
        nodes = out.nodes[j]
        if nodes is None:
            continue
        for r in range(len(nodes)):
            cell = structure.cell_of.get(int(nodes[r]))
            if cell is None or not p.jobs[j].to_place[r]:
                continue
            others = [m for m in structure.cells[cell].nodes if m not in used]
            if others and rng.random() < 0.7:
                target = rng.choice(others)
                old = int(nodes[r])
                used.discard(old)
                used.add(target)
                nodes[nodes == old] = target
    return out


def test_the_replay_case_start_on_another_node_of_the_cell() -> None:
    """Ten identical free nodes; the model keeps the first for the 1-task job; a start
    on the last one (what origin-first answered in the replay) is representable."""
    nodes = [node(f"n{i}") for i in range(10)]
    p = problem(scenario(nodes, [job("a", tasks=1)]))
    weights = resolve_weights(p)
    greedy = greedy_plan(p)
    built = build_model(p, weights, greedy)
    start = greedy.copy()
    start.nodes[0][:] = 9
    assert 9 not in built.structure.ordinary[0].nodes  # not a candidate of the model
    assert add_hint(built, start) == evaluate(p, start.as_mapping(), weights).objective


@settings(max_examples=40, deadline=None)
@given(p=problems(max_nodes=24, max_jobs=4), seed=st.integers(0, 2**31 - 1))
def test_a_start_moved_within_cells_is_representable(p: Problem, seed: int) -> None:
    weights = resolve_weights(p)
    mapping = random_plan(p, random.Random(seed))
    assume(mapping)
    plan = Plan([None] * len(p.jobs), [None] * len(p.jobs))
    for j, nodes in mapping.items():
        plan.nodes[j] = np.asarray(nodes, dtype=np.int32)
    built = build_model(p, weights, plan)
    try:
        add_hint(built, plan)
    except HintError:
        assume(False)  # a plan the model cannot hold even as built (not this test's case)
    moved = _shuffled_within_cells(p, plan, seed)
    assert add_hint(built, moved) == evaluate(p, moved.as_mapping(), weights).objective


@settings(max_examples=200, deadline=None)
@given(p=problems(max_nodes=24, max_jobs=4), seed=st.integers(0, 2**31 - 1))
def test_any_valid_start_is_a_hint_or_a_hint_error(p: Problem, seed: int) -> None:
    """A valid start the model was not built with (a random valid plan) is either
    representable or refused with HintError (a note): never another exception out of
    the solve (a start with a whole-node rank outside the model's cells raised KeyError).
    """
    weights = resolve_weights(p)
    built = build_model(p, weights, greedy_plan(p))
    for k in range(3):
        mapping = random_plan(p, random.Random(seed + k))
        plan = Plan([None] * len(p.jobs), [None] * len(p.jobs))
        for j, nodes in mapping.items():
            plan.nodes[j] = np.asarray(nodes, dtype=np.int32)
        with contextlib.suppress(HintError):
            add_hint(built, plan)
