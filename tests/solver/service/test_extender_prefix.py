"""The extender's prefix leaves the service's own routes alone, and its path token never
leaks through a redirect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from solver.cli import main
from solver.service.app import ServiceConfig, create_app
from solver.service.extender import ExtenderConfig
from solver.service.extender.config import PrefixOverlap, check_prefix
from tests.solver.service.conftest import running_server

OVERLAPS = [
    ("/v1", "/v1/plan"),
    ("/v1/clusters", "/v1/clusters/{name}"),
    ("/v1/clusters/x/plan", "/v1/clusters/{name}"),
    ("/healthz", "/healthz"),
    ("/readyz", "/readyz"),
    ("/metrics", "/metrics"),
    ("/docs", "/docs"),
    ("/volcano/../v1", "/v1/plan"),
    ("/volcano/../healthz", "/healthz"),
]


@pytest.mark.parametrize(("prefix", "route"), OVERLAPS)
def test_serve_refuses_a_prefix_over_a_route(prefix: str, route: str, capsys: Any,
                                             tmp_path: Path) -> None:
    code = main(["serve", "--port", "0", "--extender", "--extender-cluster", "c1",
                 "--extender-prefix", prefix])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"--extender-prefix {prefix}" in err and f"route {route}" in err, err
    assert "Traceback" not in err


def test_the_service_refuses_it_too() -> None:
    with pytest.raises(PrefixOverlap, match="overlaps the service's route /metrics"):
        create_app(ServiceConfig(warmup=False, extender=ExtenderConfig(
            prefix="/metrics", cluster="c1")))


def test_prefixes_of_their_own_are_accepted() -> None:
    routes = ["/v1/plan", "/v1/clusters/{name}", "/healthz", "/metrics", "/docs"]
    for prefix in ("/volcano", "/v1x", "/metrics2", "/ext/volcano", "/volcano/v1"):
        check_prefix(prefix, routes)
    with pytest.raises(PrefixOverlap, match=r"not a normalised path.*did you mean /volcano"):
        check_prefix("/x/../volcano", routes)
    create_app(ServiceConfig(warmup=False, extender=ExtenderConfig(
        prefix="/volcano-x", cluster="c1")))


def test_a_trailing_slash_never_redirects_to_the_tokenless_path() -> None:
    config = ServiceConfig(warmup=False, token="s3cret-token",
                           extender=ExtenderConfig(cluster="c1", engine="greedy"))
    with running_server(config) as (url, _), httpx.Client(timeout=30) as client:
        base = f"{url}/volcano/s3cret-token"
        assert client.get(f"{base}/sessions").status_code == 200
        for path in ("/sessions/", "/prioritize/", "/onSessionClose/"):
            answer = client.request("GET" if path == "/sessions/" else "POST", base + path,
                                    content=None if path == "/sessions/" else b"{}")
            assert answer.status_code == 404, (path, answer.status_code)
            assert "location" not in answer.headers
        # the service's own routes keep theirs (behind the bearer check)
        headers = {"Authorization": "Bearer s3cret-token"}
        assert client.get(f"{url}/healthz").status_code == 200
        assert client.get(f"{url}/v1/clusters/c1", headers=headers).status_code == 404
