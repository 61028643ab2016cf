"""Workload specs shared by the replay tests."""

from __future__ import annotations

from typing import Any


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
