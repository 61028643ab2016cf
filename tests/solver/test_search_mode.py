"""The search mode and the multilevel construction follow what the whole-batch model
would cost (:mod:`models.search_size`), not the node count."""

from __future__ import annotations

import pytest

from benchmarks.generators import GenParams, generate
from heuristics import origin_first
from heuristics.greedy import greedy_plan
from models.compiled import Problem, compile_scenario
from models.objective import evaluate, resolve_weights
from models.scenario import Scenario
from models.search_size import whole_batch_size
from solver import phases
from solver.cpsat import build_model
from solver.phases import search_mode


def _scenario(family: str, nodes: int, seed: int = 37, jobs: int = 6) -> Scenario:
    return generate(GenParams(family, nodes=nodes, seed=seed, jobs=jobs))


def _with_busy_nodes(scenario: Scenario, count: int) -> Problem:
    """``scenario`` with ``count`` more nodes, every chip of them taken by other tenants:
    more nodes, the same whole-batch model."""
    model = scenario.nodes[0]
    busy = [model.model_copy(update={"name": f"busy-{i}", "free": 0}) for i in range(count)]
    return compile_scenario(scenario.model_copy(update={"nodes": [*scenario.nodes, *busy]}))


@pytest.mark.parametrize("family", ["a3", "850", "950", "multilevel", "ordinary"])
def test_the_counted_cells_are_the_models_cells(family: str) -> None:
    # the count is made from the compiled view alone; the model built from the same
    # problem has exactly those cells, and about as many variables as the counted pairs
    problem = compile_scenario(_scenario(family, 256, seed=5))
    size = whole_batch_size(problem)
    built = build_model(problem, resolve_weights(problem), greedy_plan(problem))
    assert size.cells == len(built.structure.cells)
    variables = len(built.variables.reg.variables)
    assert size.pairs / 2 <= variables <= 4 * size.pairs, (size, variables)


def test_one_node_count_two_model_sizes_two_modes(monkeypatch: pytest.MonkeyPatch) -> None:
    # 2,048 nodes each: the ordinary batch's model would hold ten times the 850 batch's
    # (node-level jobs: a variable pair per candidate node); with the limit between the
    # two, only the larger one searches by neighbourhoods only.  A node-count rule gives
    # both the same mode.
    small = compile_scenario(_scenario("850", 2048))
    large = compile_scenario(_scenario("ordinary", 2048))
    assert small.num_nodes == large.num_nodes
    assert whole_batch_size(small).pairs * 5 < whole_batch_size(large).pairs
    monkeypatch.setattr(phases, "LNS_ONLY_PAIRS", 10_000, raising=False)
    assert search_mode(small) == "hybrid"
    assert search_mode(large) == "lns"


def test_nodes_no_job_can_use_leave_the_mode_alone() -> None:
    # the same batch with 14,400 fully used nodes added: 16,448 nodes, the same model,
    # the same mode (a node-count rule searched the larger one by neighbourhoods only)
    scenario = _scenario("ordinary", 2048)
    alone, padded = compile_scenario(scenario), _with_busy_nodes(scenario, 14400)
    assert padded.num_nodes == 16448
    assert whole_batch_size(alone) == whole_batch_size(padded)
    assert search_mode(alone) == search_mode(padded) == "hybrid"


def test_the_smallest_jobs_first_pass_follows_the_multilevel_model() -> None:
    # a small multilevel batch in a cluster of 16,384 nodes, all but its own 256 fully
    # used: its model is small, so the pass with the smallest jobs first gives the answer
    # but not the search's start, as without the busy nodes (a node-count rule made it
    # the start there)
    scenario = _scenario("multilevel", 256, seed=3)
    alone, padded = compile_scenario(scenario), _with_busy_nodes(scenario, 16128)
    assert padded.num_nodes == 16384
    assert not origin_first.smallest_first_pays(padded)
    parts = [origin_first.origin_first_parts(p, greedy_plan(p)) for p in (alone, padded)]
    for part in ("best", "start"):
        names = [[[p.node_names[int(n)] for n in nodes] if nodes is not None else []
                  for nodes in getattr(c, part).nodes]
                 for p, c in zip((alone, padded), parts, strict=True)]
        assert names[0] == names[1]
    weights = resolve_weights(padded)
    assert (evaluate(padded, parts[1].best.as_mapping(), weights).objective
            > evaluate(padded, parts[1].start.as_mapping(), weights).objective)


def test_more_free_nodes_than_the_limit_search_by_neighbourhoods_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the pairs do not predict the whole-batch phase's memory at 65,536 nodes, so the
    # completely free nodes (the cells' nodes) bound it too
    problem = compile_scenario(_scenario("850", 2048))
    size = whole_batch_size(problem)
    assert size.free_nodes == int(problem.whole_free.sum()) > 0
    monkeypatch.setattr(phases, "LNS_ONLY_FREE_NODES", size.free_nodes)
    assert search_mode(problem) == "hybrid"
    monkeypatch.setattr(phases, "LNS_ONLY_FREE_NODES", size.free_nodes - 1)
    assert search_mode(problem) == "lns"
