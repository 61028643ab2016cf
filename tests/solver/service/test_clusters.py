"""Stored clusters: routes, the three delta tiers, the cache lifecycle, and deltas giving
exactly the plans of the equivalent full snapshots."""

from __future__ import annotations

import copy
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heuristics.lifecycle import CacheLifecycle
from models.check import check
from models.compiled import Problem, compile_scenario, live_cache
from models.scenario import Scenario
from solver.service.app import ServiceConfig
from solver.service.client import PlanClient, ServiceError
from solver.service.state import ClusterDelta, apply_delta, same_live_owners
from tests.solver.service.conftest import example, generated, running_server
from tests.solver.service.deltas import apply


def _same_problem(a: Problem, b: Problem) -> None:
    assert a.node_names == b.node_names
    for attr in ("npus", "free", "health", "super_pod", "rack", "natural_order", "node_tree"):
        assert np.array_equal(getattr(a, attr), getattr(b, attr)), attr
    assert a.now == b.now and a.queue == b.queue and a.live == b.live
    assert [j.name for j in a.jobs] == [j.name for j in b.jobs]
    for x, y in zip(a.jobs, b.jobs, strict=True):
        assert np.array_equal(x.origin, y.origin) and np.array_equal(x.fault, y.fault)
        assert (x.policy, x.sp_block, x.tp_block, x.levels) == (y.policy, y.sp_block,
                                                                 y.tp_block, y.levels)
    for name, tree in a.trees.items():
        other = b.trees[name]
        assert tree.level_values == other.level_values
        assert all(np.array_equal(p, q) for p, q in zip(tree.level_value, other.level_value,
                                                         strict=True))


def _apply(scenario: Scenario, delta: dict[str, Any]) -> tuple[Problem, str]:
    applied = apply(compile_scenario(scenario), delta)
    return applied.problem, applied.tier


# --------------------------------------------------------------------------- unit level


def test_values_tier_patches_arrays_like_a_fresh_compile() -> None:
    scenario = generated("850", 256, 3)
    names = [n.name for n in scenario.nodes]
    delta = {"node-updates": [{"name": names[3], "free": 0},
                              {"name": names[7], "health": "unhealthy"},
                              {"name": names[9], "free": 4, "health": "subhealthy"}]}
    problem, tier = _apply(scenario, delta)
    assert tier == "values"
    _same_problem(problem, compile_scenario(problem.scenario))
    assert problem.scenario.nodes[3].free == 0
    assert problem.trees is compile_scenario(scenario).trees or True  # reused, not rebuilt


def test_jobs_tier_recompiles_jobs_and_cache_only() -> None:
    scenario = generated("multilevel", 128, 3)
    job = scenario.jobs[0].model_dump(by_alias=True)
    job.update(name="late-arrival", **{"owner-uid": "new-owner"})
    delta = {"now": (scenario.now or 0) + 60, "jobs-removed": [scenario.jobs[1].name],
             "jobs-submitted": [job],
             "cache-events": [{"event": "bind", "owner-uid": "new-owner", "rank": 0,
                               "node": scenario.nodes[5].name}]}
    problem, tier = _apply(scenario, delta)
    assert tier == "jobs"
    _same_problem(problem, compile_scenario(problem.scenario))
    assert problem.live["new-owner"] == {0: scenario.nodes[5].name}


def _newest_times(scenario: Scenario) -> list[int]:
    newest: dict[str, int] = {}
    for entry in scenario.affinity_cache.entries:
        newest[entry.owner_uid] = max(newest.get(entry.owner_uid, entry.updated), entry.updated)
    return sorted(newest.values())


