"""``npu-place replay`` with vNPU pools and vNPU inference services."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import solver.simulate.session as session_module
from benchmarks.replay.api import EXAMPLES, example_path, read_spec
from benchmarks.replay.generate import DAY_START, Day, JobInfo, generate_day
from benchmarks.replay.report import render_seeds_report, summary_row
from benchmarks.replay.run import ReplayOptions, replay_engine
from benchmarks.replay.snapshots import series_day
from benchmarks.replay.spec import load_spec
from models.check import check
from models.errors import InputError
from models.scenario import VnpuJob
from solver.doors import example_names
from solver.facade import Result
from tests.replay_specs import NEXT_SESSION, hand_day, scale


def vnpu_spec(**changes: Any) -> dict[str, Any]:
    """A two-hour day: 4 Ascend310P servers with two slice services, 2 ordinary nodes with
    training (CI-sized)."""
    data: dict[str, Any] = {
        "name": "vnpu-short", "hours": 2, "session-minutes": 10,
        "cluster": {"pools": [{"name": "v", "family": "vnpu", "nodes": 4},
                              {"name": "o", "family": "ordinary", "nodes": 2}],
                    "image-disk-gb": 40},
        "images": [{"name": "chat", "size-gb": 20}, {"name": "ocr", "size-gb": 16},
                   {"name": "train", "size-gb": 30}],
        "services": [
            {"name": "chat", "image": "chat", "ai-cores": 4, "min-replicas": 1,
             "max-replicas": 10, "peak-hours": [1], "jitter": 0.3},
            {"name": "ocr", "image": "ocr", "ai-cores": 4, "vnpu-dvpp": "yes",
             "min-replicas": 0, "max-replicas": 4, "peak-hours": [2], "jitter": 0.3,
             "priority": 50}],
        "training": [{"name": "llm", "pool": "o", "images": ["train"], "initial": 1,
                      "arrivals-per-hour": 2, "gang-nodes": {1: 1, 2: 1}},
                     {"name": "ft", "pool": "v", "images": ["train"], "initial": 1,
                      "arrivals-per-hour": 2, "gang-nodes": {1: 1, 2: 1},
                      "chips-per-rank": 2,
                      "duration-minutes": {"median": 30, "min": 10, "max": 60}}],
        "faults": {"node-fault-rate": 2},
    }
    data.update(changes)
    return data


# --------------------------------------------------------------------------- spec


def test_the_vnpu_spec_loads_and_the_day_has_vnpu_nodes_and_jobs() -> None:
    day = generate_day(load_spec(vnpu_spec(), "day.yaml"), 0)
    vnodes = [n for n in day.scenario.nodes if n.vnpu is not None]
    assert [n.name for n in vnodes] == [f"v-node-{i}" for i in range(4)]
    assert {(n.npus, n.vnpu.chip_kind) for n in vnodes if n.vnpu} == {(4, "Ascend310P")}
    jobs = {j.name: j for j in day.scenario.vnpu_jobs}
    assert sorted(jobs) == ["infer-chat", "infer-ocr"]
    assert jobs["infer-ocr"].ai_cores == 4 and jobs["infer-ocr"].vnpu_dvpp.value == "yes"
    assert jobs["infer-chat"].owner_uid == "rs-chat"
    assert day.jobs["infer-chat"].kind == "vnpu-service"
    text = "\n".join(day.event_lines())
    assert "scale infer-chat" in text and "scale infer-ocr" in text
    # vNPU training: whole-card requests of 2 chips (16 AI cores) per rank
    assert "submit-vnpu train-ft-1 (" in text and "x 16 AI cores)" in text
    assert day.jobs["train-ft-1"].kind == "vnpu-training"


def test_the_vnpu_day_is_seeded() -> None:
    spec = load_spec(vnpu_spec(), "day.yaml")
    first, again, other = generate_day(spec, 5), generate_day(spec, 5), generate_day(spec, 6)
    assert first.event_lines() == again.event_lines()
    assert first.scenario == again.scenario
    assert first.event_lines() != other.event_lines()


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"cluster": {"pools": [{"name": "v", "family": "vnpu", "nodes": 2,
                             "chip-kind": "Ascend999"}]}}, "cluster.pools.0", "chip-kind"),
    ({"cluster": {"pools": [{"name": "o", "family": "ordinary", "nodes": 2, "chips": 4}]}},
     "cluster.pools.0", "family vnpu only"),
    ({"cluster": {"pools": [{"name": "o", "family": "ordinary", "nodes": 2}]},
      "training": []}, "services.0.ai-cores", "pool of family vnpu"),
    ({"services": [{"name": "chat", "image": "chat", "ai-cores": 3, "min-replicas": 1,
                    "max-replicas": 2}]}, "services.0.ai-cores", "[1,2,4,8,10]"),
    ({"services": [{"name": "chat", "image": "chat", "ai-cores": 4, "npu-per-pod": 2,
                    "min-replicas": 1, "max-replicas": 2}]}, "services.0", "npu-per-pod"),
    ({"services": [{"name": "chat", "image": "chat", "vnpu-dvpp": "yes", "min-replicas": 1,
                    "max-replicas": 2}]}, "services.0", "ai-cores"),
    ({"training": [{"name": "t", "pool": "v", "images": ["train"], "chips-per-rank": 5}]},
     "training.0.chips-per-rank", "have 4"),
    ({"training": [{"name": "t", "pool": "o", "images": ["train"], "chips-per-rank": 1}]},
     "training.0.chips-per-rank", "vnpu pool only"),
])
def test_bad_vnpu_specs_are_refused_with_the_field_named(change: dict[str, Any], field: str,
                                                         words: str) -> None:
    with pytest.raises(InputError) as info:
        load_spec(vnpu_spec(**change), "day.yaml")
    text = "\n".join(info.value.messages)
    assert f"day.yaml: field '{field}" in text, text
    assert words in text, text


def test_the_bundled_vnpu_day_loads_and_its_name_is_not_a_scenario_example() -> None:
    spec = read_spec(example_path("vnpu-inference-day"))
    assert spec.name == "vnpu-inference-day"
    # `npu-place examples NAME` prints a day before a scenario: the names must differ
    assert not set(EXAMPLES) & set(example_names())
    assert sum(1 for s in spec.services if s.is_vnpu) == 4
    assert {p.family for p in spec.cluster.pools} == {"vnpu", "ordinary"}


# --------------------------------------------------------------------------- the loop


@pytest.mark.parametrize("engine", ["upstream", "rfc", "cpsat"])
def test_every_session_plan_passes_the_validator(engine: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[int] = []
    real_solve = session_module.solve

    def checked_solve(problem: Any, **kwargs: Any) -> Result:
        result = real_solve(problem, **kwargs)
        assert check(problem, result.placement) == []
        checked.append(sum(1 for jp in result.placement.jobs if jp.chips))
        return result

    monkeypatch.setattr(session_module, "solve", checked_solve)
    day = generate_day(load_spec(vnpu_spec(), "day.yaml"), 1)
    run = replay_engine(day, engine, ReplayOptions(engines=(engine,), deterministic_time=0.1))
    assert len(checked) >= 6 and sum(checked) > 0  # sessions with vNPU answers were checked
    row = summary_row(run, 1)
    assert row["vnpu-pods"] > 0 and row["vnpu-pulls"] > 0
    assert 0 < row["vnpu-pulls"] <= row["pulls"]


def _known_vnpu_day() -> Day:
    """Three one-chip Ascend310P nodes; every pull known in advance.

    A (8 cores, image a, first in the queue) and X (8 cores, image x) start on v-node-0
    and v-node-1; A grows onto v-node-2, shrinks back, X ends; A grows again: v-node-1 and
    its origin v-node-2 are both free with 8 cores.
    """
    day = hand_day({
        "name": "known-vnpu", "hours": 1, "session-minutes": 10,
        "cluster": {"pools": [{"name": "v", "family": "vnpu", "nodes": 3, "chips": 1}],
                    "image-disk-gb": 100},
        "images": [{"name": "a", "size-gb": 10}, {"name": "x", "size-gb": 6}],
        "services": [{"name": "a", "image": "a", "ai-cores": 8, "min-replicas": 1,
                      "max-replicas": 1, "priority": 10},
                     {"name": "x", "image": "x", "ai-cores": 8, "min-replicas": 1,
                      "max-replicas": 1, "priority": 0}],
    }, [
        ("A and X start", ()),
        ("A grows onto the third node", (NEXT_SESSION, scale("infer-a", 2))),
        ("A shrinks, X ends", (NEXT_SESSION, scale("infer-a", 1), scale("infer-x", 0))),
        ("A grows again", (NEXT_SESSION, scale("infer-a", 2))),
    ])
    assert [j.name for j in day.scenario.vnpu_jobs] == ["infer-a", "infer-x"]
    assert all(isinstance(j, VnpuJob) and j.tasks == 1 for j in day.scenario.vnpu_jobs)
    assert set(day.jobs) == {"infer-a", "infer-x"}
    assert day.jobs["infer-a"] == JobInfo("infer-a", "vnpu-service", "a", 10, 10, 0, DAY_START)
    return day


@pytest.mark.parametrize(("engine", "pulls"), [("upstream", 4), ("rfc", 3)])
def test_rfc_returns_the_slice_to_its_origin_and_saves_the_pull(engine: str,
                                                                pulls: int) -> None:
    run = replay_engine(_known_vnpu_day(), engine, ReplayOptions(engines=(engine,)))
    rows = run.sessions
    # 1: A on v-node-0, X on v-node-1 (fewest free AI cores first, then node order)
    assert (rows[0].vnpu_pods, rows[0].vnpu_pulls, rows[0].vnpu_pulled_gb) == (2, 2, 16.0)
    # 2: A's rank 1 on the only free node, v-node-2: a pull of a
    assert (rows[1].vnpu_pods, rows[1].vnpu_pulls) == (1, 1)
    # 3: nothing to place
    assert rows[2].vnpu_pods == 0
    # 4: rank 1 has origin v-node-2; v-node-1 (no image a) and v-node-2 have 8 free cores.
    # upstream takes v-node-1 (node order) and pulls a again; rfc returns it: no pull
    assert (rows[3].vnpu_pods, rows[3].vnpu_candidates) == (1, 1)
    assert rows[3].vnpu_hits == (1 if engine == "rfc" else 0)
    assert rows[3].vnpu_pulls == (0 if engine == "rfc" else 1)
    assert rows[3].image_hits == (1 if engine == "rfc" else 0)
    assert run.total("vnpu_pulls") == run.total("pulls") == pulls
    summary = summary_row(run, 0)
    assert summary["vnpu-pulled-gb"] == (26.0 if engine == "rfc" else 36.0)
    assert summary["vnpu-origin-hit-rate"] == (1.0 if engine == "rfc" else 0.0)


def test_a_recorded_day_with_vnpu_jobs_replays_without_them(tmp_path: Path) -> None:
    # the bundled vNPU dump twice: its pending vNPU jobs are not followed by the diffs
    source = Path(__file__).resolve().parents[2] / "models/kube/examples/vnpu-inference"
    for name, now in (("t0", 1764400000), ("t1", 1764400600)):
        shutil.copytree(source, tmp_path / name)
        (tmp_path / name / "now").write_text(str(now), encoding="utf-8")
    day = series_day(tmp_path)
    assert day.scenario.vnpu_jobs == []
    assert any(n.vnpu is not None for n in day.scenario.nodes)
    run = replay_engine(day, "rfc", ReplayOptions(engines=("rfc",)))
    assert len(run.sessions) == 2 and run.total("vnpu_pods") == 0


def test_the_many_seed_report_has_a_vnpu_section_only_with_vnpu_pods() -> None:
    def row(seed: int, engine: str, pulls: int, vnpu_pulls: int, vnpu_pods: int
            ) -> dict[str, Any]:
        return {"seed": seed, "engine": engine, "pulls": pulls, "vnpu-pods": vnpu_pods,
                "vnpu-pulls": vnpu_pulls, "vnpu-pulled-gb": 10 * vnpu_pulls,
                "vnpu-origin-hit-rate": 0.5}

    rows = [row(0, "upstream", 10, 6, 20), row(0, "rfc", 7, 3, 20),
            row(1, "upstream", 12, 8, 20), row(1, "rfc", 9, 5, 20)]
    text = render_seeds_report("d", rows, ("upstream", "rfc"), [])
    assert "## vNPU jobs" in text
    assert "| rfc - upstream | 2 | -3 [-3, -3] | -30 [-30, -30] |" in text
    plain = [{**r, "vnpu-pods": 0} for r in rows]
    assert "## vNPU jobs" not in render_seeds_report("d", plain, ("upstream", "rfc"), [])


@pytest.mark.parametrize("engine", ["upstream", "rfc"])
def test_a_vnpu_training_gang_runs_its_duration_and_completes(engine: str) -> None:
    spec = load_spec({
        "name": "vnpu-train", "hours": 1, "session-minutes": 10,
        "cluster": {"pools": [{"name": "v", "family": "vnpu", "nodes": 2, "chips": 2}]},
        "images": [{"name": "ft", "size-gb": 10}],
        "training": [{"name": "ft", "pool": "v", "images": ["ft"], "initial": 1,
                      "arrivals-per-hour": 0, "gang-nodes": {2: 1},
                      "duration-minutes": {"median": 20, "sigma": 0, "min": 20, "max": 20}}],
    }, "train.yaml")
    day = generate_day(spec, 0)
    run = replay_engine(day, engine, ReplayOptions(engines=(engine,)))
    rows = run.sessions
    # session 1: both ranks (whole nodes: 2 chips of 8 AI cores each) start and pull
    assert (rows[0].vnpu_pods, rows[0].vnpu_pulls, rows[0].vnpu_pulled_gb) == (2, 2, 20.0)
    # it runs 20 minutes from session 1 on: deleted at the start of session 3
    assert [r.completed_jobs for r in rows] == [0, 0, 1, 0, 0, 0]
    assert run.total("vnpu_pods") == 2
