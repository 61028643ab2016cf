"""Cache events and ``now`` moves applied incrementally (only the changed owners' entries
and live maps: :mod:`solver.service.cache_view`) give exactly what the full rebuild gives:
the same scenario, compiled problem, live cache (in the same order), cache states and
refusals, and a problem equal to a fresh compile of the resulting scenario."""

from __future__ import annotations

import random
from contextlib import ExitStack
from typing import Any
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from heuristics.lifecycle import CacheLifecycle
from models.compiled import Problem, compile_scenario
from models.scenario import AffinityCacheModel, CacheEntry, Scenario
from models.validation import InputError, running_chips
from solver.service import running_view, state
from solver.service.cache_view import build_view
from solver.service.state import Cluster, ClusterDelta, recompile_jobs
from tests.solver.service.conftest import generated

#: How many applied deltas had their running chips moved (not counted again) and checked.
MOVED_CHIPS_CHECKED = [0]
#: Cache events of the i-th delta are stamped ``STAMP + i``.
STAMP = 1_800_000_000
_EVENTS = ("bind", "bind", "bind", "evict", "discard", "delete-owner", "refresh")


def _full_recompile(problem: Problem, out: Problem, new: Scenario, view: Any,
                    touched: Any, edit: Any) -> Problem:
    """The jobs tier as before: the rules and every job again, the live cache from all
    entries."""
    return recompile_jobs(out, new, nodes_unchanged=not edit.changed)


def _replaced_by_definition(view: Any, ttl: int, given: dict[str, list[CacheEntry]]
                            ) -> tuple[AffinityCacheModel, Any]:
    """``affinity-cache-owners`` as documented, from the whole section: the other owners'
    entries, then the given ones, stably sorted by owner."""
    kept = [e for entries in view.by_owner.values() for e in entries if e.owner_uid not in given]
    entries = sorted(kept + [e for group in given.values() for e in group],
                     key=lambda e: e.owner_uid)
    model = AffinityCacheModel(ttl_seconds=ttl, entries=entries)
    return model, build_view(model)


def _rebuilding() -> ExitStack:
    """Every delta applied by the full rebuild (the code before the incremental path)."""
    stack = ExitStack()
    stack.enter_context(mock.patch.object(state, "patch_cache", lambda *args: None))
    stack.enter_context(mock.patch.object(state, "replace_owners", _replaced_by_definition))
    stack.enter_context(mock.patch.object(state, "_recompile", _full_recompile))
    stack.enter_context(mock.patch.object(state, "_shift_counts", lambda *args: None))
    return stack


def _same(a: Problem, b: Problem) -> None:
    assert a.scenario == b.scenario
    assert a.now == b.now and a.queue == b.queue and a.job_index == b.job_index
    assert list(a.live.items()) == list(b.live.items())  # the same maps, in the same order
    assert [list(ranks.items()) for ranks in a.live.values()] == \
        [list(ranks.items()) for ranks in b.live.values()]
    assert [j.name for j in a.jobs] == [j.name for j in b.jobs]
    for x, y in zip(a.jobs, b.jobs, strict=True):
        for attr in ("origin", "fault", "running"):
            assert np.array_equal(getattr(x, attr), getattr(y, attr)), (x.name, attr)
            assert getattr(x, attr).dtype == getattr(y, attr).dtype
        assert x == y or all(getattr(x, f) == getattr(y, f) for f in (
            "index", "name", "owner_uid", "policy", "tasks", "priority", "levels", "image"))
    for attr in ("free", "health", "npus"):
        assert np.array_equal(getattr(a, attr), getattr(b, attr)), attr


