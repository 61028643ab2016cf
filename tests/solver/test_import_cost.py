"""A ``plan`` process does not import pandas: OR-Tools' ``cp_model`` imports it only for
helpers npu-place never calls, and it was the largest part of a process's start.  Nor does
a solve import anything after ``preload``: imports inside the budget cost its first call
tens of milliseconds."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import sys
from pathlib import Path
from models.io import load_scenario
from solver.doors import example_path
from solver.facade import preload, solve
from solver.cli.main import main
preload("auto")
loaded = []
for name in ("multilevel", "superpod-850", "rack-950", "ordinary-8npu"):
    scenario = load_scenario(example_path(name))
    before = set(sys.modules)
    solve(scenario, engine="auto", time_limit=60, deterministic_time=0.01)
    loaded += sorted(set(sys.modules) - before)
print(loaded)
from ortools.sat.python import cp_model
model = cp_model.CpModel()
x = model.new_int_var(0, 3, "x")
model.maximize(x)
solver = cp_model.CpSolver()
assert solver.solve(model) == cp_model.OPTIMAL and solver.value(x) == 3
main(["plan", "--example", "superpod-850", "--time-limit", "2", "--format", "json",
      "--output", sys.argv[1]])
print("pandas" in sys.modules)
"""


@pytest.fixture(scope="module")
def plan_process(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The lines the script prints: the modules its solves imported, then whether pandas
    was imported."""
    answer = tmp_path_factory.mktemp("plan") / "answer.json"
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(answer)],
                         capture_output=True, text=True, timeout=120, check=True)
    lines = out.stdout.strip().splitlines()
    assert len(lines) >= 2, out.stdout + out.stderr
    return lines


def test_a_plan_process_imports_no_pandas(plan_process: list[str]) -> None:
    assert plan_process[-1] == "False"


def test_a_search_imports_nothing_after_preload(plan_process: list[str]) -> None:
    """Every module a solve of each family loads was imported by ``preload``, before the
    budget starts (the multilevel origin-first passes and ``numpy.ma``, which
    ``np.unique`` imports, were imported in the budget of a process's first solve)."""
    assert plan_process[-2] == "[]"


def test_pandas_imported_afterwards_is_the_real_package() -> None:
    script = ("import solver.facade\nfrom ortools.sat.python import cp_model\n"
              "import pandas\nprint(int(pandas.Series([1, 2]).sum()))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "3", out.stdout + out.stderr

