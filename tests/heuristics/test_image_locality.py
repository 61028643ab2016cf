"""Image locality in the greedy's tie-breaks and in the objective's order.

The tie-break puts nodes holding the job's image before the others among nodes upstream's
order finds equal, and is off with ``image-locality: false`` (upstream's order exactly).
The objective rewards hosting nodes that hold the image, always below one origin hit.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from heuristics.greedy import greedy_plan
from heuristics.vnpu import greedy_vnpu
from models.compiled import Problem
from models.limits import MAX_IMAGE_SIZE_GB
from models.objective import Weights, evaluate, resolve_weights
from tests.models.builders import entry, job, node, pod_node, problem, scenario
from tests.models.test_vnpu import doc, vjob, vnode_row

IMAGE = {"name": "llm:1", "size-gb": 30.0}


def _hosts(prob: Problem, j: int = 0) -> list[str]:
    plan = greedy_plan(prob)
    nodes = plan.nodes[j]
    assert nodes is not None, plan.reasons[j]
    return [prob.node_names[int(n)] for n in nodes]


def _both(data: dict[str, Any]) -> tuple[Problem, Problem]:
    """The scenario with image locality on (default) and off."""
    off = {**data, "config": {**data.get("config", {}), "image-locality": False}}
    return problem(data), problem(off)


def test_ordinary_tie_goes_to_the_image_holder_and_back_to_natural_order_when_off() -> None:
    nodes = [node(f"n{i}") for i in range(4)]
    nodes[2]["images"] = {"llm:1": 30.0}
    on, off = _both(scenario(nodes, [job("a", image=IMAGE)]))
    assert _hosts(on) == ["n2"]
    assert _hosts(off) == ["n0"]


def test_the_tie_break_never_overrides_upstreams_score() -> None:
    """A partly used node scores higher (bin packing): it wins over an idle image holder."""
    nodes = [node("n0"), node("n1", free=4)]
    nodes[0]["images"] = {"llm:1": 30.0}
    on, _ = _both(scenario(nodes, [job("a", npu=4, image=IMAGE)]))
    assert _hosts(on) == ["n1"]


def test_no_image_or_no_holder_is_upstreams_order() -> None:
    nodes = [node(f"n{i}") for i in range(3)]
    nodes[1]["images"] = {"other:1": 5.0}
    prob = problem(scenario(nodes, [job("a", image=IMAGE), job("b")]))
    assert _hosts(prob, 0) == ["n0"] and _hosts(prob, 1) == ["n1"]


def test_super_pod_nodes_inside_a_pod_holders_first() -> None:
    nodes = [pod_node(f"n{i}", pod=0) for i in range(4)]
    for i in (1, 3):
        nodes[i]["images"] = {"llm:1": 30.0}
    data = scenario(nodes, [job("a", policy="chip8-node8-sp", tasks=2, sp_block=16,
                                image=IMAGE)], config={"super-pod-size": 4, "reserve-nodes": 0})
    on, off = _both(data)
    assert sorted(_hosts(on)) == ["n1", "n3"]
    assert sorted(_hosts(off)) == ["n0", "n1"]


def test_multilevel_leaves_holders_first() -> None:
    nodes = [pod_node(f"n{i}", labels={"l1": "a", "l2": "root"}) for i in range(4)]
    nodes[3]["images"] = {"llm:1": 30.0}
    config = {"resource-level-config": {"default": {
        "level1": {"label": "l1"}, "level2": {"label": "l2"}}}}
    data = scenario(nodes, [job("a", policy="multilevel", tasks=1, npu=8,
                                affinity_config="level1=1", image=IMAGE)], config=config)
    for n in data["nodes"]:
        n["npus"] = n["free"] = 16
    data["jobs"][0]["npu-per-task"] = 16
    on, off = _both(data)
    assert _hosts(on) == ["n3"]
    assert _hosts(off) == ["n0"]


def test_vnpu_tie_goes_to_the_image_holder() -> None:
    rows = [vnode_row("v1"), vnode_row("v2")]
    rows[1]["images"] = {"llm:1": 30.0}
    data = doc(rows, [vjob("a", cores=1, image=IMAGE)])
    on, off = _both(data)
    plan_on, plan_off = greedy_vnpu(on), greedy_vnpu(off)
    assert plan_on.nodes[0] == [1] and plan_off.nodes[0] == [0]
    # and the objective rewards it: 30 GB x weight 1
    assert (evaluate(on, {}, vnpu={0: [1]}).objective
            - evaluate(on, {}, vnpu={0: [0]}).objective) == 30
    assert evaluate(off, {}, vnpu={0: [1]}).objective == evaluate(off, {}, vnpu={0: [0]}).objective


@settings(max_examples=80, deadline=None)
@given(tasks=st.integers(1, 6), size=st.floats(0.0, MAX_IMAGE_SIZE_GB),
       holders=st.integers(0, 12), weight=st.integers(0, 1000),
       others=st.lists(st.floats(0.0, MAX_IMAGE_SIZE_GB), max_size=3))
def test_an_origin_hit_outweighs_any_image_term(tasks: int, size: float, holders: int,
                                                weight: int, others: list[float]) -> None:
    """Ranks 0..tasks-1 have origins n0..; the image is on other nodes only.  Giving up one
    origin hit for image holders on every rank never scores higher, for any image size and
    weight (other jobs with images of any size in the batch too)."""
    count = 2 * tasks + holders
    nodes = [node(f"n{i}") for i in range(count + 2 * len(others))]
    for i in range(tasks, count):
        nodes[i]["images"] = {"llm:1": size}
    jobs = [job("a", tasks=tasks, owner_uid="ua", image={"name": "llm:1", "size-gb": size})]
    for k, other in enumerate(others):
        jobs.append(job(f"o{k}", image={"name": f"o{k}", "size-gb": other}))
        nodes[count + 2 * k]["images"] = {f"o{k}": other}
    data = scenario(nodes, jobs, cache=[entry("ua", r, f"n{r}") for r in range(tasks)])
    prob = problem(data)
    weights = resolve_weights(prob, Weights(image_gb=weight))
    all_hits = {0: list(range(tasks))}
    # one rank leaves its origin for an image holder (or a fresh node), the others stay;
    # then every rank on a holder where there are enough
    spots = list(range(tasks, count)) + list(range(count, len(nodes)))
    one_less = {0: [spots[0], *range(1, tasks)]}
    best = evaluate(prob, all_hits, weights)
    assert best.origin_hits == tasks
    assert best.objective > evaluate(prob, one_less, weights).objective
    if holders >= tasks:
        on_holders = {0: list(range(tasks, 2 * tasks))}
        assert best.objective > evaluate(prob, on_holders, weights).objective
    if weights.image_of(0):
        assert weights.origin_hit > weights.image_of(0) * min(tasks, count - tasks)
