"""A ``plan`` process does not import pandas: OR-Tools' ``cp_model`` imports it only for
helpers npu-place never calls, and it was the largest part of a process's start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys
from pathlib import Path
from solver.facade import solve
from solver.cli.main import main
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


def test_a_plan_process_imports_no_pandas(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "answer.json")],
                         capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout + out.stderr


def test_pandas_imported_afterwards_is_the_real_package() -> None:
    script = ("import solver.facade\nfrom ortools.sat.python import cp_model\n"
              "import pandas\nprint(int(pandas.Series([1, 2]).sum()))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "3", out.stdout + out.stderr
