"""Tests of the seeded scenario generators (small clusters, so they stay fast)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from benchmarks.generators import (
    A3_POD_NODES,
    FAMILIES,
    ML_LABELS,
    GenParams,
    case_name,
    generate,
    generate_case,
    heavy_tail_npus,
    log_uniform_nodes,
)
from models.compiled import UNHEALTHY, compile_scenario, natural_key
from models.io import load_scenario, save_scenario
from models.objective import achievable_hits
from models.scenario import Family
from solver.cli import main

SMALL = [(family, nodes, jobs) for family in FAMILIES for nodes in (64, 200)
         for jobs in (1, 5)]

#: Every event switched off: the cache is exactly the earlier placement on a free cluster.
QUIET = dict(occupancy=0.0, subhealthy=0.0, unhealthy=0.0, evict_fraction=0.0,
             taken_fraction=0.0, scale_change=0.0, fault_prob=0.0, expired=0.0)


@pytest.mark.parametrize(("family", "nodes", "jobs"), SMALL)
def test_every_generated_scenario_passes_input_validation(family: str, nodes: int,
                                                          jobs: int) -> None:
    case = generate_case(GenParams(family, nodes=nodes, seed=3, jobs=jobs))
    problem = compile_scenario(case.scenario)  # raises InputError on any broken rule
    assert len(problem.jobs) == jobs
    assert case.num_nodes >= nodes
    assert case.returning_jobs >= 1
    names = list(problem.node_names)
    assert names == sorted(names, key=natural_key)


@pytest.mark.parametrize("depth", [2, 3, 4])
@pytest.mark.parametrize("seed", [0, 1])
def test_multilevel_trees_of_every_depth_are_valid(depth: int, seed: int) -> None:
    scenario = generate(GenParams("multilevel", nodes=96, seed=seed, jobs=4, depth=depth))
    problem = compile_scenario(scenario)
    tree = problem.trees["default"]
    assert tree.labels == ML_LABELS[:depth]
    assert tree.reserved_nodes == 1
    assert tree.member.all()
    for job in problem.jobs:
        assert len(job.levels) <= depth


@pytest.mark.parametrize("family", FAMILIES)
def test_generators_are_deterministic_per_seed(family: str) -> None:
    params = GenParams(family, nodes=128, seed=7, jobs=4)
    first = generate(params).to_dict()
    again = generate(params).to_dict()
    assert first == again
    other = generate(GenParams(family, nodes=128, seed=8, jobs=4)).to_dict()
    assert other != first


def test_family_shapes() -> None:
    a3 = compile_scenario(generate(GenParams("a3", nodes=200, seed=1)))
    assert a3.super_pod_size == A3_POD_NODES and a3.reserve_nodes == 2
    assert set(a3.npus.tolist()) == {16}
    assert set(Counter(a3.super_pod.tolist()).values()) == {A3_POD_NODES}
    assert {j.policy.value for j in a3.jobs} == {"chip2-node16-sp"}

    p850 = compile_scenario(generate(GenParams("850", nodes=256, seed=1)))
    assert set(p850.npus.tolist()) == {8} and p850.reserve_nodes == 2
    assert {j.policy.value for j in p850.jobs} == {"chip8-node8-sp"}

    p950 = compile_scenario(generate(GenParams("950", nodes=2048, seed=1, jobs=6)))
    assert 1 <= p950.super_pod_size_configured <= 1024
    assert set(Counter(p950.rack.tolist()).values()) == {8}
    for rack in np.unique(p950.rack):
        assert len(set(p950.super_pod[p950.rack == rack].tolist())) == 1
    assert max(Counter(p950.super_pod.tolist()).values()) <= 1024

    ordinary = compile_scenario(generate(GenParams("ordinary", nodes=64, seed=1, jobs=6)))
    assert all(j.family is Family.ORDINARY for j in ordinary.jobs)
    assert (ordinary.super_pod == -1).all()


def test_health_mix_defaults_to_three_and_one_percent() -> None:
    params = GenParams("850", nodes=1024, seed=2, fault_prob=0.0)
    problem = compile_scenario(generate(params))
    health = Counter(problem.health.tolist())
    assert health[UNHEALTHY] == round(0.01 * problem.num_nodes)
    assert health[1] == round(0.03 * problem.num_nodes)


def test_occupancy_by_other_tenants() -> None:
    params = GenParams("850", nodes=512, seed=4, occupancy=0.5)
    problem = compile_scenario(generate(params))
    busy = int((problem.free < problem.npus).sum())
    # the evicted job's nodes are free again; tenants hold about half of the cluster
    assert 0.4 * problem.num_nodes <= busy <= 0.6 * problem.num_nodes


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("history", ["layout", "auto"])
def test_cache_replays_a_real_earlier_placement(family: str, history: str) -> None:
    """With every event off, every cached node can host its rank again."""
    params = GenParams(family, nodes=128, seed=5, history=history, **QUIET)
    case = generate_case(params)
    problem = compile_scenario(case.scenario)
    (job,) = problem.jobs
    assert (job.origin >= 0).all()
    assert achievable_hits(problem, job) == job.tasks
    if job.whole_node:
        assert len(set(job.origin.tolist())) == job.tasks  # one rank per node
    if history == "layout":
        assert case.history_engine == "layout"


def test_eviction_takes_a_run_of_origin_nodes() -> None:
    params = GenParams("850", nodes=512, seed=6, **{**QUIET, "evict_fraction": 0.5})
    problem = compile_scenario(generate(params))
    (job,) = problem.jobs
    taken = [r for r in range(job.tasks) if problem.free[job.origin[r]] == 0]
    assert len(taken) == round(0.5 * job.tasks)
    assert taken == list(range(taken[0], taken[0] + len(taken)))  # consecutive ranks
    assert achievable_hits(problem, job) == job.tasks - len(taken)


def test_faults_scale_changes_and_expiry() -> None:
    faulty = compile_scenario(generate(GenParams("950", nodes=256, seed=9, jobs=6,
                                                 **{**QUIET, "fault_prob": 1.0})))
    returning = [j for j in faulty.jobs if (j.origin >= 0).any()]
    assert returning
    for job in returning:
        assert job.fault.any()
        assert all(job.origin[r] >= 0 for r in np.flatnonzero(job.fault))

    rescaled = generate_case(GenParams("ordinary", nodes=256, seed=2, jobs=6,
                                       **{**QUIET, "scale_change": 1.0}))
    cached = Counter(e.owner_uid for e in rescaled.scenario.affinity_cache.entries)
    changed = [j for j in rescaled.scenario.jobs if j.owner_uid in cached
               and j.tasks != cached[j.owner_uid]]
    assert changed

    stale = compile_scenario(generate(GenParams("850", nodes=128, seed=1,
                                                **{**QUIET, "expired": 1.0})))
    assert stale.scenario.affinity_cache.entries
    assert not stale.live  # every entry is older than the TTL


def test_batches_carry_priorities_and_fresh_jobs() -> None:
    problem = compile_scenario(generate(GenParams("ordinary", nodes=256, seed=1, jobs=12)))
    assert len({j.priority for j in problem.jobs}) > 1
    assert any((j.origin < 0).all() for j in problem.jobs)
    assert any((j.origin >= 0).any() for j in problem.jobs)


def test_size_distributions() -> None:
    rng = np.random.default_rng(0)
    sizes = [heavy_tail_npus(rng, 4096) for _ in range(4000)]
    assert all(s & (s - 1) == 0 and 1 <= s <= 4096 for s in sizes)
    assert 0.7 < sum(1 for s in sizes if s <= 4) / len(sizes) < 0.85  # about 4 in 5 small
    assert max(sizes) >= 256  # yet heavy-tailed
    nodes = [log_uniform_nodes(rng, 2, 1024) for _ in range(2000)]
    assert min(nodes) == 2 and max(nodes) == 1024


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown family"):
        GenParams("tpu")
    with pytest.raises(ValueError, match="occupancy"):
        GenParams("850", occupancy=1.5)
    with pytest.raises(ValueError, match="depth"):
        GenParams("multilevel", depth=7)


def test_saved_scenario_replays_with_plan(tmp_path: Path) -> None:
    params = GenParams("a3", nodes=96, seed=2, jobs=3)
    scenario = generate(params)
    path = tmp_path / f"{case_name(params)}.json"
    save_scenario(scenario, path)
    assert load_scenario(path).to_dict() == scenario.to_dict()
    out = tmp_path / "answer.json"
    code = main(["plan", str(path), "--engine", "greedy", "--format", "json",
                 "--output", str(out)])
    assert code == 0
    assert out.read_text(encoding="utf-8").strip().startswith("{")
