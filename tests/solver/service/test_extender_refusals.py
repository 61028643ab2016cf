"""No single object breaks a session: a snapshot holding one object of every refusal
class still gets every other job planned and steered; the refused jobs are named in
``/sessions`` and left to Volcano."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from benchmarks.volcano_session import STATUS, VolcanoCluster, task_info, volcano_snapshot
from solver.service.extender import PLANNED_SCORE, ExtenderConfig, ExtenderCore
from tests.models.kube.test_import_lenient import (
    GOOD_PENDING,
    NOW,
    OCCUPANCY,
    REFUSED,
    _job_id,
    mixed_cluster,
)


@pytest.mark.parametrize("predicate_verb", [False, True])
def test_a_snapshot_with_every_refusal_class_still_steers_the_good_jobs(
        tmp_path: Path, predicate_verb: bool) -> None:
    """One object of every refusal class and a running job breaking each rule a pending
    job must meet (sp-block, tpBlock, level group sizes, a rank on a node that is gone),
    next to good pending jobs of three families: each good job is planned and steered."""
    cluster = VolcanoCluster(mixed_cluster(), NOW)
    cluster.write_device_dump(tmp_path)
    core = ExtenderCore(ExtenderConfig(configmaps=(str(tmp_path),), engine="greedy",
                                       http_timeout=30.0, predicate_verb=predicate_verb),
                        clock=lambda: NOW)
    snapshot = volcano_snapshot(cluster)
    session = core.begin()
    core.open_session(session, orjson.dumps(snapshot), float("inf"))
    assert session.error is None, session.error
    objects = cluster.builder.objects()
    good = _job_id(objects, "good")
    for name in GOOD_PENDING:
        plan = session.jobs[_job_id(objects, name)]
        assert plan.steer and len(plan.ranks) == len(
            [p for p in cluster.pods if p["metadata"]["name"].startswith(f"{name}-worker-")])
    for name in OCCUPANCY:  # imported as occupancy: neither planned nor refused
        assert _job_id(objects, name) not in session.jobs
        assert _job_id(objects, name) not in session.left_to_volcano
    assert set(session.left_to_volcano) == {_job_id(objects, n) for n in REFUSED}
    nodes = list(snapshot["Nodes"].values())
    for pod in cluster.pods:
        if pod["metadata"]["name"].startswith("good-worker-"):
            answer = json.loads(core.prioritize({"task": task_info(pod, good, STATUS[
                "Pending"]), "nodes": nodes}))
            assert list(answer["nodeScore"].values()) == [PLANNED_SCORE]
    # a refused job abstains: Volcano places it
    twins = _job_id(objects, "twin-ranks")
    pod = next(p for p in cluster.pods if p["metadata"]["name"] == "twin-ranks-worker-0")
    answer = json.loads(core.prioritize({"task": task_info(pod, twins, STATUS["Pending"]),
                                         "nodes": nodes}))
    assert answer["nodeScore"] == {}
    core.close_session()
    summary = core.history[-1]
    assert set(session.left_to_volcano) <= set(summary["left-to-plugin"])
    assert summary["counts"]["jobs-refused"] == len(REFUSED)
    # the node-level classes keep the session: each node named with what was done and why
    assert summary["nodes-changed"]["node-stray"].startswith("outside every super pod: "
                                                             "super pod 0 has 9 nodes")
    assert summary["nodes-changed"]["node-12"].startswith("left out: field 'free'")
    assert summary["nodes-changed"]["node-bad"].startswith("left out: Node node-bad: field "
                                                           "'metadata.labels'")


def test_the_device_objects_are_read_once_per_change(tmp_path: Path) -> None:
    cluster = VolcanoCluster(mixed_cluster(), NOW)
    cluster.write_device_dump(tmp_path)
    core = ExtenderCore(ExtenderConfig(configmaps=(str(tmp_path),), engine="greedy",
                                       http_timeout=30.0), clock=lambda: NOW)
    body = orjson.dumps(volcano_snapshot(cluster))
    readers = []
    for _ in range(2):
        session = core.begin()
        core.open_session(session, body, float("inf"))
        assert session.error is None and core._devices_read is not None
        readers.append(core._devices_read[2])
    assert readers[0] is readers[1]
    cluster.builder.priority_class("extra", 7)
    path = cluster.write_device_dump(tmp_path)
    import os
    os.utime(path, (NOW + 100, NOW + 100))
    core.devices._checked = 0.0  # the source looks at its files at most once a second
    session = core.begin()
    core.open_session(session, body, float("inf"))
    assert core._devices_read is not None and core._devices_read[2] is not readers[0]
    assert core._devices_read[2].classes.values["extra"] == 7
