"""Observable model reuse: the ``X-Models-Reused`` header and the Prometheus counters of
CP-SAT models reused and built, from the solve's own counts (a real server on loopback).
CP-SAT: 1 worker, seed 0, deterministic budgets (the time limits are safety nets)."""

from __future__ import annotations

import re
import time
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from models.check import check
from models.compiled import compile_scenario
from models.placement import PlacementFile
from solver.service.app import ServiceConfig, models_header
from solver.service.client import PlanClient
from tests.solver.service.conftest import body, example, generated, running_server

PARAMS = {"time-limit": "20", "deterministic-time": "0.5", "seed": "0"}


def _counts(notes: list[str]) -> tuple[int, int, int] | None:
    """(carried, within, built) of the facade's note on a stored cluster's plan."""
    for note in notes:
        if note.startswith("CP-SAT models: "):
            found = re.fullmatch(r"CP-SAT models: (\d+) reused from earlier sessions, "
                                 r"(\d+) within this one, (\d+) built", note)
            assert found is not None, note
            return int(found[1]), int(found[2]), int(found[3])
    return None


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _metric(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def _plan(client: PlanClient, path: str, **kwargs: Any) -> tuple[PlacementFile, str | None]:
    response = client.request("POST", path, params=PARAMS, timeout=60, **kwargs)
    assert response.headers["x-plan-source"] == "solve"
    return PlacementFile.model_validate(response.json()), response.headers.get(
        "x-models-reused")


def test_models_header_format() -> None:
    assert models_header({"carried": 4, "within": 1, "built": 2}) == "5/7"
    assert models_header({"carried": 0, "within": 0, "built": 3}) == "0/3"


def test_reuse_is_in_a_header_and_in_the_metrics() -> None:
    scenario = example("superpod-850")
    with running_server(ServiceConfig(warmup=False)) as (url, _), PlanClient(url) as client:
        client.put_cluster("seen", scenario)
        totals = {"carried": 0, "within": 0, "built": 0}
        seen = []
        for _ in range(2):
            placement, header = _plan(client, "/v1/clusters/seen/plan")
            counts = _counts(placement.notes)
            assert counts is not None, placement.notes
            carried, within, built = counts
            # the header is the solve's count: the same figures as its note
            assert header == f"{carried + within}/{carried + within + built}"
            totals["carried"] += carried
            totals["within"] += within
            totals["built"] += built
            seen.append(counts)
        assert seen[0][0] == 0  # nothing kept before the first plan
        assert seen[1][0] > 0, seen  # the second plan takes the first one's models
        stored = compile_scenario(client.cluster_scenario("seen"))
        assert check(stored, placement) == []

        # a stateless plan (2,048 nodes: large neighbourhoods): a header too, and the
        # steps its search repeats are handed back within the solve
        stateless = generated("950", 2048, 4)
        answer, header = _plan(client, "/v1/plan", content=body(stateless),
                               headers={"content-type": "application/json"})
        assert header is not None
        reused, used = (int(x) for x in header.split("/"))
        assert 0 < reused < used, header
        assert _counts(answer.notes) is None  # no note without a stored cluster

        samples = _samples(client.metrics())
        reused_name = "npu_place_cpsat_models_reused_total"
        built_name = "npu_place_cpsat_models_built_total"
        assert _metric(samples, reused_name, plan="cluster",
                       scope="earlier-session") == totals["carried"]
        assert _metric(samples, reused_name, plan="cluster",
                       scope="this-solve") == totals["within"]
        assert _metric(samples, built_name, plan="cluster") == totals["built"]
        assert _metric(samples, reused_name, plan="stateless", scope="earlier-session") == 0
        assert (_metric(samples, reused_name, plan="stateless", scope="this-solve")
                + _metric(samples, built_name, plan="stateless")) == used
        assert _metric(samples, reused_name, plan="stateless", scope="this-solve") == reused


def test_a_greedy_plan_has_no_models_header() -> None:
    with running_server(ServiceConfig(warmup=False)) as (url, _), PlanClient(url) as client:
        response = client.request("POST", "/v1/plan", params={"engine": "greedy"},
                                  content=body(example("superpod-850")),
                                  headers={"content-type": "application/json"})
        assert "x-models-reused" not in response.headers
        text = client.metrics()
        assert "npu_place_cpsat_models_built_total{" not in text


def test_a_solve_answered_without_its_counts_is_still_counted() -> None:
    """The answer went out with greedy's plan at its deadline (no header); the solve's
    final answer arrives later and its models are counted all the same."""
    config = ServiceConfig(warmup=False, kill_grace=30.0,
                           solve="tests.solver.service.faults:late_with_models")
    with running_server(config) as (url, _), PlanClient(url) as client:
        response = client.request("POST", "/v1/plan", params={"time-limit": "0.5"},
                                  content=body(example("superpod-850")),
                                  headers={"content-type": "application/json"})
        assert response.headers["x-plan-source"] == "greedy-fallback"
        assert "x-models-reused" not in response.headers
        built = 0.0
        for _ in range(200):  # until the late final answer has arrived (at most 20 s)
            samples = _samples(client.metrics())
            built = _metric(samples, "npu_place_cpsat_models_built_total", plan="stateless")
            if built:
                break
            time.sleep(0.1)
        assert built == 3
        assert _metric(samples, "npu_place_cpsat_models_reused_total", plan="stateless",
                       scope="this-solve") == 2
