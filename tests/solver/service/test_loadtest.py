"""The load test's client loop and report, against an in-process server (2 s, bounded)."""

from __future__ import annotations

import asyncio

from benchmarks.loadtest import LoadReport, make_cases, run_load
from solver.service.app import ServiceConfig
from tests.solver.service.conftest import running_server


def test_load_loop_reports_every_request() -> None:
    cases = make_cases(["850", "ordinary"], [64], seed=1)
    report = LoadReport(args={})
    with running_server(ServiceConfig(warmup=False, workers=2, queue=2)) as (url, _):
        keep = asyncio.run(run_load(url, cases, clients=2, duration=2.0, limits=[0.3],
                                    max_requests=40, check_every=1, stateful_share=0.5,
                                    seed=1, report=report))
    summary = report.summary()
    assert 0 < summary["requests"] <= 40
    assert summary["errors"] == 0
    assert summary["ok"] + summary["rejected-503"] == summary["requests"]
    assert summary["stateful-plans"] > 0 and summary["patch-p50"] is not None
    assert keep  # answers kept for the validator
    assert summary["throughput-rps"] > 0
