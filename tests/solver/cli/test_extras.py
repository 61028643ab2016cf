"""The doors are extras: a door used without its extra stops with one line and exit 2.

``pip install .`` installs what ``plan`` needs; the service, the kube client, Dask and
matplotlib come with ``npu-place[serve]``, ``[kube]``, ``[sweep]``, ``[plot]`` (or
``[all]``).  A missing module is simulated with ``sys.modules[name] = None``, which makes
both ``import name`` and ``importlib.util.find_spec(name)`` fail as in an install without
it.
"""

from __future__ import annotations

import io
import re
import sys
import tomllib
from pathlib import Path

import pytest

from solver.cli import main
from solver.doors import EXTRAS, example_path, missing_extra_module, require_extra

ROOT = Path(__file__).resolve().parents[3]


def _without(monkeypatch: pytest.MonkeyPatch, *extras: str) -> None:
    """Make every module of ``extras`` unimportable for the rest of the test."""
    for extra in extras:
        for module in EXTRAS[extra]:
            monkeypatch.setitem(sys.modules, module, None)


def _run(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(argv, out, err), err.getvalue()


#: Each door, the extra it needs and a command line that uses it; the command stops before
#: it reads a file, so the paths need not exist.
DOORS = [
    ("serve", ["serve", "--port", "0"]),
    ("kube", ["import", "--kubeconfig", "missing-kubeconfig"]),
    ("kube", ["import", "--in-cluster"]),
    ("sweep", ["sweep", "missing-grid.yaml"]),
    ("sweep", ["bench", "--suite", "quick", "--out", "missing-out"]),
    ("sweep", ["compare", "--suite", "quick"]),
    ("sweep", ["replay", "--example", "sharing-850", "--seeds", "0-1", "--no-plots"]),
    ("plot", ["simulate", "missing.yaml", "missing.events.yaml", "--plot", "p.png"]),
]


@pytest.mark.parametrize(("extra", "argv"), DOORS, ids=[" ".join(a[:2]) for _, a in DOORS])
def test_a_door_without_its_extra_names_the_extra_in_one_line_and_exits_2(
        monkeypatch: pytest.MonkeyPatch, extra: str, argv: list[str]) -> None:
    _without(monkeypatch, extra)
    code, err = _run(argv)
    assert code == 2
    assert err.count("\n") == 1, err
    assert f"needs the '{extra}' extra" in err
    assert f"pip install 'npu-place[{extra}]'" in err
    assert f"npu-place {argv[0]}" in err


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_the_check_passes_when_the_extra_is_installed(extra: str) -> None:
    """The test extra installs every door (``npu-place[all]``), so nothing is missing."""
    assert missing_extra_module(extra) is None
    require_extra(extra, "npu-place something")  # does not raise


def test_the_first_missing_module_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    assert missing_extra_module("serve") == "uvicorn"


def test_plan_validate_examples_and_schema_need_no_extra(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _without(monkeypatch, *EXTRAS)
    example = str(example_path("superpod-850"))
    for argv in (["plan", "--engine", "greedy"], ["validate", example], ["examples"],
                 ["schema"]):
        code, err = _run(argv)
        assert code == 0, (argv, err)


def test_simulate_without_plot_needs_no_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _without(monkeypatch, *EXTRAS)
    scenario = example_path("rfc-inference-training")
    events = scenario.with_name("rfc-inference-training.events.yaml")
    code, err = _run(["simulate", str(scenario), str(events), "--engine", "greedy"])
    assert code == 0, err


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower().replace("_", "-")
            for r in requirements}


#: The distribution that brings each module of :data:`EXTRAS`.
DISTRIBUTION = {"fastapi": "fastapi", "uvicorn": "uvicorn", "prometheus_client":
                "prometheus-client", "httpx": "httpx", "kubernetes": "kubernetes",
                "dask": "dask", "distributed": "dask", "matplotlib": "matplotlib"}


def test_pyproject_core_has_no_door_and_each_extra_brings_its_modules() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = _requirement_names(project["dependencies"])
    extras = project["optional-dependencies"]
    assert set(DISTRIBUTION) == {m for modules in EXTRAS.values() for m in modules}
    for extra, modules in EXTRAS.items():
        brought = _requirement_names(extras[extra])
        for module in modules:
            assert DISTRIBUTION[module] in brought, (extra, module)
            assert DISTRIBUTION[module] not in core, module
    assert "dask[distributed]>=2024.4" in extras["sweep"]  # distributed comes with dask's extra
    assert extras["all"] == [f"npu-place[{','.join(EXTRAS)}]"]
    assert "npu-place[all]" in extras["test"]
