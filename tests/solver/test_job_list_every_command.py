"""One job list through every door: a scenario with a job of every family and
vNPU jobs of both handler families goes through ``plan`` (table, JSON, YAML),
``validate``, ``compare``, ``simulate``, a sweep cell, the service (stateless and stored,
``/v1/validate``), the facade's early (fallback) answers and the deadline's empty answer;
each job appears, and is counted, exactly once."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.sweep import Cell, Source, run_cell
from models.check import check
from models.compiled import compile_scenario
from models.joblist import job_count, job_names
from models.placement import PlacementFile
from models.scenario import Family, Scenario
from solver.cli.main import main
from solver.facade import Result, solve
from solver.service.app import ServiceConfig
from solver.service.parsing import empty_placement
from tests.models.test_vnpu import vjob, vnode_row
from tests.solver.service.conftest import running_server
from tests.strategies import _JOB_BUILDERS, _cluster

FAMILIES = (Family.ORDINARY, Family.SUPERPOD, Family.RACK, Family.MULTILEVEL)


@st.composite
def mixed_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    """A cluster every family can use with one job of each family, plus 310P and 910B3
    vNPU nodes and vNPU jobs (with and without ``ring-controller``)."""
    cluster = draw(_cluster(FAMILIES, 40))
    jobs = []
    for family in FAMILIES:
        job = draw(_JOB_BUILDERS[family](cluster))
        job["name"] = f"job-{family.value}"
        jobs.append(job)
    nodes = [*cluster["nodes"], vnode_row("vn-310p", npus=4), vnode_row("vn-b3", kind="910B3",
                                                                        npus=2)]
    vjobs = [vjob("v-slices", tasks=3, cores=1), vjob("v-b3", cores=5,
                                                      ring_controller="ascend-910b"),
             vjob("v-card", cores=8, ring_controller="ascend-310P")]
    return {"now": cluster["now"], "config": cluster["config"], "nodes": nodes, "jobs": jobs,
            "vnpu-jobs": vjobs}


def once(names: list[str], data: dict[str, Any]) -> None:
    """``names`` holds every pending job of ``data`` exactly once."""
    counts = Counter(names)
    expected = job_names(Scenario.model_validate(data))
    assert sorted(counts) == sorted(expected), (sorted(counts), expected)
    assert set(counts.values()) == {1}, counts


def cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue()


def table_jobs(text: str) -> list[str]:
    """The first column of the job table of ``plan``'s table output."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("job "))
    names = []
    for line in lines[start + 2:]:
        if not line.strip() or line.startswith("rank:node "):  # the end, or the legend
            break
        if not line[0].isspace():  # a wrapped rank map continues on indented lines
            names.append(line.split()[0])
    return names


def doors_of_the_command_line(data: dict[str, Any], tmp: Path) -> None:
    path = tmp / "mixed.json"
    path.write_text(json.dumps(data))
    total = job_count(Scenario.model_validate(data))
    options = ("--time-limit", "10", "--workers", "1", "--deterministic-time", "0.5")
    for fmt in ("json", "yaml"):
        code, text = cli("plan", str(path), "--format", fmt, *options)
        assert code == 0
        answer = json.loads(text) if fmt == "json" else yaml.safe_load(text)
        once([job["name"] for job in answer["jobs"]], data)
        assert answer["metrics"]["placed-jobs"] <= total
    placement = tmp / "plan.json"
    placement.write_text(json.dumps(answer))
    code, text = cli("plan", str(path), "--engine", "greedy")
    assert code == 0
    once(table_jobs(text), data)
    assert len([line for line in text.splitlines() if "affinity cache:" in line]) <= 1
    code, text = cli("validate", str(path))
    assert code == 0 and f"{total} pending jobs" in text
    code, text = cli("validate", str(path), str(placement), "--format", "json")
    assert code == 0
    verdict = json.loads(text)
    assert verdict["jobs"] == total and verdict["metrics"]["placed-jobs"] <= total
    code, text = cli("compare", str(path), "--format", "json", *options)
    assert code == 0
    for record in json.loads(text):
        assert record["jobs"] == total and record["metrics"]["placed-jobs"] <= total
    events = tmp / "events.yaml"
    events.write_text(yaml.safe_dump([{"name": "first", "events": []}]))
    code, text = cli("simulate", str(path), str(events), "--engine", "greedy", "--format",
                     "json")
    assert code == 0
    (session,) = json.loads(text)["sessions"]
    once([job["name"] for job in session["jobs"]], data)


