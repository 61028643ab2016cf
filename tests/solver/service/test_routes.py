"""Every stateless route of the service on a real server: plan, validate, health, metrics,
OpenAPI, and bad bodies answered 400/413/422 with messages naming the field."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from models.check import check
from models.compiled import compile_scenario
from models.io import load_scenario
from models.placement import PlacementFile
from solver.doors import example_path
from solver.facade import solve
from solver.service.app import ServiceConfig
from solver.service.client import PlanClient, ServiceError
from tests.solver.service.conftest import body, example, running_server


def test_health_ready_and_metrics(client: PlanClient) -> None:
    assert client.healthz()
    assert client.readyz()
    client.plan(example(), engine="greedy", time_limit=2)
    text = client.metrics()
    for name in ("npu_place_requests_total", "npu_place_request_seconds_bucket",
                 "npu_place_plans_total", "npu_place_inflight_solves",
                 "npu_place_plan_lateness_seconds_bucket", "npu_place_cpsat_improved_total"):
        assert name in text, name
    assert 'route="/v1/plan"' in text


def test_readyz_waits_for_warm_up() -> None:
    with running_server(ServiceConfig(warmup=True)) as (url, service), PlanClient(url) as c:
        deadline = time.monotonic() + 30
        while not c.readyz():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert service.ready


def test_openapi_uses_the_contract_models(client: PlanClient) -> None:
    doc = client.request("GET", "/openapi.json").json()
    schemas = doc["components"]["schemas"]
    for name in ("Scenario", "Node", "Job", "PlacementFile", "ClusterDelta", "ValidateRequest"):
        assert name in schemas, name
    assert "super-pod-id" in schemas["Node"]["properties"]  # the contract's key names
    plan = doc["paths"]["/v1/plan"]["post"]
    assert plan["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/Scenario")
    assert {p["name"] for p in plan["parameters"]} == {
        "engine", "time-limit", "seed", "deterministic-time"}
    ok = plan["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert ok.endswith("/PlacementFile")


@pytest.mark.parametrize("name", ["superpod-850", "multilevel", "ordinary-8npu"])
def test_plan_greedy_equals_the_facade(client: PlanClient, name: str) -> None:
    scenario = example(name)
    got = client.plan(scenario, engine="greedy", time_limit=5)
    want = solve(scenario, engine="greedy").placement
    assert [(j.name, j.ranks) for j in got.jobs] == [(j.name, j.ranks) for j in want.jobs]
    assert got.objective == want.objective
    assert check(compile_scenario(scenario), got) == []


def test_plan_auto_answers_a_valid_placement(client: PlanClient) -> None:
    # how soon it answers is a deadline test's (test_deadlines.py), not a route's
    scenario = example("rack-950")
    got = client.plan(scenario, engine="auto", time_limit=1.0, seed=3)
    assert got.engine in ("greedy", "origin-first", "cpsat")
    assert check(compile_scenario(scenario), got) == []


def test_plan_default_time_limit_header(server: tuple[str, object]) -> None:
    response = httpx.post(server[0] + "/v1/plan", content=body(example()),
                          params={"engine": "greedy"})
    assert response.status_code == 200
    assert response.headers["x-time-limit"] == "1"
    assert response.headers["x-plan-source"] == "solve"


def _post(url: str, path: str, content: bytes, **params: object) -> httpx.Response:
    return httpx.post(url + path, content=content, params=params,  # type: ignore[arg-type]
                      headers={"content-type": "application/json"}, timeout=30)


def test_malformed_json_is_400(server: tuple[str, object]) -> None:
    response = _post(server[0], "/v1/plan", b'{"nodes": [')
    assert response.status_code == 400
    assert "malformed JSON at line 1" in response.json()["messages"][0]


@pytest.mark.parametrize(("content", "words"), [
    (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 32 levels"),
    (b'{"nodes": [], "nodes": [], "jobs": []}', "duplicate key 'nodes'"),
    (b'{"nodes": [{"name": "n0", "npus": 8, "free": NaN}], "jobs": []}', "non-finite"),
    (b'{"nodes": [], "jobs": [], "now": 1e999}', "out of range"),
])
@pytest.mark.parametrize("path", ["/v1/plan", "/v1/validate"])
def test_hostile_bodies_are_refused_like_hostile_files(server: tuple[str, object], path: str,
                                                       content: bytes, words: str) -> None:
    """The service reads bodies with the CLI's bounded JSON reader: before, a
    100k-deep body was a 500 "RecursionError" and a duplicate key silently won."""
    response = _post(server[0], path, content)
    assert response.status_code == 422, response.text
    assert words in response.json()["messages"][0]
    assert "internal error" not in response.text


def test_non_object_and_unknown_fields_are_422(server: tuple[str, object]) -> None:
    response = _post(server[0], "/v1/plan", b"[1, 2]")
    assert response.status_code == 422
    assert "expected a mapping" in response.json()["messages"][0]
    data = example().to_dict()
    data["nodes"][0]["colour"] = "red"
    response = _post(server[0], "/v1/plan", json.dumps(data).encode())
    assert response.status_code == 422
    assert "field 'colour'" in response.json()["messages"][0]


def test_invalid_fields_are_named(server: tuple[str, object]) -> None:
    data = example().to_dict()
    data["nodes"][1]["free"] = 99
    data["jobs"][0]["tasks"] = "many"
    response = _post(server[0], "/v1/plan", json.dumps(data).encode())
    assert response.status_code == 422
    messages = response.json()["messages"]
    assert any("field 'tasks'" in m and data["jobs"][0]["name"] in m for m in messages)
    data["jobs"][0]["tasks"] = 16
    response = _post(server[0], "/v1/plan", json.dumps(data).encode())
    assert response.status_code == 422
    messages = response.json()["messages"]
    assert any("field 'free'" in m and data["nodes"][1]["name"] in m for m in messages)


@pytest.mark.parametrize(("params", "field"), [
    ({"engine": "magic"}, "engine"),
    ({"time-limit": "-1"}, "time-limit"),
    ({"time-limit": "soon"}, "time-limit"),
    ({"time-limit": "100000"}, "time-limit"),
    ({"seed": "x"}, "seed"),
    ({"deterministic-time": "0"}, "deterministic-time"),
    # the CLI's bounds (models.limits); these were a 500 "LimitError" from the worker
    ({"seed": "2147483648"}, "seed"),
    ({"seed": "-1"}, "seed"),
    ({"deterministic-time": "inf"}, "deterministic-time"),
    ({"deterministic-time": "1e300"}, "deterministic-time"),
])
def test_bad_query_parameters_are_422(server: tuple[str, object], params: dict[str, str],
                                      field: str) -> None:
    response = _post(server[0], "/v1/plan", body(example()), **params)
    assert response.status_code == 422
    assert any(f"'{field}'" in m for m in response.json()["messages"])


def test_body_above_the_limit_is_413() -> None:
    with running_server(ServiceConfig(warmup=False, max_body_mb=0.001)) as (url, _):
        response = _post(url, "/v1/plan", body(example()))
        assert response.status_code == 413
        assert "--max-body-mb" in response.json()["messages"][0]
        # chunked upload without a content-length is cut off too
        response = httpx.post(url + "/v1/plan", content=iter([body(example())]), timeout=30)
        assert response.status_code == 413


def test_validate_scenario_and_placement(client: PlanClient) -> None:
    scenario = example()
    result = client.validate(scenario)
    assert result["valid"] and result["nodes"] == len(scenario.nodes)
    placement = solve(scenario, engine="greedy").placement
    result = client.validate(scenario, placement)
    assert result["valid"] and result["metrics"]["objective"] == placement.objective
    broken = placement.model_copy(deep=True)
    job = next(j for j in broken.jobs if j.placed and len(j.ranks) > 1)
    first = job.ranks["0"]
    job.ranks = {rank: first for rank in job.ranks}  # every rank on one node
    result = client.validate(scenario, broken)
    assert not result["valid"] and result["violations"]
    assert all(v["message"] for v in result["violations"])


def test_validate_reports_input_errors(client: PlanClient) -> None:
    data = example().to_dict()
    data["jobs"][0]["policy"] = "chip9-node9"
    result = client.validate(data)
    assert not result["valid"]
    assert any("field 'policy'" in e for e in result["errors"])


@pytest.mark.parametrize(("payload", "field"), [
    ({}, "scenario"),
    ({"scenario": {}, "extra": 1}, "extra"),
    ({"scenario": {}, "placement": {"jobs": [{"placed": True}]}}, "name"),
])
def test_validate_bad_bodies_are_422(client: PlanClient, payload: dict[str, object],
                                     field: str) -> None:
    with pytest.raises(ServiceError) as info:
        client.request("POST", "/v1/validate", json=payload)
    assert info.value.status == 422
    assert any(field in m for m in info.value.messages)


def test_unknown_route_is_404(server: tuple[str, object]) -> None:
    assert httpx.get(server[0] + "/v2/nothing").status_code == 404


def test_a_yaml_body_is_read_like_a_yaml_file(server: tuple[str, object]) -> None:
    """The CLI's default format works as a body: ``curl --data-binary @cluster.yaml``."""
    path = example_path("superpod-850")
    text = path.read_bytes()
    assert not text.lstrip().startswith((b"{", b"["))
    response = httpx.post(server[0] + "/v1/plan", content=text,
                          headers={"content-type": "application/yaml"},
                          params={"engine": "greedy"}, timeout=30)
    assert response.status_code == 200, response.text
    answer = PlacementFile.model_validate(response.json())
    assert check(compile_scenario(load_scenario(path)), answer) == []


@pytest.mark.parametrize(("content", "status", "words"), [
    (b"nodes: [\n  - name: n0\n", 400, "malformed YAML at line"),
    (b"a: &x [1, 2]\nb: *x\nc: !!python/object:os.system ls\n", 422, "tag"),
])
def test_bad_yaml_bodies_are_refused_with_the_file_readers_messages(
        server: tuple[str, object], content: bytes, status: int, words: str) -> None:
    response = httpx.post(server[0] + "/v1/plan", content=content, timeout=30)
    assert response.status_code == status, response.text
    assert words in response.json()["messages"][0]


@pytest.mark.parametrize(("method", "path", "params"), [
    ("POST", "/v1/plan", {"time-limt": "3"}),
    ("POST", "/v1/validate", {"engine": "greedy"}),
    ("GET", "/healthz", {"verbose": "1"}),
])
def test_unknown_query_parameters_are_named(server: tuple[str, object], method: str,
                                            path: str, params: dict[str, str]) -> None:
    response = httpx.request(method, server[0] + path, params=params,
                             content=body(example()), timeout=30)
    assert response.status_code == 422, response.text
    name = next(iter(params))
    assert response.json()["messages"][0].startswith(f"query parameter '{name}': unknown")
