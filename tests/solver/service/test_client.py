"""The Python clients: a path is read (never sent as the body), the async client plans."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from models.check import check
from models.compiled import compile_scenario
from models.errors import InputError
from models.io import load_scenario
from solver.doors import example_path
from solver.service.client import AsyncPlanClient, PlanClient


def test_plan_reads_a_scenario_path(client: PlanClient) -> None:
    path = example_path("superpod-850")
    answer = client.plan(str(path), engine="greedy")
    assert check(compile_scenario(load_scenario(path)), answer) == []
    assert client.plan(path, engine="greedy").jobs == answer.jobs  # a Path too
    assert client.validate(path)["valid"] is True


def test_a_missing_or_non_mapping_path_fails_before_sending(client: PlanClient,
                                                            tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the file"):
        client.plan(str(tmp_path / "missing.yaml"))
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n", encoding="utf-8")
    with pytest.raises(InputError, match="a scenario file holds a mapping"):
        client.plan(listing)
    with pytest.raises(TypeError, match="a scenario is"):
        client.plan(42)  # type: ignore[arg-type]


def test_the_async_client_plans(server: tuple[str, Any]) -> None:
    path = example_path("superpod-850")

    async def run() -> Any:
        api = AsyncPlanClient(server[0])
        try:
            return await api.plan(path, engine="greedy")
        finally:
            await api.aclose()

    answer = asyncio.run(run())
    assert check(compile_scenario(load_scenario(path)), answer) == []
    assert all(job.placed for job in answer.jobs)
