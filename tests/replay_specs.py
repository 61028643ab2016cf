"""Workload specs and hand-made days shared by the replay tests."""

from __future__ import annotations

from typing import Any

from benchmarks.replay.generate import Day, generate_day
from benchmarks.replay.spec import load_spec
from solver.simulate.events import (
    AdvanceEvent,
    DeleteJobEvent,
    Event,
    ScaleEvent,
    SessionSpec,
    SubmitEvent,
)

#: The seconds from one session to the next in the hand-made days (10-minute sessions).
SESSION_SECONDS = 600

#: The advance that opens every hand-made session after the first.
NEXT_SESSION = AdvanceEvent.model_validate({"advance": SESSION_SECONDS})


def short_spec(**changes: Any) -> dict[str, Any]:
    """A two-hour day on a small 850 + ordinary cluster (CI-sized)."""
    data: dict[str, Any] = {
        "name": "short",
        "hours": 2,
        "session-minutes": 10,
        "cluster": {"pools": [{"name": "sp", "family": "850", "nodes": 16, "pod-nodes": 16},
                              {"name": "ord", "family": "ordinary", "nodes": 4}],
                    "image-disk-gb": 60},
        "images": [{"name": "serve", "size-gb": 20}, {"name": "train", "size-gb": 30}],
        "services": [{"name": "chat", "image": "serve", "min-replicas": 2,
                      "max-replicas": 8, "peak-hours": [1], "jitter": 0.2}],
        "training": [{"name": "llm", "pool": "sp", "images": ["train"], "initial": 3,
                      "arrivals-per-hour": 2, "gang-nodes": {1: 1, 2: 1, 4: 1},
                      "duration-minutes": {"median": 40, "sigma": 0.5, "min": 10,
                                           "max": 120}}],
        "faults": {"node-fault-rate": 2, "subhealth-rate": 2, "pod-fault-rate": 1},
    }
    data.update(changes)
    return data


def ordinary_images_spec(name: str, nodes: int, disk_gb: int) -> dict[str, Any]:
    """An hour of 10-minute sessions on ``nodes`` ordinary nodes with ``disk_gb`` image
    disks pulling 5 GB a minute; images ``a`` and ``b`` of 10 GB; no workload of its own
    (the hand-made days add theirs)."""
    return {"name": name, "hours": 1, "session-minutes": 10,
            "cluster": {"pools": [{"name": "o", "family": "ordinary", "nodes": nodes}],
                        "image-disk-gb": disk_gb, "pull-gb-per-minute": 5},
            "images": [{"name": "a", "size-gb": 10}, {"name": "b", "size-gb": 10}]}


def submit(name: str, tasks: int = 1, **extra: Any) -> SubmitEvent:
    """Submit ``name`` (owner ``rs-NAME``): ``tasks`` whole 8-NPU nodes, a 10 GB image;
    ``extra`` keys are added to the job as given (e.g. ``image``)."""
    return SubmitEvent.model_validate({"submit": {
        "name": name, "owner-uid": f"rs-{name}", "policy": "chip8-node8", "tasks": tasks,
        "npu-per-task": 8, "image-size-gb": 10, **extra}})


def scale(name: str, tasks: int) -> ScaleEvent:
    """Scale job ``name`` to ``tasks`` replicas."""
    return ScaleEvent.model_validate({"scale": name, "tasks": tasks})


def delete_job(name: str) -> DeleteJobEvent:
    """Delete job ``name``."""
    return DeleteJobEvent.model_validate({"delete-job": name})


def hand_day(spec: dict[str, Any], sessions: list[tuple[str, tuple[Event, ...]]]) -> Day:
    """The day ``spec`` generates (seed 0) with its sessions replaced by ``sessions``
    (name, events), one every :data:`SESSION_SECONDS`."""
    day = generate_day(load_spec(spec, f"{spec['name']}.yaml"), 0)
    day.sessions = [SessionSpec(k, name, events) for k, (name, events) in
                    enumerate(sessions, start=1)]
    day.elapsed = [SESSION_SECONDS * k for k in range(len(sessions))]
    return day
