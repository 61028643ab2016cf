"""A worker whose serving process closed the pipe ends quietly (no traceback, no error log)."""

from __future__ import annotations

import json
import logging
from multiprocessing import Pipe

import pytest

from solver.doors import example_path
from solver.service.messages import Call, Reply, ValidateRequest
from solver.service.worker import DEFAULT_SOLVE, PipeClosed, Worker


def test_a_closed_pipe_ends_the_worker_without_a_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    parent, child = Pipe()
    scenario = example_path("superpod-850").read_text(encoding="utf-8")
    parent.send(Call(1, ValidateRequest(
        json.dumps({"scenario": {"nodes": [], "jobs": []}}).encode())))
    parent.send(Call(2, ValidateRequest(scenario.encode())))
    parent.close()  # the serving process is gone before the answers are sent
    worker = Worker(child, DEFAULT_SOLVE)
    with caplog.at_level(logging.DEBUG, logger="npu_place"):
        worker.run()  # returns; before, BrokenPipeError escaped twice with tracebacks
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("closed the pipe" in r.getMessage() for r in caplog.records)
    with pytest.raises(PipeClosed):
        worker.send(Reply(3, {}))