def test_now_alone_is_a_values_change_while_no_owner_expires() -> None:
    scenario = generated("850", 256, 4)
    ttl = scenario.affinity_cache.ttl_seconds
    oldest = _newest_times(scenario)[0]
    assert scenario.now is not None and oldest >= scenario.now - ttl
    names = [n.name for n in scenario.nodes]
    # the daemon's session: now moves on, a node's health changes; no owner expires
    later = oldest + ttl - 1 - ((oldest + ttl - 1 - scenario.now) // 2)
    delta = {"now": later, "node-updates": [{"name": names[4], "health": "unhealthy"}]}
    problem, tier = _apply(scenario, delta)
    assert tier == "values"
    assert problem.now == later and problem.scenario.now == later
    _same_problem(problem, compile_scenario(problem.scenario))
    problem, tier = _apply(scenario, {"now": oldest + ttl})  # the last second it is live
    assert tier == "values"
    _same_problem(problem, compile_scenario(problem.scenario))


def test_now_past_an_owners_expiry_recompiles_the_jobs() -> None:
    scenario = generated("850", 256, 4)
    ttl = scenario.affinity_cache.ttl_seconds
    oldest = _newest_times(scenario)[0]
    problem, tier = _apply(scenario, {"now": oldest + ttl + 1})  # the oldest owner expires
    assert tier == "jobs"
    _same_problem(problem, compile_scenario(problem.scenario))
    assert len(problem.live) == len(compile_scenario(scenario).live) - 1
    # and back: a now before the expiry revives it
    lifecycle = CacheLifecycle.from_model(problem.scenario.affinity_cache)
    back = apply_delta(problem, lifecycle, ClusterDelta.model_validate({"now": oldest + ttl}))
    assert back.tier == "jobs"
    _same_problem(back.problem, compile_scenario(scenario.model_copy(
        update={"now": oldest + ttl})))


def test_a_sequence_of_nows_always_gives_a_fresh_compiles_problem() -> None:
    scenario = generated("multilevel", 128, 3)
    ttl = scenario.affinity_cache.ttl_seconds
    edges = [t + ttl for t in _newest_times(scenario)]
    assert scenario.now is not None
    rng = np.random.default_rng(3)
    nows = [int(x) for x in rng.integers(scenario.now, edges[-1] + 600, 12)]
    nows += [edges[0], edges[0] + 1, edges[0], scenario.now]
    problem = compile_scenario(scenario)
    lifecycle = CacheLifecycle.from_model(scenario.affinity_cache)
    tiers = set()
    for now in nows:
        applied = apply_delta(problem, lifecycle, ClusterDelta.model_validate({"now": now}))
        fresh = compile_scenario(applied.scenario)
        _same_problem(applied.problem, fresh)
        expected = "jobs" if problem.live.keys() != fresh.live.keys() else (
            "none" if now == problem.scenario.now else "values")
        assert applied.tier == expected, now
        tiers.add(applied.tier)
        problem, lifecycle = applied.problem, applied.lifecycle
    assert tiers == {"values", "jobs"}


@settings(max_examples=60, deadline=None)
@given(times=st.lists(st.integers(0, 2_000), min_size=0, max_size=12),
       ttl=st.integers(1, 1_000), start=st.integers(0, 3_000), now=st.integers(0, 3_000))
def test_same_live_owners_agrees_with_the_live_cache(times: list[int], ttl: int, start: int,
                                                    now: int) -> None:
    base = example("superpod-850").to_dict()
    node = base["nodes"][0]["name"]
    base["now"] = start
    base["affinity-cache"] = {"ttl-seconds": ttl, "entries": [
        {"owner-uid": f"o{k // 2}", "rank": k % 2, "node": node, "updated": when}
        for k, when in enumerate(times)]}
    scenario = Scenario.model_validate(base)
    problem = compile_scenario(scenario)
    expected = live_cache(scenario, start).keys() == live_cache(scenario, now).keys()
    assert same_live_owners(problem, now) == expected


def test_structure_tier_recompiles() -> None:
    scenario = generated("950", 128, 2)
    first = scenario.nodes[0]
    added = first.model_dump(by_alias=True) | {"name": "brand-new", "super-pod-id": 9999}
    delta = {"nodes-added": [added],
             "node-updates": [{"name": scenario.nodes[1].name, "labels": {"a": "b"}}]}
    problem, tier = _apply(scenario, delta)
    assert tier == "structure"
    assert problem.node_names[-1] == "brand-new"
    _same_problem(problem, compile_scenario(problem.scenario))


def test_removing_a_cached_node_drops_its_entries() -> None:
    scenario = example("superpod-850")
    cached = scenario.affinity_cache.entries[0].node
    problem, tier = _apply(scenario, {"nodes-removed": [cached]})
    assert tier == "structure" and cached not in problem.node_index
    assert all(e.node != cached for e in problem.scenario.affinity_cache.entries)


def test_cache_lifecycle_bind_evict_discard_delete() -> None:
    scenario = example("superpod-850")
    entry = scenario.affinity_cache.entries[0]
    owner, rank, old = entry.owner_uid, entry.rank, entry.node
    spare = next(n.name for n in scenario.nodes if n.name != old)
    bound, _ = _apply(scenario, {"cache-events": [
        {"event": "bind", "owner-uid": owner, "rank": rank, "node": spare}]})
    assert bound.live[owner][rank] == spare
    kept, _ = _apply(bound.scenario, {"cache-events": [
        {"event": "evict", "owner-uid": owner, "rank": rank}]})
    assert kept.live[owner][rank] == spare  # released pods keep their entry
    undone, _ = _apply(bound.scenario, {"cache-events": [
        {"event": "discard", "owner-uid": owner, "rank": rank}]})
    assert undone.live[owner][rank] == old  # a discarded allocation rolls back
    gone, _ = _apply(scenario, {"cache-events": [{"event": "delete-owner", "owner-uid": owner}]})
    assert owner not in gone.live


@pytest.mark.parametrize(("delta", "field"), [
    ({"node-updates": [{"name": "nope", "free": 1}]}, "node-updates[0].name"),
    ({"node-updates": [{"name": "sp0-node-0", "free": 99}]}, "node-updates[0].free"),
    ({"nodes-removed": ["nope"]}, "nodes-removed[0]"),
    ({"jobs-removed": ["nope"]}, "jobs-removed[0]"),
    ({"nodes-added": [{"name": "sp0-node-0", "npus": 8, "free": 8}]}, "nodes-added[0].name"),
    ({"cache-events": [{"event": "bind", "owner-uid": "o", "rank": 0, "node": "nope"}]},
     "cache-events[0].node"),
    ({"jobs-order": ["nope"]}, "jobs-order[0]"),
    ({"jobs-order": []}, "jobs-order"),
    ({"running-order": ["nope"]}, "running-order[0]"),
    ({"affinity-cache-owners": [{"owner-uid": "o", "entries": [
        {"owner-uid": "o", "rank": 0, "node": "nope"}]}]},
     "affinity-cache-owners[0].entries[0].node"),
    ({"affinity-cache-owners": [{"owner-uid": "o", "entries": [
        {"owner-uid": "o", "rank": 0, "node": "sp0-node-0", "previous": "nope"}]}]},
     "affinity-cache-owners[0].entries[0].previous"),
    ({"affinity-cache-owners": [{"owner-uid": "o", "entries": [
        {"owner-uid": "p", "rank": 0, "node": "sp0-node-0"}]}]},
     "affinity-cache-owners[0].entries[0].owner-uid"),
    ({"affinity-cache-owners": [{"owner-uid": "o", "entries": [
        {"owner-uid": "o", "rank": 1, "node": "sp0-node-0"},
        {"owner-uid": "o", "rank": 1, "node": "sp0-node-1"}]}]},
     "affinity-cache-owners[0].entries[1].rank"),
    ({"affinity-cache-owners": [{"owner-uid": "o"}, {"owner-uid": "o"}]},
     "affinity-cache-owners[1].owner-uid"),
    ({"affinity-cache-owners": [{"owner-uid": "o"}], "affinity-cache": {}},
     "affinity-cache-owners"),
])
def test_bad_deltas_name_the_field(delta: dict[str, Any], field: str) -> None:
    from models.validation import InputError

    with pytest.raises(InputError) as info:
        _apply(example("superpod-850"), delta)
    assert any(f"'{field}'" in m for m in info.value.messages), info.value.messages


def test_a_bad_cache_owner_field_is_refused_naming_it() -> None:
    """An unknown field or an entry without its node, in an ``affinity-cache-owners``
    item: refused by the delta's own model, naming the field."""
    from pydantic import ValidationError

    from solver.service.delta import delta_messages

    for raw, field in (
            ({"owner-uid": "o", "ranks": {}}, "affinity-cache-owners[0].ranks"),
            ({"owner-uid": "o", "entries": [{"owner-uid": "o", "rank": 0}]},
             "affinity-cache-owners[0].entries[0].node"),
            ({"entries": []}, "affinity-cache-owners[0].owner-uid")):
        with pytest.raises(ValidationError) as info:
            ClusterDelta.model_validate({"affinity-cache-owners": [raw]})
        messages = delta_messages(info.value)
        assert any(f"'{field}'" in m for m in messages), messages
    # more entries in all than a section holds (the bound lowered to 3 here)
    from solver.service import delta as delta_module

    too_many = [{"owner-uid": owner, "entries": [
        {"owner-uid": owner, "rank": rank, "node": "n"} for rank in range(2)]}
        for owner in ("a", "b")]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(delta_module, "MAX_CACHE_ENTRIES", 3)
        with pytest.raises(ValidationError) as info:
            ClusterDelta.model_validate({"affinity-cache-owners": too_many})
    assert any("'affinity-cache-owners'" in m and "at most 3" in m
               for m in delta_messages(info.value)), delta_messages(info.value)


def test_cache_owners_recompile_only_their_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """``affinity-cache-owners`` of one job's owner (a rank moved, times of their own)
    and of another's (forgotten): the jobs tier without the full rules, those two jobs
    alone given a new origin (every other compiled job the same object), the section in
    owner order with the entries as given, and the problem a fresh compile's."""
    from models import validation
    from solver.service import state

    scenario = generated("850", 128, 6)
    problem = compile_scenario(scenario)
    job = next(j for j in scenario.jobs if j.owner_uid and j.owner_uid in problem.live)
    owner = job.owner_uid
    assert owner is not None
    mine = [e for e in scenario.affinity_cache.entries if e.owner_uid == owner]
    free = next(n.name for n in scenario.nodes if n.name != mine[0].node)
    moved = [mine[0].model_dump(by_alias=True, exclude_none=True) | {
        "node": free, "updated": mine[0].updated + 3}] + [
        e.model_dump(by_alias=True, exclude_none=True) for e in mine[1:]]
    forgotten = next(j for j in scenario.jobs if j.owner_uid not in (None, owner)
                     and j.owner_uid in problem.live)
    other = forgotten.owner_uid

    def no_full_rules(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the full rules ran")

    monkeypatch.setattr(state, "validate_scenario", no_full_rules)
    monkeypatch.setattr(validation, "validate_scenario", no_full_rules)
    applied = apply(problem, {"affinity-cache-owners": [
        {"owner-uid": owner, "entries": moved}, {"owner-uid": other, "entries": []}]})
    monkeypatch.undo()
    new = applied.problem
    assert applied.tier == "jobs"
    again = {problem.job_index[job.name], problem.job_index[forgotten.name]}
    for j, (before, after) in enumerate(zip(problem.jobs, new.jobs, strict=True)):
        assert (after is before) == (j not in again), after.name
    assert new.live[owner][mine[0].rank] == free and other not in new.live
    entries = new.scenario.affinity_cache.entries
    assert [e.owner_uid for e in entries] == sorted(e.owner_uid for e in entries)
    assert [e for e in entries if e.owner_uid == owner] == [
        type(mine[0]).model_validate(e) for e in moved]
    _same_problem(new, compile_scenario(new.scenario))


def test_an_order_puts_the_jobs_in_place() -> None:
    """``jobs-order`` and ``running-order`` after removals and submissions: the
    sections in that order (a job changed in place without the later ones sent again),
    the problem as a fresh compile's; a name twice is refused."""
    scenario = generated("850", 128, 6)
    jobs = [j.name for j in scenario.jobs]
    changed = scenario.jobs[1].model_dump(by_alias=True, mode="json", exclude_none=True)
    changed["priority"] += 5
    order = [jobs[0], jobs[1], *reversed(jobs[2:])]
    problem, tier = _apply(scenario, {
        "jobs-removed": [jobs[1]], "jobs-submitted": [changed], "jobs-order": order,
        "running-submitted": [{"name": "r-b", "policy": "chip8-node8", "ranks": {}},
                              {"name": "r-a", "policy": "chip8-node8", "ranks": {}}],
        "running-order": ["r-a", "r-b"]})
    assert tier == "jobs"
    assert [j.name for j in problem.scenario.jobs] == order
    assert problem.scenario.jobs[1].priority == scenario.jobs[1].priority + 5
    assert [r.name for r in problem.scenario.running] == ["r-a", "r-b"]
    _same_problem(problem, compile_scenario(problem.scenario))
    assert [j.index for j in problem.jobs] == list(range(len(jobs)))
    from models.validation import InputError

    with pytest.raises(InputError, match="named more than once"):
        _apply(scenario, {"jobs-order": [jobs[0], *jobs]})


# --------------------------------------------------------------------------- routes


def test_cluster_routes(client: PlanClient) -> None:
    scenario = example("superpod-850")
    info = client.put_cluster("c1", scenario)
    assert info["version"] == 1 and info["nodes"] == len(scenario.nodes)
    assert client.put_cluster("c1", scenario)["version"] == 2  # replaced: the count goes on
    assert client.get_cluster("c1")["jobs"] == len(scenario.jobs)
    placement = client.plan_cluster("c1", engine="greedy", time_limit=2)
    assert placement.jobs
    info = client.patch_cluster("c1", {"node-updates": [
        {"name": scenario.nodes[0].name, "free": 0}]})
    assert info["version"] == 3 and info["last-update"] == "values"
    assert client.cluster_scenario("c1").nodes[0].free == 0
    response = client.request("POST", "/v1/clusters/c1/plan", params={"engine": "greedy"})
    assert response.headers["x-cluster-version"] == "3"
    client.delete_cluster("c1")
    with pytest.raises(ServiceError) as info_404:
        client.get_cluster("c1")
    assert info_404.value.status == 404
    with pytest.raises(ServiceError) as bad_name:
        client.put_cluster("bad name!", scenario)
    assert bad_name.value.status == 422 and "'name'" in bad_name.value.messages[0]


def test_bad_deltas_leave_the_cluster_unchanged(client: PlanClient) -> None:
    scenario = example("superpod-850")
    client.put_cluster("c2", scenario)
    with pytest.raises(ServiceError) as info:
        client.patch_cluster("c2", {"node-updates": [{"name": scenario.nodes[0].name,
                                                      "free": 0}],
                                    "jobs-removed": ["nope"]})
    assert info.value.status == 422 and "jobs-removed[0]" in info.value.messages[0]
    with pytest.raises(ServiceError) as info:
        client.patch_cluster("c2", {"node-updates": [{"name": "x", "colour": "red"}]})
    assert info.value.status == 422 and "colour" in info.value.messages[0]
    with pytest.raises(ServiceError) as info:
        client.patch_cluster("c2", {"cache-events": [{"event": "bind", "owner-uid": "o"}]})
    assert info.value.status == 422 and "rank" in info.value.messages[0]
    entry = scenario.affinity_cache.entries[0]
    bad_job = scenario.jobs[0].model_dump(by_alias=True) | {"name": "x", "policy": "nope"}
    with pytest.raises(ServiceError) as info:
        client.patch_cluster("c2", {"cache-events": [
            {"event": "bind", "owner-uid": entry.owner_uid, "rank": entry.rank,
             "node": scenario.nodes[-1].name}], "jobs-submitted": [bad_job]})
    assert info.value.status == 422
    assert any("policy" in m for m in info.value.messages)
    assert client.cluster_scenario("c2").affinity_cache == scenario.affinity_cache
    with pytest.raises(ServiceError) as conflict:
        client.patch_cluster("c2", {"expect-version": 7})
    assert conflict.value.status == 409
    assert client.get_cluster("c2")["version"] == 1
    assert client.cluster_scenario("c2").nodes[0].free == scenario.nodes[0].free
    client.delete_cluster("c2")


def test_versions_never_go_backwards_for_a_name(client: PlanClient) -> None:
    """A replaced or re-created cluster continues its name's count, so a delta that
    expects a version of the old cluster is refused (409), never applied to the new one."""
    scenario = example("superpod-850")
    node = scenario.nodes[0].name
    assert client.put_cluster("v", scenario)["version"] == 1
    assert client.patch_cluster("v", {"node-updates": [{"name": node, "free": 0}]}
                                )["version"] == 2
    assert client.put_cluster("v", scenario)["version"] == 3  # replaced
    with pytest.raises(ServiceError) as stale:  # meant for the replaced cluster's version 2
        client.patch_cluster("v", {"expect-version": 2,
                                   "node-updates": [{"name": node, "free": 0}]})
    assert stale.value.status == 409
    client.delete_cluster("v")
    assert client.put_cluster("v", scenario)["version"] == 4  # re-created after a delete
    assert client.patch_cluster("v", {"expect-version": 4, "node-updates": [
        {"name": node, "free": 0}]})["version"] == 5
    client.delete_cluster("v")


def _snapshot_after(data: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    """The delta applied by hand to a scenario's dict (nodes and jobs only)."""
    out = copy.deepcopy(data)
    if "now" in delta:
        out["now"] = delta["now"]
    removed = set(delta.get("nodes-removed", []))
    out["nodes"] = [n for n in out["nodes"] if n["name"] not in removed]
    out["nodes"] += copy.deepcopy(delta.get("nodes-added", []))
    by_name = {n["name"]: n for n in out["nodes"]}
    for update in delta.get("node-updates", []):
        by_name[update["name"]].update({k: v for k, v in update.items() if k != "name"})
    gone = set(delta.get("jobs-removed", []))
    out["jobs"] = [j for j in out["jobs"] if j["name"] not in gone]
    out["jobs"] += copy.deepcopy(delta.get("jobs-submitted", []))
    return out


@pytest.mark.parametrize(("family", "nodes", "jobs"), [
    ("850", 256, 4), ("multilevel", 128, 3), ("950", 128, 3), ("ordinary", 64, 4)])
def test_deltas_plan_like_full_snapshots(client: PlanClient, family: str, nodes: int,
                                         jobs: int) -> None:
    scenario = generated(family, nodes, jobs)
    data = scenario.to_dict()
    name = f"eq-{family}"
    client.put_cluster(name, scenario)
    rng = np.random.default_rng(7)
    names = [n["name"] for n in data["nodes"]]
    cached = {e["node"] for e in data.get("affinity-cache", {}).get("entries", [])}
    spare = [n for n in names if n not in cached]
    extra = {k: v for k, v in data["nodes"][0].items() if k != "super-pod-id"}
    extra["name"] = "added-node-1"  # in no super pod: the super pods are full
    sessions: list[dict[str, Any]] = [
        {"node-updates": [{"name": n, "free": 0} for n in rng.choice(names, 5, replace=False)]},
        {"now": (data.get("now") or 0) + 30,
         "node-updates": [{"name": str(rng.choice(names)), "health": "unhealthy"}],
         "jobs-removed": [data["jobs"][-1]["name"]]},
        {"nodes-removed": [spare[0]], "nodes-added": [extra],
         "jobs-submitted": [dict(data["jobs"][-1], name="resubmitted")]},
        {"node-updates": [{"name": spare[1], "free": data["nodes"][0]["npus"]}]},
    ]
    expected = data
    for version, delta in enumerate(sessions, start=2):
        info = client.patch_cluster(name, delta)
        assert info["version"] == version
        expected = _snapshot_after(expected, delta)
        stored = client.cluster_scenario(name).to_dict()
        assert stored["nodes"] == Scenario.model_validate(expected).to_dict()["nodes"]
        for engine, limit in (("greedy", 5.0), ("auto", 10.0)):
            kwargs: dict[str, Any] = {"engine": engine, "time_limit": limit, "seed": 0}
            if engine == "auto":
                kwargs["deterministic_time"] = 0.5
            via_delta = client.plan_cluster(name, **kwargs)
            via_full = client.plan(expected, **kwargs)
            if any("previous session's answer" in n for n in via_delta.notes):
                # a stored cluster continues from its last answer (solver/reuse.py): a
                # different plan is allowed, a worse one is not
                assert via_delta.objective is not None and via_full.objective is not None
                assert via_delta.objective >= via_full.objective, (version, engine)
                assert check(compile_scenario(Scenario.model_validate(expected)),
                             via_delta) == []
                continue
            assert [(j.name, j.placed, j.ranks) for j in via_delta.jobs] == \
                   [(j.name, j.placed, j.ranks) for j in via_full.jobs], (version, engine)
            assert via_delta.objective == via_full.objective
    client.delete_cluster(name)


def test_a_cluster_survives_its_worker_being_killed() -> None:
    scenario = example("superpod-850")
    config = ServiceConfig(warmup=False, kill_grace=0.2,
                           solve="tests.solver.service.faults:slow_full")
    with running_server(config) as (url, service), PlanClient(url) as c:
        c.put_cluster("k", scenario)
        c.patch_cluster("k", {"node-updates": [{"name": scenario.nodes[0].name, "free": 0}]})
        before = c.cluster_scenario("k")
        placement = c.plan_cluster("k", engine="auto", time_limit=0.4)  # overruns: killed
        assert placement.engine == "greedy"
        deadline = time.monotonic() + 20
        while service.pool.killed == 0 or service.pool.in_flight:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert c.cluster_scenario("k") == before  # replayed into the new worker
        assert c.get_cluster("k")["version"] == 2
        again = c.plan_cluster("k", engine="greedy", time_limit=5)
        assert [j.ranks for j in again.jobs] == [j.ranks for j in placement.jobs]


def test_recycled_workers_keep_their_clusters() -> None:
    scenario = example("superpod-850")
    with running_server(ServiceConfig(warmup=False, recycle_after=2)) as (url, service), \
            PlanClient(url) as c:
        old_processes = [w.process for w in service.pool.workers]
        c.put_cluster("r", scenario)  # request 1
        c.patch_cluster("r", {"node-updates": [{"name": scenario.nodes[0].name,
                                                "free": 0}]})  # 2: recycled after it
        first = c.plan_cluster("r", engine="greedy", time_limit=10)  # replayed, then planned
        assert service.pool.recycled >= 1 and service.pool.restarts == 0
        # the retired process really ends (a worker left alive would leak, and hang exit)
        deadline = time.monotonic() + 10
        while any(p.is_alive() for p in old_processes) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sum(p.is_alive() for p in old_processes) == len(old_processes) - 1
        assert c.cluster_scenario("r").nodes[0].free == 0
        again = c.plan_cluster("r", engine="greedy", time_limit=10)
        assert [j.ranks for j in again.jobs] == [j.ranks for j in first.jobs]