def _deltas(scenario: Scenario, seed: int, count: int) -> list[dict[str, Any]]:
    """``count`` random deltas: ``now`` moves (some across an owner's expiry), cache
    events of the jobs' owners and others, node values, a job removed and submitted, a
    job submitted again in its removal's delta (as it was, changed, or breaking a rule
    of its own), a job or running job whose name or owner another has, running jobs
    submitted (on nodes with and without the free chips) and removed."""
    rng = random.Random(seed)
    names = [n.name for n in scenario.nodes]
    jobs = list(scenario.jobs)
    owners = [j.owner_uid for j in jobs if j.owner_uid] + sorted(
        {e.owner_uid for e in scenario.affinity_cache.entries}) + ["owner-x", "owner-y"]
    ttl = scenario.affinity_cache.ttl_seconds
    times = [e.updated for e in scenario.affinity_cache.entries]
    now = scenario.now or 0
    removed: list[Any] = []
    running: list[str] = []
    out: list[dict[str, Any]] = []
    for _ in range(count):
        delta: dict[str, Any] = {}
        if rng.random() < 0.6:
            now += rng.choice([1, 60, ttl // 3, ttl, -ttl // 2])
            delta["now"] = max(now, 0)
        elif rng.random() < 0.3:  # just at an owner's expiry (stamps: see the test)
            newest = rng.choice([STAMP + rng.randrange(count), *times])
            now = newest + ttl + rng.choice([-1, 0, 1])
            delta["now"] = now
        if rng.random() < 0.7:
            events = []
            for _ in range(rng.randint(1, 4)):
                kind = rng.choice(_EVENTS)
                event: dict[str, Any] = {"event": kind, "owner-uid": rng.choice(owners)}
                if kind in ("bind", "evict", "discard"):
                    event["rank"] = rng.randrange(6)
                if kind == "bind":
                    event["node"] = rng.choice(names) if rng.random() < 0.95 else "no-such-node"
                events.append(event)
            delta["cache-events"] = events
        if rng.random() < 0.3:
            delta["node-updates"] = [
                {"name": name, "health": rng.choice(["healthy", "subhealthy", "unhealthy"])}
                for name in rng.sample(names, 3)]
        if rng.random() < 0.15:
            node = scenario.nodes[rng.randrange(len(names))]
            delta.setdefault("node-updates", []).append(
                {"name": node.name, "free": rng.choice([0, node.npus, node.npus + 1])})
        if removed and rng.random() < 0.3:
            delta["jobs-submitted"] = [removed.pop().model_dump(by_alias=True, mode="json",
                                                             exclude_none=True)]
        elif jobs and rng.random() < 0.15:
            job = jobs.pop(rng.randrange(len(jobs)))
            removed.append(job)
            delta["jobs-removed"] = [job.name]
        elif jobs and rng.random() < 0.3:  # removed and submitted again at the end
            job = jobs[rng.randrange(len(jobs))]
            again = job.model_dump(by_alias=True, mode="json", exclude_none=True)
            change = rng.choice(["same", "same", "priority", "bad-rank", "owner", "name"])
            if change == "priority":
                again["priority"] = job.priority + 1
            elif change == "bad-rank":
                again["fault-ranks"] = [job.tasks + 1]
            elif change == "owner" and len(jobs) > 1:  # another job's owner
                again["owner-uid"] = rng.choice([j.owner_uid for j in jobs if j is not job])
            if change != "name":
                delta["jobs-removed"] = [job.name]
            delta["jobs-submitted"] = [again]  # "name": a second job of that name
        if rng.random() < 0.25:
            delta.update(_running_change(rng, scenario.nodes, running, jobs))
        if rng.random() < 0.35:
            delta["affinity-cache-owners"] = _owners_change(rng, owners, names, now)
        out.append(delta)
    return out


def _owners_change(rng: random.Random, owners: list[str], names: list[str], now: int
                   ) -> list[dict[str, Any]]:
    """``affinity-cache-owners`` items: owners' entries replaced (times of their own or
    one each, ranks in or out of order, a rollback anchor), owners forgotten; now and
    then a rule broken (an unknown node, a rank twice, another owner's entry)."""
    out = []
    for owner in rng.sample(owners, rng.randint(1, 3)):
        ranks = rng.sample(range(8), rng.randint(0, 4))
        if rng.random() < 0.5:
            ranks.sort()
        stamp = now - rng.choice([0, 5, 10 ** 6])
        entries = [{"owner-uid": owner, "rank": rank, "node": rng.choice(names),
                    "updated": stamp if rng.random() < 0.7 else stamp - rng.randrange(9)}
                   for rank in ranks]
        if entries and rng.random() < 0.3:
            entries[0]["previous"] = rng.choice(names)
        if entries and rng.random() < 0.05:
            broken = rng.choice([("node", "no-such-node"), ("owner-uid", "owner-x"),
                                 ("rank", entries[0]["rank"])])
            entries[-1][broken[0]] = broken[1]
        out.append({"owner-uid": owner, "entries": entries})
    return out


def _running_change(rng: random.Random, nodes: list[Any], running: list[str],
                    jobs: list[Any]) -> dict[str, Any]:
    """A running job submitted (one rank on a random node: its free chips may not allow
    it; its name may be a pending job's; its rank may be outside its tasks), or one of
    ``running`` removed."""
    if running and rng.random() < 0.4:
        return {"running-removed": [running.pop(rng.randrange(len(running)))]}
    name = (rng.choice(jobs).name if jobs and rng.random() < 0.1
            else f"run-{rng.randrange(10 ** 6)}")
    running.append(name)
    busy = [node.name for node in nodes if node.free == 0]
    node = rng.choice(busy) if busy and rng.random() < 0.8 else rng.choice(nodes).name
    return {"running-submitted": [{"name": name, "policy": "chip8-node8", "tasks": 2,
                                   "npu-per-task": rng.choice([1, 4, 8]),
                                   "ranks": {rng.choice("0001112"): node}}]}


def _start(scenario: Scenario, form: str) -> Scenario:
    """The scenario with its cache section as given, ordered as the cache writes it, or
    shuffled (a section the incremental path must first write whole)."""
    if form == "given":
        return scenario
    entries = list(CacheLifecycle.from_model(scenario.affinity_cache).to_model().entries)
    if form == "shuffled":
        random.Random(len(entries)).shuffle(entries)
    cache = AffinityCacheModel(ttl_seconds=scenario.affinity_cache.ttl_seconds,
                               entries=entries)
    return scenario.model_copy(update={"affinity_cache": cache})


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(family=st.sampled_from(["850", "950", "multilevel"]),
       form=st.sampled_from(["given", "canonical", "shuffled"]),
       seed=st.integers(0, 10_000), count=st.integers(1, 12))
def test_incremental_deltas_equal_the_full_rebuild(family: str, form: str, seed: int,
                                                   count: int) -> None:
    scenario = _start(generated(family, 128, 6), form)
    incremental = Cluster("inc", compile_scenario(scenario))
    rebuilt = Cluster("full", compile_scenario(scenario))
    for i, raw in enumerate(_deltas(scenario, seed, count)):
        _apply_both(incremental, rebuilt, raw, STAMP + i)


def _apply_both(incremental: Cluster, rebuilt: Cluster, raw: dict[str, Any], stamp: int
                ) -> list[str] | None:
    """``raw`` applied to both clusters: the same refusal or the same result; the
    refusal's messages (``None``: applied)."""
    delta = ClusterDelta.model_validate(raw)
    refused: list[list[str] | None] = []
    for cluster, context in ((incremental, ExitStack), (rebuilt, _rebuilding)):
        with context():  # (entered here: _rebuilding patches when called)
            try:
                cluster.apply(delta, stamp)
                refused.append(None)
            except InputError as exc:
                refused.append(exc.messages)
    assert refused[0] == refused[1], raw
    a, b = incremental.snapshot.problem, rebuilt.snapshot.problem
    _same(a, b)
    _same(a, compile_scenario(a.scenario))
    assert incremental.last_update == rebuilt.last_update
    assert incremental.info().cache_states == rebuilt.lifecycle.counts()
    assert list(incremental.info().cache_states.items()) == \
        list(rebuilt.info().cache_states.items())
    assert incremental.lifecycle.export_states() == rebuilt.lifecycle.export_states()
    assert incremental.lifecycle.to_model() == rebuilt.lifecycle.to_model()
    # the running ranks' chips moved with the delta, as the full walk counts them
    kept = running_view._CHIPS.get(a)
    if kept is not None:
        MOVED_CHIPS_CHECKED[0] += 1
        assert kept == running_chips(a.scenario), raw
    return refused[0]


def test_submitted_items_break_the_rules_the_full_rules_see() -> None:
    """Each rule a submitted job or running job takes part in, broken once by an
    otherwise valid delta: refused with the full rules' messages; then valid
    submissions (a job again as it was, changed, a running job on a full node) applied
    as the full rebuild applies them."""
    scenario = generated("850", 128, 6)
    jobs = scenario.jobs
    full = next(n.name for n in scenario.nodes if n.free == 0)
    idle = next(n.name for n in scenario.nodes if n.free == n.npus)

    def again(at: int, **change: Any) -> dict[str, Any]:
        data = jobs[at].model_dump(by_alias=True, mode="json", exclude_none=True)
        return {"jobs-removed": [jobs[at].name], "jobs-submitted": [data | change]}

    def running(name: str, ranks: dict[str, str], tasks: int = 2) -> dict[str, Any]:
        return {"running-submitted": [{"name": name, "policy": "chip8-node8", "tasks": tasks,
                                       "npu-per-task": 8, "ranks": ranks}]}

    broken = [again(0, **{"owner-uid": jobs[1].owner_uid}),
              again(0, **{"fault-ranks": [jobs[0].tasks]}),
              again(0, **{"running-ranks": {"0": "no-such-node"}}),
              {"jobs-submitted": [jobs[2].model_dump(by_alias=True, mode="json",
                                                     exclude_none=True)]},
              running("r-0", {"0": "no-such-node"}),
              running("r-0", {"0": idle}),
              running("r-0", {"3": full}),
              running(jobs[0].name, {"0": full})]
    incremental = Cluster("inc", compile_scenario(scenario))
    rebuilt = Cluster("full", compile_scenario(scenario))
    for i, raw in enumerate(broken):
        assert _apply_both(incremental, rebuilt, raw, STAMP + i) is not None, raw
    checked = MOVED_CHIPS_CHECKED[0]
    for i, raw in enumerate([again(0), again(1, priority=jobs[1].priority + 7),
                             running("r-1", {"0": full}), {"running-removed": ["r-1"]}]):
        assert _apply_both(incremental, rebuilt, raw, STAMP + i) is None, raw
    assert MOVED_CHIPS_CHECKED[0] == checked + 4  # every one moved, none counted again


def test_the_view_knows_a_section_the_cache_wrote() -> None:
    scenario = generated("850", 128, 6)
    written = CacheLifecycle.from_model(scenario.affinity_cache).to_model()
    assert build_view(written).canonical
    entries = list(written.entries)
    assert len(entries) > 2
    swapped = [entries[1], entries[0], *entries[2:]]
    assert not build_view(written.model_copy(update={"entries": swapped})).canonical
    older = [entries[0].model_copy(update={"updated": entries[0].updated - 1}), *entries[1:]]
    if sum(e.owner_uid == entries[0].owner_uid for e in entries) > 1:
        assert not build_view(written.model_copy(update={"entries": older})).canonical


def test_a_copied_cache_does_not_see_the_other_change() -> None:
    scenario = generated("850", 128, 6)
    lifecycle = CacheLifecycle.from_model(scenario.affinity_cache)
    before = lifecycle.to_model()
    entry = before.entries[0]
    copy = lifecycle.copy()
    copy.allocate(entry.owner_uid, entry.rank, "elsewhere", entry.updated + 5)
    copy.discard(before.entries[-1].owner_uid, before.entries[-1].rank)
    assert lifecycle.to_model() == before
    lifecycle.delete_owner(entry.owner_uid)
    assert copy.node(entry.owner_uid, entry.rank) == "elsewhere"
    assert lifecycle.node(entry.owner_uid, entry.rank) == ""
