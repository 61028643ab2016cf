"""The cache lifecycle: each transition of the RFC's state diagram (seed §3.1.10, ref §3.3)."""

from __future__ import annotations

import pytest

from heuristics.lifecycle import CacheLifecycle, EntryState, RunningPods, TaskStatus
from models.cache import AffinityCache
from models.scenario import AffinityCacheModel, CacheEntry

T0 = 1_000_000
TTL = 72 * 3600


def warm(entries: dict[tuple[str, int], str] | None = None, when: int = T0) -> CacheLifecycle:
    cache = AffinityCache(TTL)
    for (owner, rank), node in (entries or {}).items():
        cache.record(owner, rank, node, when)
    return CacheLifecycle(cache)


def test_cold_start_rebuilds_from_running_pods_without_eviction() -> None:
    life = CacheLifecycle(None, TTL)
    assert life.cold
    start = life.start_session(T0, ["o1"], [RunningPods("o1", {0: "a", 1: "b"}),
                                            RunningPods(None, {0: "c"})])
    assert start.cold and start.rebuilt == 2 and start.evicted == []
    assert life.node("o1", 0) == "a" and life.node("o1", 1) == "b"
    assert life.state("o1", 0) is EntryState.RECORDED
    assert life.cache is not None and life.cache.owners() == ["o1"]  # no owner, no cache


def test_empty_scenario_cache_means_cold_start() -> None:
    assert CacheLifecycle.from_model(AffinityCacheModel(), cold_if_empty=True).cold
    assert not CacheLifecycle.from_model(AffinityCacheModel(), cold_if_empty=False).cold
    model = AffinityCacheModel(entries=[CacheEntry(owner_uid="o", rank=0, node="a",
                                                   updated=T0)])
    life = CacheLifecycle.from_model(model, cold_if_empty=True)
    assert not life.cold and life.state("o", 0) is EntryState.KEPT


def test_empty_to_recorded_on_allocate() -> None:
    life = warm()
    assert life.state("o", 0) is None
    assert life.allocate("o", 0, "a", T0) is EntryState.RECORDED
    assert life.node("o", 0) == "a"


def test_recorded_to_updated_when_a_new_node_overwrites() -> None:
    life = warm()
    life.allocate("o", 0, "a", T0)
    assert life.allocate("o", 0, "b", T0 + 5) is EntryState.UPDATED
    assert life.node("o", 0) == "b"
    assert life.cache is not None and life.cache.updated("o") == T0 + 5


def test_recorded_to_cleared_on_a_discarded_allocation() -> None:
    life = warm()
    life.allocate("o", 0, "a", T0)
    assert life.deallocate("o", 0, TaskStatus.PENDING) is None
    assert life.node("o", 0) == "" and life.state("o", 0) is None
    assert life.cache is not None and life.cache.owners() == []


def test_recorded_to_kept_on_eviction_or_scale_down() -> None:
    life = warm()
    life.allocate("o", 0, "a", T0)
    assert life.deallocate("o", 0, TaskStatus.RELEASING) is EntryState.KEPT
    assert life.node("o", 0) == "a"


def test_kept_to_hit_to_updated_and_evicted_again() -> None:
    life = warm()
    life.allocate("o", 0, "a", T0)
    life.release("o", 0)
    assert life.lookup("o", 0) == "a"
    assert life.state("o", 0) is EntryState.HIT
    assert life.allocate("o", 0, "a", T0 + 10) is EntryState.UPDATED  # back on its node
    assert life.node("o", 0) == "a"
    assert life.release("o", 0) is EntryState.KEPT  # updated -> kept (evicted again)


def test_updated_rollback_restores_the_previous_node_and_state() -> None:
    life = warm({("o", 0): "a"})
    life.release("o", 0)
    life.lookup("o", 0)
    assert life.allocate("o", 0, "b", T0 + 1) is EntryState.UPDATED
    assert life.discard("o", 0) is EntryState.HIT  # restored to a, as before the record
    assert life.node("o", 0) == "a"
    # the undo is single-level (upstream): a second rollback has no anchor and deletes
    assert life.discard("o", 0) is None
    assert life.node("o", 0) == ""


def test_kept_entries_expire_by_ttl_unless_their_owner_is_present() -> None:
    life = warm({("gone", 0): "a", ("here", 0): "b"}, when=T0)
    start = life.start_session(T0 + TTL + 1, ["here"])
    assert not start.cold
    assert start.refreshed == ["here"] and start.evicted == ["gone"]
    assert life.node("gone", 0) == "" and life.node("here", 0) == "b"
    assert life.cache is not None and life.cache.updated("here") == T0 + TTL + 1
    # exactly at the TTL boundary an owner is still live (evicted when older than now - ttl)
    life2 = warm({("edge", 0): "a"}, when=T0)
    assert life2.start_session(T0 + TTL, []).evicted == []


def test_job_deletion_clears_its_entries() -> None:
    life = warm({("o", 0): "a", ("o", 1): "b", ("p", 0): "c"})
    life.delete_owner("o")
    assert life.node("o", 0) == "" and life.node("o", 1) == ""
    assert life.node("p", 0) == "c"


def test_restart_loses_the_cache_and_the_next_session_is_cold() -> None:
    life = warm({("o", 0): "stale"})
    life.restart()
    assert life.cold and life.node("o", 0) == ""
    start = life.start_session(T0, ["o"], [RunningPods("o", {0: "now"})])
    assert start.cold and life.node("o", 0) == "now"


def test_jobs_without_owner_are_never_cached() -> None:
    life = warm()
    assert life.allocate(None, 0, "a", T0) is None
    assert life.allocate("", 0, "a", T0) is None
    assert life.cache is not None and len(life.cache) == 0


def test_allocate_before_any_session_is_refused() -> None:
    with pytest.raises(RuntimeError, match="start_session"):
        CacheLifecycle(None).allocate("o", 0, "a", T0)


def test_discarded_gang_leaves_no_stale_entry() -> None:
    # rank 0 had a previous node; ranks 1 and 2 are new.  Volcano allocated them one by
    # one, then the gang did not become ready and the statement was discarded.
    life = warm({("o", 0): "x"})
    life.release("o", 0)
    before = life.cache.get_map("o") if life.cache else None
    gang = life.begin("o", T0 + 60)
    gang.allocate(0, "a")
    gang.allocate(1, "b")
    gang.allocate(2, "c")
    assert life.node("o", 2) == "c"
    assert gang.discard() == [0, 1, 2]
    assert life.cache is not None and life.cache.get_map("o") == before == {0: "x"}
    assert life.state("o", 0) is EntryState.KEPT
    assert life.counts() == {"kept": 1}
    with pytest.raises(RuntimeError):
        gang.allocate(3, "d")


def test_committed_gang_keeps_every_record() -> None:
    life = warm()
    gang = life.begin("o", T0)
    for rank, node in enumerate(["a", "b"]):
        gang.allocate(rank, node)
    assert gang.commit() == [0, 1]
    assert life.cache is not None and life.cache.get_map("o") == {0: "a", 1: "b"}
    assert life.counts() == {"recorded": 2}
