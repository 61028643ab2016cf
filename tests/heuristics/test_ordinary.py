"""Ordinary NPU jobs: the base-handler pipeline (reference §2.0, §2.1.1, §3.4, §3.5; E30–E32)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import heuristics.ordinary as ordinary
from heuristics.greedy import greedy_plan
from heuristics.ordinary import (
    SCORE_WEIGHT,
    ScoreClasses,
    best_node,
    compare_tasks,
    fault_adjust,
    keep_faults_away,
    place_ordinary,
    policy_scores,
    previous_node_bonus,
    task_order,
)
from heuristics.state import ClusterState
from models.cache import AffinityCache
from models.check import check
from models.compiled import SUBHEALTHY, UNHEALTHY, Problem, compile_scenario
from models.objective import evaluate
from models.placement import Status
from models.plan import to_placement
from models.scenario import Scenario

NOW = 1_000_000


def make(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]],
         cache: list[tuple[str, int, str]] = (), prefer: bool = True) -> Problem:
    """A compiled scenario; nodes default to 8 healthy NPUs."""
    data = {
        "now": NOW,
        "config": {"prefer-previous-node": prefer},
        "nodes": [{"npus": 8, "free": 8, **n} for n in nodes],
        "affinity-cache": {"entries": [{"owner-uid": o, "rank": r, "node": n, "updated": NOW}
                                       for o, r, n in cache]},
        "jobs": [{"policy": "chip8-node8", "owner-uid": f"uid-{j['name']}", **j} for j in jobs],
    }
    return compile_scenario(Scenario.model_validate(data))


def placed_names(problem: Problem, j: int = 0) -> list[str]:
    outcome = place_ordinary(problem, j, ClusterState.initial(problem))
    assert outcome.nodes is not None, outcome.reason
    return [problem.node_names[n] for n in outcome.nodes]


def assert_valid(problem: Problem) -> None:
    plan = greedy_plan(problem)
    violations = check(problem, to_placement(problem, plan, engine="greedy", status=Status.GREEDY))
    assert violations == []


# --------------------------------------------------------------------------- E30


def test_e30_base_handler_scores() -> None:
    # node1: free 0-4, unhealthy 5; node2: free 0-4, unhealthy 5,6; node3: free 0-5, unhealthy 6,7
    scores = policy_scores(np.array([5, 5, 6]), 8, np.array([1, 2, 2]))
    assert scores.tolist() == [695.0, 595.0, 594.0]


def test_policy_score_bin_packs_and_zeroes_oversized_nodes() -> None:
    # fewer free chips wins; a node with more usable chips than Max keeps 0 (upstream)
    assert policy_scores(np.array([8, 3, 16]), 8).tolist() == [792.0, 797.0, 0.0]


# --------------------------------------------------------------------------- E31

NAMES = ["node1", "node2", "node3", "node4"]
PREF = {0: "node1", 1: "node2"}  # PrefNodeMap of E31


def run_bonus(score_map: dict[str, float], rank: int, fault: bool = False) -> dict[str, float]:
    scores = np.array([score_map.get(n, 0.0) for n in NAMES])
    candidate = np.array([n in score_map for n in NAMES])
    peer = np.array([n in PREF.values() for n in NAMES])
    self_node = NAMES.index(PREF[rank]) if rank in PREF else -1
    previous_node_bonus(scores, candidate, self_node, peer, fault, np.arange(len(NAMES)))
    return {n: float(scores[i]) for i, n in enumerate(NAMES) if candidate[i]}


DEFAULT = {"node1": 8.0, "node2": 7.5, "node3": 7.0, "node4": 6.0}


@pytest.mark.parametrize(
    ("case", "rank", "fault", "score_in", "changed"),
    [
        # tor-affinity "null" behaves as the plain case
        ("non-fault, self present", 0, False, DEFAULT, {"node1": 108.0}),
        ("self below max: a set, not an add", 0, False,
         {"node1": 6.0, "node2": 7.5, "node3": 7.0, "node4": 6.0}, {"node1": 107.5}),
        ("non-fault rank 1", 1, False,
         {"node1": 8.0, "node2": 6.0, "node3": 7.0, "node4": 6.0}, {"node2": 108.0}),
        ("self absent: best other, node1 is a peer", 1, False,
         {"node1": 8.0, "node3": 7.0, "node4": 6.0}, {"node3": 108.0}),
        ("rank not cached: best other", 5, False,
         {"node1": 8.0, "node3": 7.0, "node4": 6.0}, {"node3": 108.0}),
        ("only peers: best peer", 5, False, {"node1": 8.0, "node2": 7.0}, {"node1": 108.0}),
        ("fault: avoids its own node1", 0, True,
         {"node1": 8.0, "node3": 7.0, "node4": 6.0}, {"node3": 108.0}),
        # "no annotation, task t1 with Index 1": ranks are always explicit here; same as rank 1
        ("index fallback rank 1", 1, False,
         {"node1": 8.0, "node2": 6.0, "node3": 7.0, "node4": 6.0}, {"node2": 108.0}),
    ],
)
def test_e31_previous_node_bonus(case: str, rank: int, fault: bool,
                                 score_in: dict[str, float], changed: dict[str, float]) -> None:
    out = run_bonus(score_in, rank, fault)
    assert out == {**score_in, **changed}, case


def test_e31_fault_no_others_follows_the_rfc() -> None:
    # Released code: node1 (its own fault node) = 108.  RFC §3.7 row 3: a fault rank is not
    # forced onto its old node while another candidate exists: no bonus, then -64 there.
    out = run_bonus({"node1": 8.0, "node2": 7.5}, 0, fault=True)
    assert out == {"node1": 8.0, "node2": 7.5}
    adjusted = fault_adjust(np.array([out["node1"], out["node2"]]), np.array([False, False]),
                            np.array([True, False]))
    assert adjusted.tolist() == [0.0, 7.5]  # floored at 0; node2 wins


def test_e31_fault_rank_alone_with_its_node_takes_it() -> None:
    assert run_bonus({"node1": 8.0}, 0, fault=True) == {"node1": 108.0}


def test_e31_skips_when_feature_off_or_no_cache() -> None:
    # Feature off: the cached node (empty, 8 free) loses to the packed node-b.
    nodes = [{"name": "node-a"}, {"name": "node-b", "free": 3}]
    jobs = [{"name": "j", "tasks": 1, "npu-per-task": 2}]
    assert placed_names(make(nodes, jobs, [("uid-j", 0, "node-a")], prefer=False)) == ["node-b"]
    assert placed_names(make(nodes, jobs, [("uid-j", 0, "node-a")], prefer=True)) == ["node-a"]
    assert placed_names(make(nodes, jobs)) == ["node-b"]


def test_place_ordinary_refuses_other_families() -> None:
    problem = compile_scenario(Scenario.model_validate({
        "now": NOW, "config": {"super-pod-size": 4, "reserve-nodes": 0},
        "nodes": [{"name": f"n{i}", "npus": 8, "free": 8, "super-pod-id": 0} for i in range(2)],
        "jobs": [{"name": "sp", "policy": "chip8-node8-sp", "tasks": 2, "npu-per-task": 8,
                  "sp-block": 16}],
    }))
    with pytest.raises(ValueError, match="not an ordinary one"):
        place_ordinary(problem, 0, ClusterState.initial(problem))


# --------------------------------------------------------------------------- E32


@pytest.mark.parametrize(
    ("cached", "left", "right", "expected", "upstream"),
    [
        ({0: 1, 1: 2}, 0, 1, -1, -1),  # both cached, different nodes
        ({0: 1, 1: 2}, 1, 0, 1, -1),  # upstream is not antisymmetric here (RFC row 4)
        ({0: 1}, 0, 1, -1, -1),  # only rank 0 cached
        ({1: 2}, 0, 1, 1, 1),  # only rank 1 cached
        ({}, 0, 1, -1, 0),  # neither cached: total order by rank
        ({}, 1, 0, 1, 0),
        ({0: 1, 1: 1}, 0, 1, -1, 0),  # both cached to the same node
        ({0: 1, 1: 1}, 1, 1, 0, 0),
    ],
)
def test_e32_task_order(cached: dict[int, int], left: int, right: int, expected: int,
                        upstream: int) -> None:
    arr = np.full(2, -1)
    for rank, node in cached.items():
        arr[rank] = node
    assert compare_tasks(left, right, arr) == expected
    assert compare_tasks(right, left, arr) == -expected  # antisymmetric
    if left != right:
        assert expected != 0  # total


def test_e32_task_order_of_a_job_puts_cached_ranks_first() -> None:
    problem = make([{"name": f"n{i}"} for i in range(4)],
                   [{"name": "j", "tasks": 5, "npu-per-task": 1, "fault-ranks": [1]}],
                   [("uid-j", 3, "n0"), ("uid-j", 1, "n1"), ("uid-j", 4, "n2")])
    # rank 1 is a fault rank: its entry is not a preference; it goes after the cached ranks
    # and before the uncached ones, so that they cannot force it back (RFC case f8)
    assert task_order(problem.jobs[0]).tolist() == [3, 4, 1, 0, 2]


def test_e32_cache_operations() -> None:
    cache = AffinityCache()
    cache.record("o1", 0, "a", 100)
    cache.record("o1", 0, "b", 100)
    assert cache.get("o1", 0) == "b"
    cache.record("stale", 0, "c", NOW - 100_000)
    cache.record("active", 0, "d", NOW)
    gone = cache.evict_expired(NOW, 24 * 3600)
    assert "stale" in gone and "o1" in gone
    assert cache.get("active", 0) == "d"
    assert len(cache) == 1


# --------------------------------------------------------------------------- placement


def test_bin_packing_and_ranks_sharing_a_node() -> None:
    nodes = [{"name": "a"}, {"name": "b", "free": 3}, {"name": "c", "free": 5}]
    assert placed_names(make(nodes, [{"name": "j", "tasks": 2, "npu-per-task": 2}])) == ["b", "c"]
    assert placed_names(make(nodes, [{"name": "j", "tasks": 3, "npu-per-task": 1}])) == [
        "b", "b", "b"]


def test_ranks_return_to_their_previous_nodes() -> None:
    nodes = [{"name": "a"}, {"name": "b", "free": 3}, {"name": "c", "free": 5}]
    problem = make(nodes, [{"name": "j", "tasks": 2, "npu-per-task": 2}],
                   [("uid-j", 0, "a"), ("uid-j", 1, "c")])
    assert placed_names(problem) == ["a", "c"]
    assert_valid(problem)


def test_uncached_rank_avoids_peer_nodes() -> None:
    nodes = [{"name": "a"}, {"name": "b", "free": 3}, {"name": "c", "free": 5}]
    problem = make(nodes, [{"name": "j", "tasks": 2, "npu-per-task": 1}], [("uid-j", 0, "b")])
    # rank 0 returns to b; rank 1 has no entry: the best "other" node gets the bonus,
    # although plain bin-packing would put it on b too
    assert placed_names(problem) == ["b", "c"]


def test_fault_rank_prefers_an_unused_node() -> None:
    nodes = [{"name": "a"}, {"name": "b"}, {"name": "c"}]
    problem = make(nodes, [{"name": "j", "tasks": 2, "npu-per-task": 8, "fault-ranks": [1]}],
                   [("uid-j", 0, "a"), ("uid-j", 1, "b")])
    assert placed_names(problem) == ["a", "c"]
    # with nowhere else to go, the fault rank may go back to its old node
    tight = make(nodes[:2], [{"name": "j", "tasks": 2, "npu-per-task": 8, "fault-ranks": [1]}],
                 [("uid-j", 0, "a"), ("uid-j", 1, "b")])
    assert placed_names(tight) == ["a", "b"]


def test_fault_rank_is_not_forced_back_when_only_peers_remain() -> None:
    # RFC §3.7 row 3.  Ranks 0 and 2 go back to a and c (4 chips left on each); rank 1
    # (fault) then sees only peers a, c and its own b.  The released code boosts b
    # (max + 100, the -64 cannot overturn it); here b gets no bonus and -64.
    nodes = [{"name": "a"}, {"name": "b"}, {"name": "c"}]
    problem = make(nodes, [{"name": "j", "tasks": 3, "npu-per-task": 4, "fault-ranks": [1]}],
                   [("uid-j", 0, "a"), ("uid-j", 1, "b"), ("uid-j", 2, "c")])
    assert placed_names(problem) == ["a", "a", "c"]
    metrics = evaluate(problem, greedy_plan(problem).as_mapping())
    assert metrics.fault_returns == 0 and metrics.origin_hits == 2


def test_no_rank_lands_on_the_fault_node() -> None:
    # rank 1 failed on b; rank 0 has no entry.  b is the most packed node, but it is a peer
    # (no bonus for rank 0) and a fault node (-64 for every rank of the job): rank 0 takes
    # a (best "other", natural order), and rank 1 then packs onto a as well.
    nodes = [{"name": "a"}, {"name": "b", "free": 4}, {"name": "c"}]
    problem = make(nodes, [{"name": "j", "tasks": 2, "npu-per-task": 4, "fault-ranks": [1]}],
                   [("uid-j", 1, "b")])
    assert placed_names(problem) == ["a", "a"]
    without_fault = make(nodes, [{"name": "j", "tasks": 2, "npu-per-task": 4}],
                         [("uid-j", 1, "b")])
    assert placed_names(without_fault) == ["a", "b"]


def test_subhealthy_node_loses_a_tie_and_unhealthy_is_never_used() -> None:
    nodes = [{"name": "n1", "health": "subhealthy"}, {"name": "n2"},
             {"name": "n0", "free": 1, "health": "unhealthy"}]
    assert placed_names(make(nodes, [{"name": "j", "tasks": 1, "npu-per-task": 1}])) == ["n2"]
    # the origin bonus still beats the sub-healthy penalty (max + 100 - 1)
    problem = make(nodes, [{"name": "j", "tasks": 1, "npu-per-task": 1}], [("uid-j", 0, "n1")])
    assert placed_names(problem) == ["n1"]
    # an unhealthy origin is not a candidate.  The rank then boosts the best "other" node
    # *before* the -1 sub-health penalty (the released order of steps): n1 and n2 tie at
    # 792 and natural order picks n1, which keeps max + 100 - 1.
    problem = make(nodes, [{"name": "j", "tasks": 1, "npu-per-task": 1}], [("uid-j", 0, "n0")])
    assert placed_names(problem) == ["n1"]


def test_ties_follow_natural_node_order() -> None:
    nodes = [{"name": "node-10"}, {"name": "node-9"}, {"name": "node-11"}]
    assert placed_names(make(nodes, [{"name": "j", "tasks": 3, "npu-per-task": 8}])) == [
        "node-9", "node-10", "node-11"]


def test_gang_all_or_nothing_and_state_untouched() -> None:
    nodes = [{"name": "a"}, {"name": "b", "free": 4}]
    problem = make(nodes, [{"name": "j", "tasks": 3, "npu-per-task": 4}])
    state = ClusterState.initial(problem)
    before = state.free.copy()
    outcome = place_ordinary(problem, 0, state)
    assert outcome.nodes is not None
    assert np.array_equal(state.free, before)
    big = make(nodes, [{"name": "j", "tasks": 4, "npu-per-task": 4}])
    outcome = place_ordinary(big, 0, ClusterState.initial(big))
    assert outcome.nodes is None
    assert outcome.reason is not None and "NPUResourceShortage" in outcome.reason
    assert "room for only 3" in outcome.reason


@pytest.mark.parametrize(
    ("policy", "npus", "ask"),
    [("chip1-node8", 8, 1), ("chip1-node16", 16, 3), ("chip4-node4", 4, 2),
     ("chip1-node2", 8, 1), ("chip8-node16", 16, 8), ("module-a3-16", 16, 4),
     ("chip2-node16", 16, 2), ("chip4-node8", 8, 4), ("chip4-node16", 16, 8)],
)
def test_every_ordinary_policy_uses_the_base_handler(policy: str, npus: int, ask: int) -> None:
    nodes = [{"name": "a", "npus": npus, "free": npus},
             {"name": "b", "npus": npus, "free": npus - ask}]
    problem = make(nodes, [{"name": "j", "policy": policy, "tasks": 2, "npu-per-task": ask}],
                   [("uid-j", 1, "a")])
    # rank 1 returns to a; rank 0 is uncached and avoids the peer a: b (most packed)
    assert placed_names(problem) == ["b", "a"]
    assert_valid(problem)


# --------------------------------------------------------------------------- properties


@st.composite
def ordinary_scenarios(draw: st.DrawFn) -> Problem:
    count = draw(st.integers(1, 7))
    nodes = []
    for i in range(count):
        nodes.append({"name": f"node-{i}", "free": draw(st.integers(0, 8)),
                      "health": draw(st.sampled_from(["healthy", "healthy", "subhealthy",
                                                      "unhealthy"]))})
    jobs = []
    cache = []
    for j in range(draw(st.integers(1, 3))):
        tasks = draw(st.integers(1, 6))
        faults = sorted(draw(st.sets(st.integers(0, tasks - 1), max_size=2)))
        jobs.append({"name": f"j{j}", "tasks": tasks,
                     "npu-per-task": draw(st.sampled_from([1, 2, 4, 8])),
                     "priority": draw(st.integers(0, 2)), "fault-ranks": faults})
        for r in range(tasks):
            if draw(st.booleans()):
                cache.append((f"uid-j{j}", r, f"node-{draw(st.integers(0, count - 1))}"))
    return make(nodes, jobs, cache, prefer=draw(st.booleans()))


@settings(max_examples=60, deadline=None)
@given(ordinary_scenarios())
def test_greedy_answers_pass_the_validator(problem: Problem) -> None:
    plan = greedy_plan(problem)
    placement = to_placement(problem, plan, engine="greedy", status=Status.GREEDY)
    assert check(problem, placement) == []
    first = problem.queue[0]
    job = problem.jobs[first]
    healthy = problem.health != 2
    room = int((problem.free[healthy] // job.npu_per_task).sum())
    # the first job of the queue sees the whole cluster: it is placed iff it fits
    assert (plan.nodes[first] is not None) == (room >= job.tasks)


# --------------------------------------------------------------------------- fast path


def per_rank_nodes(problem: Problem, j: int, state: ClusterState) -> list[int] | None:
    """The pipeline recomputed on every node for every rank: the nodes before the repair.

    Reference for :func:`place_ordinary`'s index (:class:`ScoreClasses`); ``None`` when the
    job does not fit.
    """
    job = problem.jobs[j]
    request = job.npu_per_task
    free = state.free.astype(np.int64)
    healthy = problem.health != UNHEALTHY
    if int((free[healthy & (free >= request)] // request).sum()) < job.tasks:
        return None
    fault_nodes = np.zeros(problem.num_nodes, dtype=bool)
    fault_nodes[job.origin[job.fault & (job.origin >= 0)]] = True
    use_bonus = job.prefer_previous and bool((job.origin >= 0).any())
    peer = np.zeros(problem.num_nodes, dtype=bool)
    peer[job.origin[job.origin >= 0]] = True
    nodes = [-1] * job.tasks
    for rank in task_order(job).tolist():
        ok = healthy & (free >= request)
        raw = policy_scores(free, job.node_npus)
        if use_bonus:
            previous_node_bonus(raw, ok, int(job.origin[rank]), peer, bool(job.fault[rank]),
                                problem.natural_pos)
        scores = fault_adjust(raw, problem.health == SUBHEALTHY,
                              fault_nodes if job.fault.any() else None) * SCORE_WEIGHT
        pick = best_node(scores, ok, problem.natural_pos)
        free[pick] -= request
        nodes[rank] = pick
    return nodes


def random_problem(seed: int) -> Problem:
    """A small cluster with shuffled natural order, sub-healthy and fault nodes, nodes with
    more free chips than the policy's node size, dense caches and fault ranks."""
    rng = random.Random(seed)
    count = rng.randint(2, 9)
    names = [f"node-{k}" for k in rng.sample(range(30), count)]
    nodes = []
    for name in names:
        npus = rng.choice([8, 8, 16])
        nodes.append({"name": name, "npus": npus, "free": rng.randint(0, npus),
                      "health": rng.choice(["healthy"] * 3 + ["subhealthy", "unhealthy"])})
    jobs = []
    cache = []
    for j in range(rng.randint(1, 3)):
        tasks = rng.randint(1, 8)
        faults = sorted(rng.sample(range(tasks), rng.randint(0, min(3, tasks))))
        jobs.append({"name": f"j{j}", "policy": "chip1-node8", "tasks": tasks,
                     "npu-per-task": rng.choice([1, 2, 3, 4, 8]), "fault-ranks": faults})
        cache += [(f"uid-j{j}", r, rng.choice(names)) for r in range(tasks)
                  if rng.random() < 0.7]
    return make(nodes, jobs, cache, prefer=rng.random() < 0.85)


