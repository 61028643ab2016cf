"""Hostile deltas, fuzzed: after any sequence of accepted and refused deltas
the stored cluster passes full validation, every plan passes the validator, a refused
delta is a 422 that leaves the cluster byte-identical, and a delta that only updates
nodes is accepted exactly when the same scenario as a full body is."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.check import check
from models.compiled import compile_scenario
from models.io import scenario_from_data
from models.placement import PlacementFile
from models.validation import InputError
from solver.service.app import ServiceConfig
from tests.solver.service.conftest import running_server
from tests.solver.service.deltas import by_hand, fully_valid
from tests.solver.service.test_service_under_attack import ordinary, put

#: Wall-clock budget of the whole fuzz run (examples stop being drawn after it).
FUZZ_SECONDS = 60.0

NODES = [f"node-{i}" for i in range(12)]
OWNERS = ["rs-infer-7c9d", "job-train-b41e", "fresh-owner"]

# ---- well-formed pieces (most deltas are accepted, so that sequences build up state)
_node_name = st.sampled_from(NODES)
_extra_name = st.sampled_from([f"extra-{k}" for k in range(3)])
_good_update = st.fixed_dictionaries({"name": _node_name}, optional={
    "free": st.integers(0, 8), "health": st.sampled_from(["healthy", "unhealthy",
                                                          "subhealthy"]),
    "super-pod-id": st.integers(-1, 3), "rack-id": st.integers(-1, 3),
    "labels": st.dictionaries(st.sampled_from(["zone", "rack"]),
                              st.one_of(st.sampled_from(["a", "b"]), st.integers(0, 3)),
                              max_size=2)})
_good_node = st.fixed_dictionaries({"name": _extra_name, "npus": st.just(8),
                                    "free": st.integers(0, 8)})
_good_job = st.fixed_dictionaries({
    "name": st.sampled_from(["new-0", "new-1"]), "policy": st.just("chip8-node8"),
    "tasks": st.integers(1, 2), "npu-per-task": st.sampled_from([1, 2, 4, 8])})
_good_event = st.fixed_dictionaries(
    {"event": st.sampled_from(["bind", "evict", "discard", "delete-owner", "refresh"]),
     "owner-uid": st.sampled_from(OWNERS), "rank": st.integers(0, 4),
     "node": _node_name})
_good_delta = st.fixed_dictionaries({}, optional={
    "now": st.integers(1764400000, 1764500000),
    "node-updates": st.lists(_good_update, max_size=3),
    "nodes-added": st.lists(_good_node, max_size=1),
    "nodes-removed": st.lists(st.one_of(_extra_name, _node_name), max_size=1),
    "jobs-submitted": st.lists(_good_job, max_size=1),
    "jobs-removed": st.lists(st.sampled_from(["infer-svc", "train-small", "new-0"]),
                             max_size=1),
    "cache-events": st.lists(_good_event, max_size=3),
})

# ---- hostile pieces (names, numbers and shapes an attacker sends)
_names = st.one_of(st.sampled_from([*NODES, "nope"]), st.text(max_size=8),
                   st.just("evil\x1b[31m"), st.just("n" * 300))
_ints = st.one_of(st.integers(-3, 20), st.integers(-2**41, 2**41), st.just(70000),
                  st.just(10**18), st.none())
_label_text = st.one_of(st.text(max_size=6), st.just("a\x1b"), st.just("v" * 1100))
_labels = st.one_of(
    st.dictionaries(_label_text, st.one_of(_label_text, st.integers(0, 9), st.booleans()),
                    max_size=3),
    st.just({f"k{i}": "v" for i in range(300)}), st.just({"k": {"nested": 1}}))
_bad_update = st.fixed_dictionaries({"name": _names}, optional={
    "free": _ints, "health": st.sampled_from(["healthy", "bad", None]),
    "npus": st.one_of(st.sampled_from([8, 16]), _ints),
    "super-pod-id": _ints, "rack-id": _ints, "labels": _labels})
_bad_piece = st.one_of(
    st.fixed_dictionaries({"now": st.one_of(_ints, st.just(1e15))}),
    st.fixed_dictionaries({"node-updates": st.lists(_bad_update, min_size=1, max_size=2)}),
    st.fixed_dictionaries({"nodes-added": st.lists(st.fixed_dictionaries({
        "name": _names, "npus": st.sampled_from([8, 0, 5000]),
        "free": st.integers(-1, 17)}), min_size=1, max_size=2)}),
    st.fixed_dictionaries({"nodes-removed": st.lists(_names, min_size=1, max_size=2)}),
    st.fixed_dictionaries({"jobs-submitted": st.lists(st.fixed_dictionaries({
        "name": _names, "policy": st.sampled_from(["chip8-node8", "bad"]),
        "tasks": st.sampled_from([1, 0, 70000]), "npu-per-task": st.sampled_from([8, 3, 0])}),
        min_size=1, max_size=2)}),
    st.fixed_dictionaries({"cache-events": st.lists(st.fixed_dictionaries(
        {"event": st.sampled_from(["bind", "evict", "x"]),
         "owner-uid": st.one_of(st.sampled_from(OWNERS), _names)},
        optional={"rank": _ints, "node": st.sampled_from([*NODES, "nope"])}),
        min_size=1, max_size=2)}),
)
#: One delta in four carries a hostile piece on top of well-formed changes.
_delta = st.tuples(_good_delta, st.integers(0, 3), _bad_piece).map(
    lambda t: {**t[0], **t[2]} if t[1] == 0 else t[0])
#: Deltas that only update nodes: their outcome is compared with the full body's.  The
#: values tier (free and health only) included, node-4 (all its chips run a job) too.
_values_update = st.fixed_dictionaries({"name": _node_name, "free": st.integers(-1, 9)},
                                       optional={"health": st.sampled_from(["unhealthy",
                                                                            "healthy"])})
_node_delta = st.fixed_dictionaries({"node-updates": st.lists(
    st.one_of(_values_update, _good_update, _bad_update), min_size=1, max_size=3)})


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[tuple[str, Any]]:
    with running_server(ServiceConfig(warmup=False, workers=1, queue=4)) as running:
        yield running


def _check_stored(http: httpx.Client, name: str, engines: tuple[str, ...] = ("greedy",)
                  ) -> bytes:
    """The stored scenario passes full validation, and the plans of ``engines`` pass the
    validator."""
    content = http.get(f"/v1/clusters/{name}/scenario").content
    problem = compile_scenario(scenario_from_data(json.loads(content), "stored"))
    for engine in engines:
        response = http.post(f"/v1/clusters/{name}/plan",
                             params={"engine": engine, "time-limit": 10, "seed": 0,
                                     "deterministic-time": 0.2})
        assert response.status_code == 200, response.text
        assert check(problem, PlacementFile.model_validate(response.json())) == []
    return content


def _cache_states(http: httpx.Client, name: str) -> dict[str, int]:
    response = http.patch(f"/v1/clusters/{name}", content=b"{}")
    assert response.status_code == 200, response.text
    states: dict[str, int] = response.json()["cache-states"]
    return states


_started: list[float] = []  # when the first example ran


#: Hostile raw bodies: malformed, non-object, non-finite, huge, deep, not UTF-8.
_raw_bodies = st.sampled_from([
    b"", b"[", b"null", b"[]", b'"delta"', b"\xff\xfe", b'{"now": NaN}',
    b'{"now": Infinity}', b'{"now": 1' + b"0" * 5000 + b"}", b'{"now": 1e400}',
    b'{"now": 1, "now": 2}', b'{"a":' * 200 + b"1" + b"}" * 200,
    b'{"node-updates": {"name": "node-0"}}',
    b'{"cache-events": [' + b"[" * 100 + b"]" * 100 + b"]}",
    b'{"node-updates": [{"name": "node-0", "free": 1}], "extra": 1}',
    json.dumps({"jobs-removed": [f"j{i}" for i in range(10_001)]}).encode(),
])


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(with_now=st.booleans(),
       deltas=st.lists(st.one_of(_delta, _node_delta, _raw_bodies), min_size=1, max_size=6))
def test_stored_clusters_stay_valid_under_hostile_deltas(
        fuzz_server: tuple[str, Any], with_now: bool, deltas: list[dict[str, Any] | bytes]
) -> None:
    _started[:] = _started or [time.monotonic()]
    if time.monotonic() - _started[0] > FUZZ_SECONDS:
        return  # the run's time budget is spent (bounded on a loaded machine)
    url, _ = fuzz_server
    with httpx.Client(base_url=url, timeout=60) as http:
        put(http, "fuzz", ordinary(now=with_now, hog=True))
        for delta in deltas:
            before = http.get("/v1/clusters/fuzz/scenario").content
            states = _cache_states(http, "fuzz")
            raw = delta if isinstance(delta, bytes) else json.dumps(delta).encode()
            response = http.patch("/v1/clusters/fuzz", content=raw)
            assert response.status_code in (200, 400, 422), response.text
            assert "Traceback" not in response.text and "\\u001b" not in response.text
            if isinstance(delta, dict) and set(delta) == {"node-updates"}:
                # one set of rules: the same document as a full PUT gets the same verdict
                hand = by_hand(json.loads(before), delta["node-updates"])
                expected = hand is not None and fully_valid(hand)
                assert (response.status_code == 200) == expected, (delta, response.text)
                if hand is not None:
                    full = http.put("/v1/clusters/fuzz-put", content=json.dumps(hand))
                    assert full.status_code in (200, 201, 422), full.text
                    assert (full.status_code != 422) == expected, (delta, full.text)
                    if expected:
                        assert (http.get("/v1/clusters/fuzz-put/scenario").content
                                == http.get("/v1/clusters/fuzz/scenario").content)
            if response.status_code != 200:
                assert response.json()["messages"]
                assert http.get("/v1/clusters/fuzz/scenario").content == before
                assert _cache_states(http, "fuzz") == states
            _check_stored(http, "fuzz")  # every state: valid, greedy's plan valid
        _check_stored(http, "fuzz", ("auto",))  # the last state: CP-SAT's plan valid too


def _hogged() -> dict[str, Any]:
    data = ordinary(hog=True)
    data["running"].append({"name": "half", "policy": "chip8-node8", "npu-per-task": 4,
                            "ranks": {"0": "node-0", "1": "node-3"}})
    data["nodes"][0]["free"] = 4
    data["nodes"][3]["free"] = 4
    return data


@settings(max_examples=200, deadline=None, derandomize=True)
@given(updates=st.lists(st.one_of(_values_update, _good_update, _bad_update), min_size=1,
                        max_size=4))
def test_node_updates_are_accepted_exactly_when_the_full_body_is(
        updates: list[dict[str, Any]]) -> None:
    """Unit level, every tier: the delta's verdict is the full body's verdict."""
    from pydantic import ValidationError

    from heuristics.lifecycle import CacheLifecycle
    from solver.service.state import ClusterDelta, apply_delta

    data = _hogged()
    problem = compile_scenario(scenario_from_data(data))
    hand = by_hand(data, updates)
    expected = hand is not None and fully_valid(hand)
    lifecycle = CacheLifecycle.from_model(problem.scenario.affinity_cache)
    counts = lifecycle.counts()
    try:
        applied = apply_delta(problem, lifecycle, ClusterDelta.model_validate(
            {"node-updates": updates}))
    except (InputError, ValidationError) as exc:
        assert not expected, (updates, exc)
        assert lifecycle.counts() == counts
        return
    assert expected, (updates, applied.tier)
    assert hand is not None
    again = compile_scenario(scenario_from_data(hand))
    assert applied.scenario == again.scenario
    assert applied.problem.free.tolist() == again.free.tolist()
    assert applied.problem.health.tolist() == again.health.tolist()
