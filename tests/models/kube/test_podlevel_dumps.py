"""Partly running jobs of every family from the bundled dumps: one pod of a
running job is made pending again; the import writes a pending job with
``running-ranks`` and both engines repair it without moving a running rank."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models.check import check
from models.compiled import compile_scenario
from models.kube.source import iter_objects
from models.objective import evaluate
from models.scenario import Family
from solver.facade import solve
from tests.models.kube.helpers import run

EXAMPLES = Path(__file__).resolve().parents[3] / "models" / "kube" / "examples"
GROUP = "scheduling.k8s.io/group-name"


def _objects(folder: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.json")):
        out.extend(iter_objects(json.loads(path.read_text()), str(path)))
    return out


@pytest.mark.parametrize(("folder", "family"), [
    ("superpod-850/t0", Family.SUPERPOD), ("rack-950", Family.RACK),
    ("multilevel", Family.MULTILEVEL)])
def test_a_pod_of_a_running_job_pending_again_is_repaired(folder: str, family: Family) -> None:
    objects = copy.deepcopy(_objects(EXAMPLES / folder))
    pods = [o for o in objects if o.get("kind") == "Pod"]
    groups: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        groups.setdefault(pod["metadata"]["annotations"].get(GROUP, ""), []).append(pod)
    name, members = next((g, m) for g, m in sorted(groups.items())
                         if m and all(p["spec"].get("nodeName") for p in m))
    last = max(members, key=lambda p: int(p["metadata"]["annotations"]["hccl/rankIndex"]))
    rank = int(last["metadata"]["annotations"]["hccl/rankIndex"])
    node = last["spec"].pop("nodeName")
    last["status"]["phase"] = "Pending"
    result = run(objects)
    assert not any("partly running" in w for w in result.warnings)
    problem_job = next(j for j in result.scenario.jobs if j.name.endswith(name))
    assert rank not in problem_job.running_ranks and len(problem_job.running_ranks) == len(
        members) - 1
    for engine in ("greedy", "cpsat"):
        answer = solve(result.scenario, engine=engine, time_limit=10, workers=1, seed=0)
        assert check(result.scenario, answer.placement) == []
        assert answer.objective == evaluate(result.scenario, answer.placement).objective
        j = next(i for i, job in enumerate(result.scenario.jobs) if job.name.endswith(name))
        nodes = answer.plan.nodes[j]
        assert nodes is not None, answer.plan.reasons[j]
        names = [answer.placement.jobs[j].ranks[str(rank)]]
        if engine == "greedy":
            assert names == [node]  # greedy's order gives the freed node its rank back
            greedy_objective = answer.objective
        else:  # the dump records no previous node for the pod: any node of equal score
            assert answer.objective >= greedy_objective
        running = {r: n for r, n in problem_job.running_ranks.items()}
        got = {r: result.scenario.nodes[int(n)].name for r, n in enumerate(np.asarray(nodes))
               if r in running}
        assert got == running
    compiled = compile_scenario(result.scenario)
    view = next(v for v in compiled.jobs if v.name.endswith(name))
    assert view.family is family and view.partly_running