def test_fast_path_matches_the_per_rank_computation(monkeypatch: pytest.MonkeyPatch) -> None:
    before_repair: list[np.ndarray] = []

    def recording(job: Any, nodes: np.ndarray, *rest: Any) -> None:
        before_repair.append(nodes.copy())
        keep_faults_away(job, nodes, *rest)

    monkeypatch.setattr(ordinary, "keep_faults_away", recording)
    compared = 0
    for seed in range(300):
        problem = random_problem(seed)
        state = ClusterState.initial(problem)
        for j in problem.queue:  # each job on the state the earlier jobs left (greedy_plan)
            job = problem.jobs[j]
            expected = per_rank_nodes(problem, j, state)
            before_repair.clear()
            outcome = place_ordinary(problem, j, state)
            if expected is None:
                assert outcome.nodes is None, (seed, job.name)
                continue
            assert outcome.nodes is not None, (seed, job.name, outcome.reason)
            if job.fault.any():
                assert [b.tolist() for b in before_repair] == [expected], (seed, job.name)
            else:
                assert outcome.nodes.tolist() == expected, (seed, job.name)
            state.commit(outcome.nodes, job.npu_per_task)
            compared += 1
    assert compared >= 300


def test_score_classes_match_best_node() -> None:
    rng = random.Random(7)
    values = [0.0, 791.0, 792.0, 793.0, 796.0, 800.0]
    for _ in range(200):
        size = rng.randint(1, 12)
        members = np.array(sorted(rng.sample(range(size), rng.randint(0, size))), dtype=np.int64)
        scores = np.array([rng.choice(values) for _ in members], dtype=np.float64)
        index = ScoreClasses(size, members, scores)
        current = np.zeros(size)
        present = np.zeros(size, dtype=bool)
        current[members] = scores
        present[members] = True
        for _ in range(3 * size):
            expected = best_node(current, present, np.arange(size))
            assert index.best() == expected
            n = rng.randrange(size)
            score = None if rng.random() < 0.25 else rng.choice(values)
            index.move(n, score)
            if present[n]:  # non-members and members taken out are ignored
                if score is None:
                    present[n] = False
                else:
                    current[n] = score
        assert index.best() == best_node(current, present, np.arange(size))
