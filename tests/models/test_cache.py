"""The affinity cache: every operation of the released plugin (reference §3.2, E32)."""

from __future__ import annotations

from models.cache import AffinityCache
from models.compiled import compile_scenario, live_cache
from models.io import scenario_from_data
from models.scenario import DEFAULT_CACHE_TTL_SECONDS, AffinityCacheModel, CacheEntry
from tests.models.builders import entry, job, node, scenario

HOUR = 3600


def test_record_and_get() -> None:
    cache = AffinityCache()
    assert cache.get("o1", 0) == ""
    cache.record("o1", 0, "a", now=100)
    cache.record("o1", 1, "b", now=100)
    assert cache.get("o1", 0) == "a"
    assert cache.get("o1", 1) == "b"
    assert cache.get("o1", 2) == ""
    assert cache.get("o2", 0) == ""
    assert cache.updated("o1") == 100
    assert cache.owners() == ["o1"]
    assert len(cache) == 1


def test_e32_record_twice_keeps_the_last_node() -> None:
    """E32: Record (o1, 0, a), (o1, 0, b) → GetPreferredNode = b."""
    cache = AffinityCache()
    cache.record("o1", 0, "a", now=1)
    cache.record("o1", 0, "b", now=2)
    assert cache.get("o1", 0) == "b"
    assert cache.updated("o1") == 2


def test_record_ignores_an_empty_owner() -> None:
    cache = AffinityCache()
    cache.record("", 0, "a", now=1)
    assert len(cache) == 0
    assert cache.get("", 0) == ""


def test_rollback_restores_the_previous_node_once() -> None:
    cache = AffinityCache()
    cache.record("o1", 0, "a", now=1)
    cache.record("o1", 0, "b", now=2)
    cache.rollback("o1", 0)
    assert cache.get("o1", 0) == "a"
    # the anchor is single-level: a second rollback deletes the entry (no previous left)
    cache.rollback("o1", 0)
    assert cache.get("o1", 0) == ""
    assert cache.get_map("o1") is None
    assert cache.owners() == []
    assert cache.updated("o1") is None


def test_rollback_of_a_re_recorded_node_keeps_it() -> None:
    """Previous ← Node even when the same node is recorded again."""
    cache = AffinityCache()
    cache.record("o1", 0, "a", now=1)
    cache.record("o1", 0, "a", now=2)
    cache.rollback("o1", 0)
    assert cache.get("o1", 0) == "a"


def test_rollback_without_previous_deletes_only_that_rank() -> None:
    cache = AffinityCache()
    cache.record("o1", 0, "a", now=1)
    cache.record("o1", 1, "b", now=1)
    cache.rollback("o1", 1)
    assert cache.get_map("o1") == {0: "a"}
    assert cache.owners() == ["o1"]
    cache.rollback("o1", 7)  # unknown rank: nothing happens
    cache.rollback("ghost", 0)  # unknown owner: nothing happens
    assert cache.get_map("o1") == {0: "a"}


def test_get_map() -> None:
    cache = AffinityCache()
    assert cache.get_map("o1") is None
    cache.record("o1", 2, "c", now=1)
    cache.record("o1", 0, "a", now=1)
    assert cache.get_map("o1") == {0: "a", 2: "c"}
    # the map is a copy: changing it does not change the cache
    found = cache.get_map("o1")
    assert found is not None
    found[5] = "x"
    assert cache.get("o1", 5) == ""


def test_refresh_owner_only_touches_existing_owners() -> None:
    cache = AffinityCache()
    cache.refresh_owner("o1", now=50)
    assert cache.owners() == []
    assert cache.updated("o1") is None
    cache.record("o1", 0, "a", now=10)
    cache.refresh_owner("o1", now=50)
    assert cache.updated("o1") == 50
    assert cache.get("o1", 0) == "a"


def test_remove_owner() -> None:
    cache = AffinityCache()
    cache.record("o1", 0, "a", now=1)
    cache.record("o2", 0, "b", now=1)
    cache.remove_owner("o1")
    cache.remove_owner("ghost")
    assert cache.owners() == ["o2"]
    assert cache.get("o1", 0) == ""
    assert cache.updated("o1") is None


def test_e32_evict_expired() -> None:
    """E32: a stale owner (updated 100000 s ago) is evicted with a 24 h TTL; Size = 1."""
    now = 1_000_000
    cache = AffinityCache()
    cache.record("stale", 0, "a", now=now - 100_000)
    cache.record("active", 0, "b", now=now - 10)
    gone = cache.evict_expired(now, ttl_seconds=24 * HOUR)
    assert gone == ["stale"]
    assert len(cache) == 1
    assert cache.owners() == ["active"]
    assert cache.get("stale", 0) == ""


