"""Cancellation checkpoints are close together in every stage of the CP-SAT worker.

The worker that builds, hints and recovers a model stops only at checkpoints
(:mod:`solver.model.cancel`); a stretch of Python work without one holds it past its
deadline, and the caller then abandons it with a search possibly still to come (seen on
``950-n4096-batch10-s0`` at 5 and 10 s).  Time cannot be asserted on a shared machine, so
these tests measure work instead: a profile hook counts the Python and C function calls
the worker makes between two consecutive checkpoints, and every stage must stay below a
bound that does not grow with the batch.  Before the checkpoints were added, the hint
(``plan_to_assignment``, the objective's value), the objective builder's prelude (one set
of touched variables per sub-healthy cell), recovery and the structure's node loops each
ran tens of thousands of calls in one stretch on these batches.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from benchmarks.generators import GenParams, generate_case
from heuristics.greedy import greedy_plan
from models.compiled import Problem, compile_scenario
from models.objective import evaluate, resolve_weights
from models.plan import Plan
from solver.cpsat import add_hint, build_model
from solver.lns import _blockers
from solver.model.cancel import BuildCancelled, CancelToken, cancellable, checkpoint
from solver.model.focus import neighbourhood_mask, unit_keys
from solver.model.hints import plan_to_assignment
from solver.model.recover import recover_plan
from solver.model.reuse import FIXED_PART, step_digest

#: Most function calls (Python and C) allowed between two checkpoints.  The loops check
#: every 256-4,096 items of a few calls each; a model stage without checkpoints makes
#: 10^4-10^5 calls on these batches.
MAX_CALLS_BETWEEN_CHECKPOINTS = 12_000


class CountingToken(CancelToken):
    """A token that never cancels and records the longest run of calls between checks."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.longest = 0
        self.where = ""
        self.checks = 0
        #: every stretch above the bound: (calls, where it ended)
        self.long: list[tuple[int, str]] = []

    def check(self) -> None:
        self.checks += 1
        if self.calls > MAX_CALLS_BETWEEN_CHECKPOINTS or self.calls > self.longest:
            frames = [f for f in traceback.extract_stack()[:-1]
                      if "/solver/" in f.filename]
            where = " < ".join(f"{f.name}:{f.lineno}" for f in reversed(frames[-4:]))
            if self.calls > MAX_CALLS_BETWEEN_CHECKPOINTS:
                self.long.append((self.calls, where))
            if self.calls > self.longest:
                self.longest, self.where = self.calls, where
        self.calls = 0

    def count(self, frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            self.calls += 1


@contextmanager
def counted() -> Iterator[CountingToken]:
    token = CountingToken()
    with cancellable(token):
        sys.setprofile(token.count)
        try:
            yield token
        finally:
            sys.setprofile(None)
    # the stretch after the last checkpoint counts too
    token.check()


def _problem(family: str, nodes: int, seed: int, jobs: int) -> Problem:
    return compile_scenario(generate_case(GenParams(family, nodes=nodes, seed=seed,
                                                    jobs=jobs)).scenario)


CASES = [("950", 2048, 0, 6), ("multilevel", 2048, 0, 6)]


def _stages(problem: Problem) -> dict[str, Callable[[], object]]:
    """Each stage of a whole-batch run and of a large-neighbourhood step, in order."""
    weights = resolve_weights(problem, None)
    hint = greedy_plan(problem)
    state: dict[str, Any] = {}

    def build() -> None:
        state["built"] = build_model(problem, weights, hint)

    def hinting() -> None:
        state["built"].model.hinted = None  # hint again when the stage is repeated
        add_hint(state["built"], hint)

    def recover() -> None:
        built = state["built"]
        # the hint's values stand in for a solution: recovery turns them back into a plan
        values = plan_to_assignment(problem, built.structure, built.variables, hint)
        recover_plan(problem, built.structure, built.variables, values, built.pinned)

    def step() -> None:
        # the neighbourhood of the first job, everything else fixed (solver.lns)
        hood = [0, *_blockers(problem, hint, 0)]
        fixed = {k: np.asarray(n) for k, n in enumerate(hint.nodes)
                 if k not in hood and n is not None}
        skip = frozenset(k for k, n in enumerate(hint.nodes) if k not in hood and n is None)
        keep = neighbourhood_mask(problem, hint, hood, unit_keys(problem))
        built = build_model(problem, weights, hint, keep, fixed, skip)
        add_hint(built, Plan(list(hint.nodes), list(hint.reasons)))

    return {"build": build, "hint": hinting, "recover": recover, "step": step}


@pytest.mark.parametrize(("family", "nodes", "seed", "jobs"), CASES)
def test_no_long_stretch_without_a_checkpoint(family: str, nodes: int, seed: int,
                                              jobs: int) -> None:
    problem = _problem(family, nodes, seed, jobs)
    long: dict[str, list[tuple[int, str]]] = {}
    for name, stage in _stages(problem).items():
        with counted() as token:
            stage()
        if token.long:
            long[name] = token.long
        elif token.checks <= 1:
            long[name] = [(token.longest, "no checkpoint at all")]
    assert not long, (f"{family} {nodes} nodes: stretches without a checkpoint (calls, "
                      f"where they ended), per stage: {long}")


def test_every_stage_stops_at_a_late_cancel() -> None:
    """A token cancelled after the k-th checkpoint stops each stage there, for k spread
    over the stage's whole length (the last stretches included)."""
    problem = _problem("950", 1024, 0, 4)
    stages = _stages(problem)
    for name, stage in stages.items():
        with counted() as token:
            stage()
        total = token.checks
        for k in (1, total // 2, total - 2):
            late = _CancelAfter(k)
            with cancellable(late), pytest.raises(BuildCancelled):
                stage()
            assert late.checks == k + 1, (name, k)


class _CancelAfter(CancelToken):
    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k
        self.checks = 0

    def check(self) -> None:
        self.checks += 1
        if self.checks > self.k:
            raise BuildCancelled("cancelled")


def test_the_reuse_digest_and_the_acceptance_test_stop_at_a_late_cancel() -> None:
    """The model-reuse digest of a step (two sorts per topology column, once per problem)
    and the step's acceptance test (``evaluate``, with the step's checkpoint between jobs)
    were single stretches of 25-47 ms of CPU at 65,536 nodes; both now stop at any of
    their checkpoints."""
    problem = _problem("multilevel", 1024, 0, 4)
    weights = resolve_weights(problem, None)
    hint = greedy_plan(problem)
    hood = [0, *_blockers(problem, hint, 0)]
    fixed = {k: np.asarray(n) for k, n in enumerate(hint.nodes)
             if k not in hood and n is not None}
    keep = neighbourhood_mask(problem, hint, hood, unit_keys(problem))

    def digest() -> None:
        problem.derived.forget(FIXED_PART)  # the once-per-problem part too
        step_digest(problem, hint, keep, fixed, frozenset())

    def acceptance() -> None:
        evaluate(problem, hint.as_mapping(), weights, tick=checkpoint)

    for name, stage in {"digest": digest, "evaluate": acceptance}.items():
        with counted() as token:
            stage()
        total = token.checks
        assert total > len(problem.jobs), (name, total)
        for k in (1, total // 2, total - 2):
            late = _CancelAfter(k)
            with cancellable(late), pytest.raises(BuildCancelled):
                stage()
            assert late.checks == k + 1, (name, k)


def test_a_long_sum_and_objective_are_built_in_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """One ``LinearExpr.weighted_sum`` call over a whole sum is a single call to the
    profile, but its work grows with its terms (20.7 ms for one sum at 65,536 nodes), and
    CP-SAT's ``maximize`` appends the terms one call each (0.15 s for 5·10^4 terms): each
    term handed to ``weighted_sum`` counts as a call here.  A sum of 3·CHUNK_TERMS + 512
    terms (repeated variables and negated literals across the slices' edges), made the
    objective and a row, must keep every stretch below the bound and give the very model
    that one ``weighted_sum`` call and CP-SAT's own ``maximize`` give."""
    from ortools.sat.python import cp_model

    from solver.model.cancellable import CancellableModel
    from solver.model.variables import CHUNK_TERMS, Var, lin_expr

    rng = np.random.default_rng(7)
    size = 3 * CHUNK_TERMS + 512  # above the bound in one call or one term a call
    bools = 2000  # the last variables are Booleans, some of them negated in the sum
    picks = rng.permutation(size)
    repeats = rng.random(size) < 0.05
    picks[repeats] = rng.integers(0, size, int(repeats.sum()))
    coefs = rng.integers(-5, 10, size).tolist()
    negated = (rng.random(size) < 0.2).tolist()

    def terms(model: cp_model.CpModel) -> list[tuple[Var, int]]:
        pool: list[Any] = [model.new_int_var(0, 5, f"x{i}") for i in range(size - bools)]
        pool += [model.new_bool_var(f"b{i}") for i in range(bools)]
        return [((~pool[i]) if flip and i >= size - bools else pool[i], c)
                for i, c, flip in zip(picks.tolist(), coefs, negated, strict=True)]

    plain = cp_model.CpModel()
    whole = terms(plain)
    expr = cp_model.LinearExpr.weighted_sum([v for v, _ in whole], [c for _, c in whole]) + 3
    plain.maximize(expr)
    plain.add(expr <= 10**6)

    sliced = CancellableModel()
    parts = terms(sliced)
    weighted_sum = cp_model.LinearExpr.weighted_sum
    with counted() as token:

        def counting(variables: Any, weights: Any) -> Any:
            token.calls += len(variables)  # the call's work, in terms
            return weighted_sum(variables, weights)

        monkeypatch.setattr(cp_model.LinearExpr, "weighted_sum", staticmethod(counting))
        built = lin_expr(parts, 3)
        sliced.maximize(built)
        sliced.add(built <= 10**6)
        monkeypatch.undo()
    assert not token.long, f"stretches above the bound (calls, where): {token.long}"
    assert token.checks >= 8
    assert str(sliced.proto) == str(plain.proto)


def test_the_free_paths_of_a_multilevel_tree_are_counted_in_slices(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The completely free member nodes per level path of a multilevel tree (computed once
    per problem, in the first multilevel step's build) were one ``tolist`` and one
    ``Counter`` over every such node: two calls for the profile, 10-13 ms of CPU at 65,536
    nodes.  They are counted :data:`PATHS_PER_CHECK` nodes at a time, to the same
    counts."""
    from collections import Counter

    import solver.model.objective as objective

    problem = _problem("multilevel", 1024, 0, 4)
    view = problem.trees[problem.tree_names[0]]
    nodes = np.flatnonzero(problem.whole_free & view.member & (problem.node_tree == 0))
    whole = Counter(zip(*[view.level_value[i][nodes].tolist() for i in range(view.depth)],
                        strict=True))
    monkeypatch.setattr(objective, "PATHS_PER_CHECK", 32)
    with counted() as token:
        paths = objective._whole_members_by_path(problem, 0)
    assert len(nodes) > 4 * 32 and token.checks >= len(nodes) // 32
    assert paths == whole and list(paths) == list(whole)