def sweep_cell(data: dict[str, Any]) -> None:
    total = job_count(Scenario.model_validate(data))
    cell = Cell(Source("mixed", "inline", "x"), (), "greedy", 10.0, 0)
    row = run_cell(cell, data)
    assert row["valid"] == "yes", row
    assert int(row["jobs"]) == total and int(row["placed-jobs"]) <= total


def facade_answers(data: dict[str, Any]) -> None:
    """The early (fallback) answers, the final answer and the deadline's empty answer."""
    problem = compile_scenario(Scenario.model_validate(data))
    published: list[Result] = []
    result = solve(problem, engine="auto", time_limit=10, workers=1, seed=0,
                   deterministic_time=0.5, on_fallback=published.append)
    assert len(published) >= 2
    for answer in [*published, result]:
        assert check(problem, answer.placement) == []
        once([jp.name for jp in answer.placement.jobs], data)
        assert sum(note.startswith("vNPU jobs:") for note in answer.notes) == 1
    empty = PlacementFile.model_validate(empty_placement(job_names(problem.scenario)))
    assert check(problem, empty) == []
    once([jp.name for jp in empty.jobs], data)


def doors_of_the_service(data: dict[str, Any]) -> None:
    total = job_count(Scenario.model_validate(data))
    with running_server(ServiceConfig(warmup=False, workers=1, queue=4)) as (url, _), \
            httpx.Client(base_url=url, timeout=60.0) as http:
        response = http.post("/v1/plan", params={"engine": "greedy", "time-limit": 10},
                             content=json.dumps(data))
        assert response.status_code == 200, response.text
        stateless = response.json()
        once([job["name"] for job in stateless["jobs"]], data)
        response = http.post("/v1/validate", content=json.dumps({"scenario": data,
                                                                 "placement": stateless}))
        assert response.status_code == 200, response.text
        verdict = response.json()
        assert verdict["valid"] and verdict["jobs"] == total
        assert verdict["metrics"]["placed-jobs"] <= total
        response = http.put("/v1/clusters/mixed", content=json.dumps(data))
        assert response.status_code in (200, 201), response.text
        info = response.json()
        assert info["jobs"] + info["vnpu-jobs"] == total
        for engine in ("greedy", "auto"):
            response = http.post("/v1/clusters/mixed/plan",
                                 params={"engine": engine, "time-limit": 10})
            assert response.status_code == 200, response.text
            once([job["name"] for job in response.json()["jobs"]], data)


@settings(max_examples=1, deadline=None)
@given(data=mixed_scenarios())
def test_every_door_answers_each_job_once(data: dict[str, Any]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        doors_of_the_command_line(data, Path(tmp))
    sweep_cell(data)
    facade_answers(data)
    doors_of_the_service(data)


def test_the_expired_cache_note_is_printed_once_next_to_vnpu_jobs(tmp_path: Path) -> None:
    """With vNPU jobs the TTL note landed in the table twice (the result's
    notes and the placement's were one list)."""
    from tests.models.builders import NOW, entry, job, node
    from tests.models.test_vnpu import doc

    data = doc([vnode_row("v1", npus=2), node("o1")], [vjob("a", owner_uid="u-a")],
               jobs=[job("t", owner_uid="u-t")], ttl=60,
               cache=[entry("u-t", 0, "o1", updated=NOW - 3600)])
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    code, text = cli("plan", str(path), "--engine", "greedy")
    assert code == 0
    assert len([line for line in text.splitlines() if "affinity cache:" in line]) == 1
    code, text = cli("plan", str(path), "--engine", "greedy", "--format", "json")
    assert code == 0
    assert len([n for n in json.loads(text)["notes"] if n.startswith("affinity cache:")]) == 1