def test_ttl_boundary_and_default() -> None:
    """An owner exactly ``ttl`` old survives (upstream: UpdateTime < now − ttl is evicted)."""
    now = 10_000_000
    ttl = DEFAULT_CACHE_TTL_SECONDS
    assert ttl == 72 * HOUR
    cache = AffinityCache()
    cache.record("edge", 0, "a", now=now - ttl)
    cache.record("old", 0, "b", now=now - ttl - 1)
    assert cache.evict_expired(now) == ["old"]  # the cache's own TTL (default 72 h)
    assert cache.owners() == ["edge"]
    assert cache.evict_expired(now + 1) == ["edge"]


def test_refresh_saves_an_owner_from_expiry() -> None:
    cache = AffinityCache(ttl_seconds=HOUR)
    cache.record("o1", 0, "a", now=0)
    cache.refresh_owner("o1", now=2 * HOUR)
    assert cache.evict_expired(2 * HOUR + 10) == []
    assert cache.get("o1", 0) == "a"


def test_owner_time_is_shared_by_its_ranks() -> None:
    """One update time per owner: recording rank 1 keeps an old rank 0 alive too."""
    cache = AffinityCache(ttl_seconds=HOUR)
    cache.record("o1", 0, "a", now=0)
    cache.record("o1", 1, "b", now=2 * HOUR)
    assert cache.evict_expired(2 * HOUR) == []
    assert cache.get_map("o1") == {0: "a", 1: "b"}


def test_model_round_trip() -> None:
    model = AffinityCacheModel.model_validate({
        "ttl-seconds": 600,
        "entries": [
            {"owner-uid": "o1", "rank": 1, "node": "b", "updated": 90},
            {"owner-uid": "o1", "rank": 0, "node": "a", "updated": 100, "previous": "z"},
            {"owner-uid": "o2", "rank": 0, "node": "c", "updated": 5},
        ],
    })
    cache = AffinityCache.from_model(model)
    assert cache.ttl_seconds == 600
    assert cache.updated("o1") == 100  # the owner's newest row
    assert cache.get_map("o1") == {0: "a", 1: "b"}
    cache.rollback("o1", 0)  # the stored previous node is the rollback anchor
    assert cache.get("o1", 0) == "z"
    again = cache.to_model()
    assert again.ttl_seconds == 600
    assert again.entries == [
        CacheEntry(owner_uid="o1", rank=0, node="z", updated=100),
        CacheEntry(owner_uid="o1", rank=1, node="b", updated=100),
        CacheEntry(owner_uid="o2", rank=0, node="c", updated=5),
    ]
    assert AffinityCache.from_model(again).to_model() == again


def test_recorded_cache_is_a_valid_scenario_section() -> None:
    """Regression: a recorded entry without anchor was written as ``previous: ""`` and the
    scenario was then refused ("node '' does not exist")."""
    cache = AffinityCache()
    cache.record("o1", 0, "n0", now=100)
    cache.record("o1", 1, "n1", now=100)
    cache.record("o1", 1, "n0", now=100)
    section = cache.to_model().model_dump(by_alias=True, exclude_none=True)
    assert section["entries"][0] == {"owner-uid": "o1", "rank": 0, "node": "n0",
                                     "updated": 100}
    assert section["entries"][1]["previous"] == "n1"
    data = scenario([node("n0"), node("n1")], [job("j", owner_uid="o1", tasks=2)], now=200)
    data["affinity-cache"] = section
    problem = compile_scenario(scenario_from_data(data, "<test>"))
    assert problem.jobs[0].origin.tolist() == [0, 0]


def test_empty_previous_in_a_file_means_no_anchor() -> None:
    data = scenario([node("n0")], [job("j")], cache=[{**entry("o1", 0, "n0"), "previous": ""}])
    loaded = scenario_from_data(data, "<test>")
    cache = AffinityCache.from_model(loaded.affinity_cache)
    cache.rollback("o1", 0)
    assert cache.get_map("o1") is None


def test_compiled_view_uses_the_same_expiry_rule() -> None:
    """The compiled view's live entries are exactly what evict_expired keeps."""
    now = 1_764_400_000
    ttl = 3 * HOUR
    rows = [entry("edge", 0, "n0", now - ttl), entry("old", 0, "n1", now - ttl - 1),
            entry("mixed", 0, "n0", now - 10 * ttl), entry("mixed", 1, "n1", now - 5)]
    data = scenario([node("n0"), node("n1")], [job("a", owner_uid="mixed", tasks=2)],
                    cache=rows, ttl=ttl, now=now)
    loaded = scenario_from_data(data, "<test>")
    live = live_cache(loaded, now)
    assert live == {"edge": {0: "n0"}, "mixed": {0: "n0", 1: "n1"}}
    cache = AffinityCache.from_model(loaded.affinity_cache)
    cache.evict_expired(now)
    assert {o: cache.get_map(o) for o in cache.owners()} == live
    problem = compile_scenario(loaded)
    assert problem.live == live
    assert problem.jobs[0].origin.tolist() == [0, 1]
