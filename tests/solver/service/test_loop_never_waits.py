"""The serving process's event loop never waits on a worker process.

A ``POST /v1/plan?time-limit=1`` answered 503 82 ms after its limit while both workers
were busy with abandoned 6.7 MB requests.  The time went into two waits on the event loop:
writing a queued request's body into a worker's pipe (``conn.send`` returns only when the
worker, niced and on a loaded machine, has read it: 30-500 ms measured for 6.7 MB), and
starting a replacement worker after a kill (the forkserver start: 25-95 ms).  Every
deadline of the serving process (withdrawing a queued plan, the reply cut-off) waited
behind them.  Both now happen in the worker's own threads.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import httpx

from solver.service.app import ServiceConfig
from tests.solver.service.conftest import body, generated, running_server


def test_a_worker_that_does_not_read_its_pipe_never_stalls_the_loop() -> None:
    """A stopped worker (as a niced worker on a saturated machine, only forever) is sent a
    body larger than a pipe's buffer: health checks still answer, and the plan gets its
    503 at its deadline."""
    config = ServiceConfig(warmup=False, workers=1, queue=4, kill_grace=0.5)
    content = body(generated("850", 4096, 8))
    assert len(content) > 4 * 65536  # more than the pipe holds: a write must wait
    with running_server(config) as (url, service), httpx.Client(base_url=url,
                                                                timeout=10) as http:
        worker = service.pool.workers[0]
        os.kill(worker.process.pid, signal.SIGSTOP)
        answers: dict[str, Any] = {}
        try:
            def plan() -> None:
                with httpx.Client(base_url=url, timeout=30) as own:
                    answers["plan"] = own.post(
                        "/v1/plan", content=content, params={"time-limit": 2},
                        headers={"content-type": "application/json"}).status_code

            thread = threading.Thread(target=plan)
            thread.start()
            deadline = time.monotonic() + 30
            while worker.current is None:  # dispatched: its body is on its way
                assert time.monotonic() < deadline, "the plan was never dispatched"
                time.sleep(0.01)
            try:
                answers["healthz"] = http.get("/healthz").status_code
            except httpx.TimeoutException:
                answers["healthz"] = "no answer within 10 s: the loop waits on the pipe"
            thread.join(30)
        finally:
            os.kill(worker.process.pid, signal.SIGCONT)
        assert answers == {"healthz": 200, "plan": 503}, answers
