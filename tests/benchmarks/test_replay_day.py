"""Workload specs, generated days and the session loop of ``npu-place replay``."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.replay.generate import DAY_START, Day, JobInfo, generate_day, replicas_at
from benchmarks.replay.run import ReplayOptions, replay_engine
from benchmarks.replay.spec import WorkloadSpec, load_spec
from models.compiled import compile_scenario
from models.errors import InputError
from solver.simulate.events import (
    SubmitEvent,
)
from tests.replay_specs import (
    NEXT_SESSION,
    delete_job,
    hand_day,
    ordinary_images_spec,
    scale,
    short_spec,
    submit,
)

# --------------------------------------------------------------------------- spec


def test_a_good_spec_loads() -> None:
    spec = load_spec(short_spec(), "day.yaml")
    assert spec.sessions == 12
    assert spec.cluster.gc.policy().high_percent == 85


@pytest.mark.parametrize(("change", "field"), [
    ({"hours": 0}, "hours"),
    ({"session-minutes": 0}, "session-minutes"),
    ({"cluster": {"pools": [{"name": "sp", "family": "850", "nodes": 0}]}},
     "cluster.pools.0.nodes"),
    ({"cluster": {"pools": [{"name": "sp", "family": "860", "nodes": 8}]}},
     "cluster.pools.0.family"),
    ({"cluster": {"pools": [{"name": "a", "family": "850", "nodes": 16},
                            {"name": "b", "family": "950", "nodes": 64}]}}, "cluster"),
    ({"cluster": {"pools": [{"name": "o", "family": "ordinary", "nodes": 4}],
                  "gc": {"high-percent": 70, "low-percent": 80}}}, "cluster.gc"),
    ({"images": [{"name": "serve", "size-gb": -1}]}, "images.0.size-gb"),
    ({"services": [{"name": "chat", "image": "nope", "min-replicas": 1,
                    "max-replicas": 2}]}, "services.0.image"),
    ({"services": [{"name": "chat", "image": "serve", "min-replicas": 3,
                    "max-replicas": 2}]}, "services.0"),
    ({"training": [{"name": "t", "pool": "gpu", "images": ["train"]}]}, "training.0.pool"),
    ({"training": [{"name": "t", "pool": "sp", "images": ["train"],
                    "gang-nodes": {3: 1.0}}]}, "training.0.gang-nodes"),
    ({"training": [{"name": "t", "pool": "sp", "images": ["train"],
                    "gang-nodes": {16: 1.0}}]}, "training.0.gang-nodes"),
    ({"reclam": True}, "reclam"),
])
def test_bad_specs_are_refused_with_the_field_named(change: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as info:
        load_spec(short_spec(**change), "day.yaml")
    text = "\n".join(info.value.messages)
    assert text.startswith("day.yaml: field ")
    assert field in text, text


def test_a_spec_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(InputError, match=r"day\.yaml: expected a mapping"):
        load_spec([1, 2], "day.yaml")


# --------------------------------------------------------------------------- the day


def test_replica_curve_hand_computed() -> None:
    assert replicas_at(4, 12, [14], 14.0) == 12
    assert replicas_at(4, 12, [14], 2.0) == 4
    assert replicas_at(4, 12, [14], 8.0) == 8  # a quarter day away: halfway
    assert replicas_at(4, 12, [6, 18], 12.0) == 8  # between two peaks
    assert replicas_at(4, 12, [14], 14.0, noise=0.5) == 12  # kept within [min, max]
    assert replicas_at(4, 12, [14], 8.0, noise=0.25) == 10


def test_same_seed_same_day_and_another_seed_another_day() -> None:
    spec = load_spec(short_spec(), "day.yaml")
    first, again, other = generate_day(spec, 3), generate_day(spec, 3), generate_day(spec, 4)
    assert first.event_lines() == again.event_lines()
    assert first.event_lines() != other.event_lines()
    assert first.scenario == again.scenario


def test_the_day_has_each_kind_of_event() -> None:
    day = generate_day(load_spec(short_spec(), "day.yaml"), 0)
    text = "\n".join(day.event_lines())
    for needle in ("submit infer-chat", "submit train-llm-1", "scale infer-chat",
                   "health unhealthy", "health subhealthy", "fault)"):
        assert needle in text, needle
    assert len(day.sessions) == 12
    assert all(info.image in ("serve", "train") for info in day.jobs.values())


# --------------------------------------------------------------------------- the loop


def _known_day() -> Day:
    """Two 8-NPU nodes, 15 GB image disks, 10 GB images, every pull known in advance."""
    day = hand_day(ordinary_images_spec("known", nodes=2, disk_gb=15), [
        ("A on both nodes", (submit("A", 2),)),
        ("A scales down", (NEXT_SESSION, scale("A", 1))),
        ("B takes A's freed node", (NEXT_SESSION, submit("B", 1))),
        ("B ends, A scales up", (NEXT_SESSION, delete_job("B"), scale("A", 2))),
    ])
    day.jobs = {"A": JobInfo("A", "service", "a", 10, 0, 0, DAY_START),
                "B": JobInfo("B", "service", "b", 10, 0, 0, DAY_START)}
    return day


@pytest.mark.parametrize("engine", ["upstream", "rfc"])
def test_a_day_whose_every_pull_is_known(engine: str) -> None:
    run = replay_engine(_known_day(), engine, ReplayOptions(engines=(engine,)))
    rows = run.sessions
    # 1: A's two ranks pull a on both nodes
    assert (rows[0].placed_pods, rows[0].pulls, rows[0].pulled_gb) == (2, 2, 20.0)
    # 2: nothing to place
    assert (rows[1].placed_pods, rows[1].pulls) == (0, 0)
    # 3: B pulls b on the freed node; 20 GB > 85 % of 15: GC deletes a (unused there)
    assert (rows[2].placed_pods, rows[2].pulls, rows[2].gc_deleted) == (1, 1, 1)
    # 4: A's rank 1 returns to its node (the only free one, so with either engine): an
    # origin hit, yet it pulls a again, GC took it
    assert (rows[3].placed_pods, rows[3].pulls, rows[3].pulled_gb) == (1, 1, 10.0)
    assert rows[3].placed_candidates == 1
    assert rows[3].hits == 1
    assert run.total("pulls") == 4
    assert run.total("pull_minutes") == pytest.approx(8.0)  # 40 GB at 5 GB/min
    assert run.total("image_hits") == 0


def test_same_seed_same_replay_with_cpsat() -> None:
    spec = load_spec(short_spec(), "day.yaml")
    options = ReplayOptions(deterministic_time=0.2)
    first = replay_engine(generate_day(spec, 1), "cpsat", options)
    again = replay_engine(generate_day(spec, 1), "cpsat", options)
    assert [r.to_row() for r in first.sessions] == [r.to_row() for r in again.sessions]
    assert first.total("placed_pods") > 0


def test_bad_engine_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown engine"):
        ReplayOptions(engines=("fast",))


def test_spec_model_is_frozen() -> None:
    spec = load_spec(short_spec(), "day.yaml")
    assert isinstance(spec, WorkloadSpec)
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen error
        spec.hours = 3  # type: ignore[misc]


@pytest.mark.parametrize(("family", "nodes", "gangs"), [
    ("a3", 48, [1, 2, 4, 8, 16, 32]), ("850", 32, [1, 2, 4, 8]),
    ("950", 64, [1, 2, 4, 8, 16, 32, 64]), ("multilevel", 64, [1, 2, 4, 8, 16]),
    ("ordinary", 8, [1, 2, 4, 8])])
def test_generated_gangs_are_valid_jobs_of_every_family(family: str, nodes: int,
                                                        gangs: list[int]) -> None:
    spec = load_spec({
        "name": f"gangs-{family}", "hours": 1,
        "cluster": {"pools": [{"name": "p", "family": family, "nodes": nodes}]},
        "images": [{"name": "img", "size-gb": 20}],
        "training": [{"name": "t", "pool": "p", "images": ["img"], "initial": 3 * len(gangs),
                      "gang-nodes": {g: 1.0 for g in gangs}}]}, "gangs.yaml")
    day = generate_day(spec, 0)
    jobs = [e.job for e in day.sessions[0].events if isinstance(e, SubmitEvent)]
    assert {job.tasks for job in jobs} <= set(gangs) and len(jobs) == 3 * len(gangs)
    scenario = day.scenario.model_copy(update={"jobs": jobs})
    problem = compile_scenario(scenario, "gangs")  # raises InputError on an invalid job
    assert len(problem.jobs) == len(jobs)


def _image_day() -> Day:
    """Three nodes, 40 GB disks: B (image b) and A (image a) run and end; C (image a, no
    cache entry) arrives: with image locality it goes to A's old node, which holds a."""
    day = hand_day(ordinary_images_spec("images", nodes=3, disk_gb=40), [
        ("B then A", (submit("B", image={"name": "b"}), submit("A", image={"name": "a"}))),
        ("both end", (NEXT_SESSION, delete_job("A"), delete_job("B"))),
        ("C arrives", (NEXT_SESSION, submit("C", image={"name": "a"}))),
    ])
    day.jobs = {name: JobInfo(name, "service", image, 10, 0, 0, DAY_START)
                for name, image in (("A", "a"), ("B", "b"), ("C", "a"))}
    return day


@pytest.mark.parametrize(("engine", "pulls"), [("rfc", 0), ("cpsat", 0),
                                               ("rfc-no-image", 1), ("upstream", 1)])
def test_image_locality_saves_the_pull_of_a_rank_without_an_origin(engine: str,
                                                                  pulls: int) -> None:
    """Each session's scenario carries the nodes' images from the engine's stores: C has
    no previous node, and only the engines with image locality put it where ``a`` is
    (upstream's order, as released, takes the first node)."""
    run = replay_engine(_image_day(), engine, ReplayOptions(engines=(engine,),
                                                            deterministic_time=0.5))
    assert [r.placed_pods for r in run.sessions] == [2, 0, 1]
    assert run.sessions[0].pulls == 2
    assert run.sessions[2].pulls == pulls
    assert run.sessions[2].image_hits == 1 - pulls
