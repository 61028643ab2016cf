"""Image stores and the kubelet's image GC, against hand-computed cases."""

from __future__ import annotations

import pytest

from benchmarks.replay.images import ClusterImages, GcPolicy, ImageStore, PullLedger

POLICY = GcPolicy(high_percent=85, low_percent=80, min_age_seconds=120)


def _store(*images: tuple[str, float, int]) -> ImageStore:
    """A 100 GB store holding ``(name, size, last_used)`` images detected at time 0."""
    store = ImageStore(100.0)
    for name, size, last in images:
        store.use(name, size, 0)
        store.images[name].last_used = last
    return store


def test_first_use_pulls_then_hits() -> None:
    store = ImageStore(100.0)
    assert store.use("a", 20.0, 10) is True
    assert store.use("a", 20.0, 50) is False
    assert store.images["a"].last_used == 50
    assert store.images["a"].first_detected == 10


def test_below_high_threshold_nothing_is_collected() -> None:
    # 84 GB of 100: under 85 %
    store = _store(("a", 40.0, 10), ("b", 44.0, 20))
    assert store.collect(1000, set(), POLICY) == []
    assert set(store.images) == {"a", "b"}


def test_at_high_threshold_lru_first_down_to_low() -> None:
    # 90 GB used, low 80 GB: free >= 10 GB; LRU order c(5), a(10), b(20): c (15 GB) is enough
    store = _store(("a", 30.0, 10), ("b", 45.0, 20), ("c", 15.0, 5))
    assert store.collect(1000, set(), POLICY) == ["c"]
    assert store.used_gb == pytest.approx(75.0)


def test_in_use_images_are_kept_and_the_next_oldest_goes() -> None:
    # c is in use: a (30 GB) goes instead; 90 -> 60 GB
    store = _store(("a", 30.0, 10), ("b", 45.0, 20), ("c", 15.0, 5))
    assert store.collect(1000, {"c"}, POLICY) == ["a"]
    assert store.images["c"].last_used == 1000  # in use: marked used now
    assert store.used_gb == pytest.approx(60.0)


def test_several_images_until_low_threshold() -> None:
    # 96 GB used: free >= 16; LRU a(8 GB, t1), b(6 GB, t2), c(4 GB, t3): a+b = 14 < 16, +c
    store = _store(("a", 8.0, 1), ("b", 6.0, 2), ("c", 4.0, 3), ("d", 78.0, 9))
    assert store.collect(1000, {"d"}, POLICY) == ["a", "b", "c"]
    assert store.used_gb == pytest.approx(78.0)


def test_young_images_are_not_collected() -> None:
    # detected at 0, GC at 100 s < 120 s minimum age: nothing goes, even above the threshold
    store = _store(("a", 50.0, 0), ("b", 45.0, 0))
    assert store.collect(100, set(), POLICY) == []
    assert store.collect(120, set(), POLICY) == ["a"]  # tie on use and detection: by name


def test_other_usage_counts_in_the_thresholds() -> None:
    store = ImageStore(100.0, other_used_gb=50.0)
    store.use("a", 36.0, 0)  # 86 %
    assert store.collect(500, set(), POLICY) == ["a"]


def test_everything_in_use_stays_above_the_threshold() -> None:
    store = _store(("a", 50.0, 0), ("b", 45.0, 0))
    assert store.collect(500, {"a", "b"}, POLICY) == []
    assert store.used_gb == pytest.approx(95.0)


def test_ledger_counts_gb_and_minutes() -> None:
    ledger = PullLedger(gb_per_minute=2.0)
    ledger.record(20.0)
    ledger.record(30.0)
    assert (ledger.pulls, ledger.gb, ledger.minutes) == (2, 50.0, 25.0)


def test_cluster_pulls_once_per_node_and_image() -> None:
    images = ClusterImages.empty(["n1", "n2"], capacity_gb=100.0, gb_per_minute=4.0)
    assert images.place("n1", "x", 20.0, 0)
    assert not images.place("n1", "x", 20.0, 0)  # a second rank on the same node
    assert images.place("n2", "x", 20.0, 0)
    assert not images.place("n2", "x", 20.0, 60)
    assert (images.ledger.pulls, images.ledger.gb, images.ledger.minutes) == (2, 40.0, 10.0)


def test_cluster_collect_after_gc_the_image_is_pulled_again() -> None:
    images = ClusterImages.empty(["n1"], capacity_gb=100.0)
    images.place("n1", "old", 40.0, 0)
    images.place("n1", "new", 50.0, 200)  # 90 GB: over 85 %
    assert images.collect(300, {"n1": {"new"}}) == 1
    assert images.deleted == 1
    assert images.place("n1", "old", 40.0, 400)  # a return after GC still pulls
    assert images.ledger.pulls == 3


@pytest.mark.parametrize(("high", "low", "age"), [(80, 85, 0), (85, 85, 0), (101, 80, 0),
                                                  (85, -1, 0), (85, 80, -5)])
def test_bad_policies_are_refused(high: float, low: float, age: int) -> None:
    with pytest.raises(ValueError):
        GcPolicy(high_percent=high, low_percent=low, min_age_seconds=age)
