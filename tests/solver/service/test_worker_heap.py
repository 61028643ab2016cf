"""The worker's heap after a PUT: garbage reclaimed, the rest frozen."""

from __future__ import annotations

import gc
import json
import weakref
from typing import Any

from benchmarks.generators import GenParams, generate
from solver.service.messages import PutCluster, Reply
from solver.service.worker import DEFAULT_SOLVE, Worker


class _Recorder:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    def send(self, message: Any) -> None:
        self.messages.append(message)


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_put_reclaims_frozen_cyclic_garbage_and_freezes_what_is_alive() -> None:
    body = json.dumps(generate(GenParams("950", nodes=64, seed=3, jobs=2)).to_dict()).encode()
    recorder = _Recorder()
    worker = Worker(recorder, DEFAULT_SOLVE)  # type: ignore[arg-type]
    cycle = _Cycle()
    gone = weakref.ref(cycle)
    try:
        gc.freeze()  # the cycle is frozen: no collection would reclaim it ...
        del cycle
        gc.collect()
        assert gone() is not None
        worker.handle(1, PutCluster("c", body, 1))  # ... but a PUT's does
        assert gone() is None
        assert gc.get_freeze_count() > 0  # what is alive (the stored cluster) is frozen
        assert isinstance(recorder.messages[-1], Reply)
        stored = worker.clusters.get("c")
        assert stored is not None and stored.snapshot.problem.num_nodes == 64
    finally:
        gc.unfreeze()
