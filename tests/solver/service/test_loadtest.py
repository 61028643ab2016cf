"""The load test's client loop and report, against an in-process server (2 s, bounded),
and its ``--token-file`` against a protected one."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from benchmarks.loadtest import LoadReport, main, make_cases, run_load
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


TOKEN = "load-Token-0123456789abcdef"


def test_a_protected_service_is_load_tested_with_its_token_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--token-file``: the burst mode is answered with the token, refused (exit 2, a
    message, no traceback) without it or with another; the load loop's plans and stored
    clusters carry it too.  Bounded: 2 requests per burst, 2 s and 12 requests of load."""
    good = tmp_path / "token"
    good.write_text(TOKEN + "\n")
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-token\n")
    empty = tmp_path / "empty"
    empty.write_text("")
    config = ServiceConfig(warmup=False, workers=1, queue=2, token=TOKEN)
    with running_server(config) as (url, service):
        burst = ["burst", "--url", url, "--requests", "2", "--time-limit", "0.5",
                 "--rounds", "1"]
        assert main([*burst, "--token-file", str(good)]) == 0
        out = capsys.readouterr()
        summary = json.loads(out.out[out.out.index("{"):])
        # one worker: the second plan may be refused with 503 (admission), never a 401
        assert summary["ok"] >= 1 and summary["errors"] == 0, summary
        assert summary["ok"] + summary["rejected-503"] == 2, summary
        assert summary["answers-invalid"] == 0
        assert TOKEN not in out.out + out.err  # the report never shows the token

        assert main(burst) == 2
        assert "refused the request (401): no --token-file given" in capsys.readouterr().err
        assert main([*burst, "--token-file", str(wrong)]) == 2
        err = capsys.readouterr().err
        assert f"--token-file {wrong}: not the service's token" in err
        assert "Traceback" not in err
        assert main([*burst, "--token-file", str(empty)]) == 2
        assert f"--token-file {empty}: the file is empty" in capsys.readouterr().err

        report = LoadReport(args={})
        asyncio.run(run_load(url, make_cases(["850"], [64], seed=1), clients=2,
                             duration=2.0, limits=[0.3], max_requests=12, check_every=1,
                             stateful_share=0.5, seed=1, report=report, token=TOKEN))
        loaded = report.summary()
        assert 0 < loaded["requests"] <= 12
        assert loaded["errors"] == 0 and loaded["stateful-plans"] > 0, loaded
        assert service.pool.clusters  # the stateful client's PUT carried the token
