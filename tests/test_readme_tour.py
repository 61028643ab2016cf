"""The README's tour, run as written: each code block of "What-if planning", "Regression
suite" and "In a scheduler daemon" goes to ``bash`` line for line in an empty folder, with
nothing but the installed ``npu-place`` (every file the tour reads ships with it:
``npu-place examples --copy``), and its output must show what the README says it shows:
CP-SAT bringing back more ranks than greedy, imported ranks returning to their nodes, a
sweep, a replayed day, and a daemon that becomes ready, stores a cluster, plans and stops.

Two things are not literal, and both are stated here: the daemon's port is a free one
instead of 8080 (a fixed port collides with other tests on the machine), and the quick
regression suite's line is not run here, because CI runs that very command (``.ci/run``;
a test below keeps the two the same).  Every block runs under a time bound, and the
daemon is killed with its process group whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: The longest a block may take (seconds; the what-if block takes about 1 min under load).
BLOCK_TIMEOUT = 420
#: The quick suite's line, which CI runs (not this test).
QUICK_SUITE = 'npu-place compare --suite quick --baseline benchmarks/baseline/quick.json'

pytestmark = pytest.mark.slow


def section_block(title: str) -> str:
    """The first code block under the README's heading ``## title``."""
    text = README.read_text(encoding="utf-8")
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```\n(.*?)```", section, re.DOTALL)
    assert match, f"README: no code block under '## {title}'"
    return match.group(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def run_block(script: str, cwd: Path) -> str:
    """Run ``script`` with ``bash -e`` in ``cwd``; its stdout and stderr together.

    The installed ``npu-place`` (beside this interpreter) comes first on ``PATH``.  On a
    time-out the whole process group (a server started with ``&`` too) is killed.
    """
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}"
                                f"{os.environ.get('PATH', '')}",
               COLUMNS="200")
    proc = subprocess.Popen(["bash", "-e", "-c", script], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=BLOCK_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"the block did not finish in {BLOCK_TIMEOUT} s:\n{out[-3000:]}")
    finally:
        with contextlib.suppress(ProcessLookupError):  # a server the block did not stop
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{out[-3000:]}"
    return out


def _rows(out: str, scenario: str) -> dict[str, list[str]]:
    """The ``compare`` table's rows of ``scenario``: engine -> cells."""
    rows = {}
    for line in out.splitlines():
        cells = line.split()
        if len(cells) > 5 and cells[0] == scenario and cells[1] in ("greedy", "cpsat"):
            rows[cells[1]] = cells
    return rows


def test_the_tour_of_what_if_planning_and_regressions_shows_what_it_says(
        tmp_path: Path) -> None:
    regression = section_block("Regression suite").splitlines()
    assert regression[0].startswith(QUICK_SUITE)
    script = section_block("What-if planning") + "\n".join(regression[1:]) + "\n"
    out = run_block(script, tmp_path)
    # the first example: CP-SAT brings back more ranks than greedy, and proves it optimal
    rack = _rows(out, "example:rack-950")
    assert rack["greedy"][4] == "9/16" and rack["cpsat"][4] == "13/16", out
    assert rack["cpsat"][2] == "optimal"
    # the imported dumps (with --now): ranks return to their nodes
    imported = _rows(out, "cluster.yaml")
    assert imported["greedy"][4] == "6/7" and imported["cpsat"][4] == "6/7", out
    assert "warning(s)" in out and "stale" not in out
    assert re.search(r"^\s+total\s+.*%", out, re.MULTILINE), "simulate's total row"
    for made in ("sweep-out/results.csv", "sweep-again/results.csv", "day/summary.csv"):
        assert (tmp_path / made).is_file(), made
    assert "no regression" in out.lower() or "ok" in out.lower()


def test_the_daemon_tour_starts_waits_plans_and_stops(tmp_path: Path) -> None:
    block = section_block("In a scheduler daemon")
    assert block.count("8080") >= 4
    script = block.replace("8080", str(_free_port()))
    # after the block's ``kill``: the server's own exit status (0 when it drained and stopped)
    out = run_block(script + 'set +e\nwait "$SERVE"\necho "stopped: $?"\n', tmp_path)
    assert '"version":1' in out.replace(" ", ""), out[-2000:]
    assert '"placement"' in out or '"jobs"' in out, out[-2000:]
    assert "stopped: 0" in out


def test_ci_runs_the_readmes_quick_suite_line() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    line = section_block("Regression suite").splitlines()[0]
    assert line in ci, "the README's regression command differs from the one CI runs"
