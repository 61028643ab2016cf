"""When the serving process compacts a stored cluster's replay log: a large PUT body only
when it is mostly whitespace, and the deltas between compactions in proportion to the
base's size (an export of a 65,536-node cluster holds its worker 0.45-0.75 s)."""

from __future__ import annotations

import json

import pytest

from solver.service import cluster_log
from solver.service.cluster_log import mostly_whitespace
from solver.service.messages import PatchAnswer
from solver.service.pool import WorkerPool


def test_mostly_whitespace_tells_padded_from_compact_bodies() -> None:
    data = {"nodes": [{"name": f"n{i}", "npus": 8, "free": 8} for i in range(5000)]}
    compact = json.dumps(data, separators=(",", ":")).encode()
    assert not mostly_whitespace(compact)
    assert not mostly_whitespace(json.dumps(data).encode())  # ", " and ": " only
    assert mostly_whitespace(json.dumps(data, indent=8).encode())
    assert mostly_whitespace(b" " * (2 << 20) + compact)


@pytest.mark.parametrize(("padded", "compacted"), [(False, False), (True, True)])
def test_a_large_put_is_compacted_only_whenmostly_whitespace(
        monkeypatch: pytest.MonkeyPatch, padded: bool, compacted: bool) -> None:
    runner = WorkerPool(workers=1, warmup=False)  # not started: no process
    calls: list[str] = []
    monkeypatch.setattr(runner, "_compact", lambda record: calls.append(record.name))
    body = json.dumps({"nodes": ["x" * 40] * 40_000}, separators=(",", ":")).encode()
    assert len(body) > cluster_log.COMPACT_PUT_BYTES
    if padded:
        body = b" " * (2 << 20) + body
    runner.record_put("c", 0, body, {"version": 1})
    assert calls == (["c"] if compacted else [])


@pytest.mark.parametrize(("base_bytes", "every"), [(1000, 64), (10 << 20, 640)])
def test_deltas_between_compactions_grow_with_the_base(
        monkeypatch: pytest.MonkeyPatch, base_bytes: int, every: int) -> None:
    runner = WorkerPool(workers=1, warmup=False)
    calls: list[int] = []
    runner.clusters.put("c", 0, b"x" * base_bytes, {"version": 1})
    monkeypatch.setattr(runner, "_compact", lambda rec: calls.append(len(rec.deltas)))
    for version in range(2, every + 2):
        runner.record_patch("c", PatchAnswer({"version": version}, b"{}", None))
    assert calls == [every]
