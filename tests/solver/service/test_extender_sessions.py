"""Volcano sessions against the extender (benchmarks/volcano_session.py re-creates Volcano's
allocate action and the Ascend plugin's selections, fault-job path included): over several
sessions with evictions and node faults, on generated clusters of every family (ordinary,
A3, 850, 950, multilevel, dynamic vNPU), Volcano's bindings equal npu-place's plan for the
jobs the extender steers, the ``super-pod-rank`` agrees, evicted ranks return to their
origin nodes, and a job left to the plugin is named with the reason."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.generators import GenParams, generate_case
from benchmarks.volcano_session import (
    AscendStandIn,
    SessionReport,
    VolcanoCluster,
    cluster_from_scenario,
    run_session,
    vnpu_cluster,
)
from models.scenario import Family, Job
from solver.service.app import ServiceConfig
from solver.service.extender import ExtenderConfig, ExtenderCore
from tests.solver.service.conftest import running_server

#: deterministic CP-SAT (1 worker, fixed seed): the same plan under any load
EXTENDER = dict(engine="auto", deterministic_time=0.3, http_timeout=30.0, seed=1)


@contextmanager
def extender_server(cluster: VolcanoCluster, folder: Path, **settings: Any
                    ) -> Iterator[tuple[str, ExtenderCore]]:
    """A service with the extender on loopback; the device state from a dump of ``cluster``."""
    cluster.write_device_dump(folder)
    config = ExtenderConfig(configmaps=(str(folder),), **{**EXTENDER, **settings})
    with running_server(ServiceConfig(warmup=False, extender=config)) as (url, service):
        core = service.extender
        assert core is not None
        core.clock = lambda: cluster.now
        yield f"{url}/volcano", core


def check_steered(core: ExtenderCore, report: SessionReport, plugin: AscendStandIn,
                  cluster: VolcanoCluster, specs: dict[str, Job] | None = None) -> list[str]:
    """Steered jobs bound as planned: rank by rank when pinned; inside the planned node set
    when the plugin orders the ranks (``confine``).  The ``super-pod-rank`` the plugin
    writes (A3, 850) names the logical super pod the plan gives the rank (``rank //
    sp-block nodes``) in a session where it selected the job afresh, and is empty where it
    kept its cached selection.  Returns the steered jobs."""
    session = core.session
    assert session is not None and session.error is None, session and session.error
    scenario = cluster.scenario()
    jobs = {**(specs or {}), **{j.name: j for j in scenario.jobs}}
    super_pod = {n.name: n.super_pod_id for n in scenario.nodes}
    steered = [job for job, yes in session.decided.items() if yes]
    for job in steered:
        plan = session.jobs[job]
        bound = report.bindings.get(job)
        assert bound is not None, f"steered job {job} was not bound"
        if plan.replicas:  # vNPU replicas: each task takes a planned node, whatever its rank
            assert sorted(bound.values()) == sorted(plan.ranks.values()), job
            assert job not in report.super_pod_ranks
            continue
        assert sorted(bound) == sorted(plan.ranks) and set(bound.values()) == plan.nodes, job
        # every rank the plugin's code pins is bound on the plan's node (the loose ones,
        # which it orders by Go map order, inside the planned set)
        assert {r: n for r, n in bound.items() if r not in plan.loose} == {
            r: n for r, n in plan.ranks.items() if r not in plan.loose}, job
        if plan.family is not Family.SUPERPOD:
            assert job not in report.super_pod_ranks  # 950 and multilevel write none
            continue
        spec = jobs[job]
        annotation = report.super_pod_ranks[job]
        if job in plugin.fresh:
            size = max(1, (spec.sp_block or spec.npu_per_task * spec.tasks)
                       // spec.npu_per_task)
            blocks: dict[str, set[int | None]] = {}
            for rank, node in bound.items():
                assert annotation[rank] == str(rank // size), (job, rank, annotation)
                blocks.setdefault(annotation[rank], set()).add(super_pod[node])
            assert all(len(ids) == 1 for ids in blocks.values()), blocks  # one physical pod
        else:
            assert set(annotation.values()) == {""}, annotation  # cached selection kept
    return steered


def returns(origins: dict[str, dict[int, str]], report: SessionReport, jobs: list[str],
            lost: str | None = None) -> tuple[int, int]:
    """Ranks of ``jobs`` bound on their origin node, and ranks that were not (origins on
    ``lost`` do not count: the node is gone)."""
    back = missed = 0
    for job in jobs:
        for rank, node in origins.get(job, {}).items():
            if node == lost:
                assert report.bindings[job][rank] != lost
            elif report.bindings[job][rank] == node:
                back += 1
            else:
                missed += 1
    return back, missed


#: generator seeds whose jobs are small (7 tasks) and still span two logical super pods
#: (A3) or racks (950): every HTTP call of a session is one of Volcano's, so the tasks set
#: the test's time
SEEDS = {"a3": 1, "950": 5}


@pytest.mark.parametrize("family", ["ordinary", "a3", "850", "950", "multilevel"])
def test_sessions_bind_the_plan_and_origins_return(family: str, tmp_path: Path) -> None:
    """With the job-level predicate every family is steered: all pending (the plugin
    selects inside the planned set), every job evicted (its cached selection is the plan),
    a node fault and its job evicted (the plugin's fault-job path inside the planned set;
    the 950 handler's, which selects a job-level fault job afresh, is left to the plugin
    and named with the reason), a pod-level reschedule."""
    case = generate_case(GenParams(family, nodes=24, seed=SEEDS.get(family, 3), jobs=3,
                                   occupancy=0.3, unhealthy=0.0, subhealthy=0.0))
    cluster = cluster_from_scenario(case.scenario, family)
    plugin = AscendStandIn(seed=7)
    selecting = family != "ordinary"
    specs = {j.name: j for j in cluster.scenario().jobs}
    with extender_server(cluster, tmp_path, predicate_verb=True) as (url, core), \
            httpx.Client(timeout=60) as client:
        first = run_session(client, url, cluster, plugin, seed=1)
        assert first.open_status == 200
        steered = check_steered(core, first, plugin, cluster, specs)
        session = core.session
        assert session is not None
        assert sorted(steered) == sorted(session.jobs) and first.bindings
        if selecting:  # fresh jobs: the plugin orders the ranks inside the planned set
            assert all(session.jobs[j].mode == "confine" for j in steered)
        # session 2: every job evicted (preemption): the plan brings every rank back, and
        # the plugin's cached selection equals it (pinned, not only confined)
        origins = cluster.bound()
        for job in origins:
            cluster.evict(job)
        cluster.now += 120
        second = run_session(client, url, cluster, plugin, seed=2)
        steered = check_steered(core, second, plugin, cluster, specs)
        session = core.session
        assert session is not None
        assert sorted(steered) == sorted(origins), "an evicted job was not steered"
        assert all(session.jobs[j].mode == "pin" for j in steered)
        assert returns(origins, second, steered) == (sum(map(len, origins.values())), 0)
        # session 3: a node of the largest job fails, that job is evicted
        origins = cluster.bound()
        job = max(sorted(origins), key=lambda j: len(origins[j]))
        lost = origins[job][0]
        cluster.fault(lost)
        cluster.evict(job)
        cluster.now += 120
        third = run_session(client, url, cluster, plugin, seed=3)
        steered = check_steered(core, third, plugin, cluster, specs)
        session = core.session
        assert session is not None
        plan = session.jobs[job]
        if family != "950":
            # ordinary: rank by rank; A3/850: the plugin's fault-job path (selectNodesForFaultJob
            # keeps the healthy logical super pods and ranks, the replacement is the one planned
            # node left in the physical super pod); multilevel: its selection from history
            # (sortNodesByCachedRank) puts the plan's replacement in the one free rank
            assert steered == [job], plan.reason
            back, missed = returns(origins, third, steered, lost)
            assert missed == 0 and back == sum(1 for n in origins[job].values() if n != lost)
            assert selecting == (job in plugin.fault_jobs)  # the stand-in's fault path ran
        else:  # the 950 handler reselects a job-level fault job afresh: left, with the reason
            assert steered == [] and "selectNodesForFaultJob" in plan.reason
            assert core.history[-1]["left-to-plugin"] == {job: plan.reason}
            assert job in third.bindings  # stock behaviour: the plugin places it
        # session 4: one pod of another running job is deleted (pod-level reschedule)
        other = sorted(j for j in cluster.bound() if j != job)[0]
        rank = max(cluster.bound()[other])
        node = cluster.bound()[other][rank]
        assert cluster.evict(other, ranks=[rank]) == 1
        cluster.now += 120
        fourth = run_session(client, url, cluster, plugin, seed=4)
        assert check_steered(core, fourth, plugin, cluster, specs) == [other]
        assert fourth.bindings[other] == {rank: node}
        assert [h["session"] for h in core.history] == [1, 2, 3, 4]


def test_without_the_predicate_verb_a_selecting_job_differing_from_greedy_is_left(
        tmp_path: Path) -> None:
    """Without ``predicateVerb`` the plugin selects from every candidate: a super-pod job
    is steered only when its plan equals the plugin's own (greedy's) selection."""
    case = generate_case(GenParams("850", nodes=24, seed=3, jobs=3, occupancy=0.3,
                                   unhealthy=0.0, subhealthy=0.0))
    cluster = cluster_from_scenario(case.scenario, "850")
    with extender_server(cluster, tmp_path) as (url, core), httpx.Client(timeout=60) as client:
        run_session(client, url, cluster, AscendStandIn(), seed=1, predicate=False)
        session = core.session
        assert session is not None and session.jobs
        for plan in session.jobs.values():
            assert plan.mode == "pin" and not plan.adopted
            assert plan.steer or plan.reason in (
                "the plan differs from the Ascend plugin's own selection",
                "an earlier steered job leaves other free nodes than the Ascend plugin's "
                "selection assumes")
        assert session.counts.get("prioritize-left-to-plugin", 0) == 0


def test_a_gang_that_does_not_fit_is_discarded_and_rolled_back(tmp_path: Path) -> None:
    case = generate_case(GenParams("ordinary", nodes=8, seed=2, jobs=1, occupancy=0.0,
                                   unhealthy=0.0, subhealthy=0.0))
    cluster = cluster_from_scenario(case.scenario, "ordinary")
    # a job of more whole-node tasks than there are nodes: the plan leaves it out (the
    # extender abstains), Volcano allocates task after task, then discards the gang
    cluster.add_job("train", "too-big", len(cluster.nodes) + 2, 8, policy="chip8-node8",
                    priority_class="training", priority=1000)
    plugin = AscendStandIn()
    with extender_server(cluster, tmp_path) as (url, core), httpx.Client(timeout=60) as client:
        report = run_session(client, url, cluster, plugin, seed=1)
        session = core.session
        assert session is not None
        job = next(j for j in report.discarded if "too-big" in j)
        assert job not in session.jobs and not session.decided.get(job, False)
        owner = session.owners[job]
        allocated = report.calls["deallocateFunc"]
        assert allocated > 0 and session.counts["discarded"] == allocated
        # every record of the discarded gang was rolled back
        assert all(core.lifecycle.state(owner, rank) is None for rank in range(allocated))
        assert job not in cluster.bound()


def test_early_stopped_predicates_lose_the_planned_node_unless_filtered(
        tmp_path: Path) -> None:
    """Volcano stops the predicate phase once enough nodes fit (``percentageNodesToFind``
    below 100); the job-level predicate's refusals do not count as fitting nodes, so with
    it every planned node is still found; without it a task whose planned node was not
    among the first nodes found is left to the other plugins."""
    case = generate_case(GenParams("ordinary", nodes=24, seed=3, jobs=3, occupancy=0.3,
                                   unhealthy=0.0, subhealthy=0.0))
    early = dict(percentage_nodes_to_find=10, min_nodes_to_find=3)
    for predicate in (True, False):
        cluster = cluster_from_scenario(case.scenario, "ordinary")
        folder = tmp_path / str(predicate)
        with extender_server(cluster, folder) as (url, core), \
                httpx.Client(timeout=60) as client:
            report = run_session(client, url, cluster, AscendStandIn(), seed=1,
                                 predicate=predicate, **early)  # type: ignore[arg-type]
            session = core.session
            assert session is not None
            if predicate:
                assert check_steered(core, report, AscendStandIn(), cluster)
                assert "planned-node-not-offered" not in session.counts
                continue
            steered = [job for job, yes in session.decided.items() if yes]
            off_plan = sum(1 for job in steered for rank, node in report.bindings.get(
                job, {}).items() if session.jobs[job].ranks[rank] != node)
            missing = session.counts.get("planned-node-not-offered", 0)
            assert missing > 0  # the early stop did hide planned nodes
            assert off_plan <= missing  # only a task without its planned node went astray


def test_the_plugins_rank_order_is_adopted_when_it_keeps_every_origin(tmp_path: Path) -> None:
    """The multilevel handler orders a selection made from history by node name in Go's
    byte order (``sortNodesByCachedRank``), which differs from npu-place's natural order
    for ``…-n9`` / ``…-n10``: both nodes of a level-1 group fail, the job is evicted, and
    the plan's two replacement nodes go to the two free ranks the other way round.  No
    origin hit is lost (the failed ranks have none), so the extender adopts the plugin's
    mapping: Volcano binds it, the healthy group returns to its origins."""
    case = generate_case(GenParams("multilevel", nodes=24, seed=3, jobs=3, occupancy=0.3,
                                   unhealthy=0.0, subhealthy=0.0))
    nodes = []
    for node in case.scenario.nodes:  # r0-n7 … r2-n14: names of one and two digits
        rack, index = node.name.split("-n")
        nodes.append(node.model_copy(update={"name": f"{rack}-n{int(index) + 7}"}))
    cluster = cluster_from_scenario(case.scenario.model_copy(update={"nodes": nodes}),
                                    "multilevel")
    plugin = AscendStandIn(seed=7)
    with extender_server(cluster, tmp_path, predicate_verb=True) as (url, core), \
            httpx.Client(timeout=60) as client:
        check_steered(core, run_session(client, url, cluster, plugin, seed=1), plugin, cluster)
        origins = cluster.bound()
        job = max(sorted(origins), key=lambda j: len(origins[j]))
        for rank in (0, 1):  # the level-1 group of ranks 0 and 1 (level1=2)
            cluster.fault(origins[job][rank])
        cluster.evict(job)
        cluster.now += 120
        report = run_session(client, url, cluster, plugin, seed=2)
        assert check_steered(core, report, plugin, cluster) == [job]
        plan = core.session.jobs[job] if core.session else None
        assert plan is not None and plan.adopted and not plan.loose
        assert report.bindings[job] == plan.ranks
        assert [report.bindings[job][r] for r in (0, 1)] == sorted(
            report.bindings[job][r] for r in (0, 1))  # byte order: n10 before n9
        assert all(report.bindings[job][r] == origins[job][r] for r in (2, 3))
        assert job in core.history[-1]["plugin-orders-ranks"]


def test_vnpu_sessions_bind_the_planned_nodes_and_replicas_return(tmp_path: Path) -> None:
    """Dynamic-vNPU services (replicas of 1-4 AI cores on Atlas 300I Duo nodes) over the same
    four sessions: every replica bound on a node the plan gives the job (the plugin cuts the
    slice), evicted replicas back on their nodes, a faulted node's service moved whole, a
    deleted replica back on its node; none left to the plugin."""
    cluster = vnpu_cluster(seed=3)
    plugin = AscendStandIn(seed=7)
    with extender_server(cluster, tmp_path, predicate_verb=True) as (url, core), \
            httpx.Client(timeout=60) as client:
        first = run_session(client, url, cluster, plugin, seed=1)
        steered = check_steered(core, first, plugin, cluster)
        session = core.session
        assert session is not None and session.jobs
        assert sorted(steered) == sorted(session.jobs) == sorted(first.bindings)
        assert all(plan.replicas for plan in session.jobs.values())
        # every service evicted: each replica back on a node of the service's last ones
        origins = cluster.bound()
        for job in origins:
            cluster.evict(job)
        cluster.now += 120
        second = run_session(client, url, cluster, plugin, seed=2)
        assert sorted(check_steered(core, second, plugin, cluster)) == sorted(origins)
        for job, nodes in origins.items():
            assert sorted(second.bindings[job].values()) == sorted(nodes.values()), job
        # a node fails, its service is evicted: planned elsewhere, steered, none on the node
        origins = cluster.bound()
        job = sorted(origins)[0]
        lost = origins[job][0]
        cluster.fault(lost)
        cluster.evict(job)
        cluster.now += 120
        third = run_session(client, url, cluster, plugin, seed=3)
        assert check_steered(core, third, plugin, cluster) == [job]
        assert lost not in third.bindings[job].values()
        assert len(third.bindings[job]) == len(origins[job])
        assert core.history[-1]["left-to-plugin"] == {}
        # one replica of another service deleted: back on its node
        other = sorted(j for j in cluster.bound() if j != job)[0]
        rank = max(cluster.bound()[other])
        node = cluster.bound()[other][rank]
        assert cluster.evict(other, ranks=[rank]) == 1
        cluster.now += 120
        fourth = run_session(client, url, cluster, plugin, seed=4)
        assert check_steered(core, fourth, plugin, cluster) == [other]
        assert fourth.bindings[other] == {rank: node}
