"""The command line refuses hostile arguments and files with exit 2."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from models.limits import MAX_ERRORS_SHOWN
from solver.cli import main
from tests.models.builders import entry, job, node, scenario, write


def run(*argv: str) -> tuple[int, str, str]:
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def small_file(tmp_path: Path) -> Path:
    return write(tmp_path / "small.yaml", scenario([node("n0"), node("n1")], [job("a")]))


#: Every subcommand with engine options, with positional arguments that parse.
COMMANDS = {
    "plan": ["plan", "--engine", "greedy"],
    "compare": ["compare", "x.yaml"],
    "simulate": ["simulate", "x.yaml", "e.yaml", "--engine", "greedy"],
    "bench": ["bench", "--suite", "quick"],
}

BAD_OPTIONS = [
    (["--time-limit", "inf"], "finite"),
    (["--time-limit", "1e300"], "at most 604800 seconds"),
    (["--time-limit", "604801"], "at most 604800 seconds"),
    (["--time-limit", "nan"], "finite"),
    (["--time-limit", "0"], "must be > 0"),
    (["--time-limit", "-3"], "must be > 0"),
    (["--time-limit", "soon"], "expected a number"),
    (["--seed", "2147483648"], "32-bit"),
    (["--seed", "-1"], "between 0 and 2147483647"),
    (["--seed", "1.5"], "expected an integer"),
    (["--workers", "100000"], "between 1 and 64"),
    (["--workers", "0"], "between 1 and 64"),
    (["--deterministic-time", "inf"], "finite"),
    (["--deterministic-time", "nan"], "finite"),
    (["--deterministic-time", "1e30"], "at most 604800"),
    (["--deterministic-time", "0"], "must be > 0"),
]


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(("option", "words"), BAD_OPTIONS)
def test_numeric_options_are_checked_up_front(command: str, option: list[str],
                                              words: str) -> None:
    """Before: inf/1e300 aborted (rc 134), nan skipped CP-SAT with exit 0, a 2^31 seed was
    an internal TypeError, 100000 workers gave "BUG: MODEL_INVALID" with exit 0."""
    code, out, err = run(*COMMANDS[command], *option)
    assert code == 2 and out == ""
    assert f"argument {option[0]}: " in err and words in err
    assert "internal error" not in err and "Traceback" not in err


@pytest.mark.parametrize(("option", "words"), [
    (["--port", "99999"], "between 0 and 65535"),
    (["--port", "http"], "expected an integer"),
    (["--workers", "100000"], "between 1 and 64"),
    (["--queue", "-1"], "between 0 and 1024"),
    (["--max-body-mb", "1e300"], "between 0.001 and 1024"),
    (["--max-body-mb", "nan"], "finite"),
    (["--default-time-limit", "inf"], "finite"),
    (["--default-time-limit", "0"], "must be > 0"),
    (["--max-clusters", "0"], "between 1 and 1024"),
    (["--recycle-after", "-5"], "between 0 and 1e+09"),
])
def test_serve_options_are_checked_before_anything_starts(option: list[str],
                                                          words: str) -> None:
    """Before: --port 99999 was an internal OverflowError after start-up, --workers 100000
    started forking, a negative queue or recycle count was accepted."""
    code, out, err = run("serve", *option)
    assert code == 2 and out == ""
    assert f"argument {option[0]}: " in err and words in err
    assert "internal error" not in err and "Traceback" not in err


@pytest.mark.parametrize("weights", ['{"fragment": 1e30}', '{"placed": -1}',
                                     '{"origin-hit": 3000000000}', '{"fragment": 1.5}',
                                     '{"fragment": NaN}', "[1]"])
@pytest.mark.parametrize("command", ["plan", "compare"])
def test_weights_out_of_range_are_refused(command: str, weights: str) -> None:
    """Before: a 1e30 coefficient was an internal error."""
    code, out, err = run(*COMMANDS[command], "--weights", weights)
    assert code == 2 and out == ""
    assert "argument --weights: " in err and "internal error" not in err


def test_weights_too_large_for_the_scenario_are_refused(small_file: Path) -> None:
    code, out, err = run("plan", str(small_file), "--engine", "greedy", "--weights",
                         '{"placed": 2147483647, "origin-hit": 2147483647}')
    assert code == 2 and out == ""
    assert "error: --weights: " in err and "above 2^31" in err


def test_extreme_but_valid_options_are_accepted(small_file: Path) -> None:
    code, out, err = run("plan", str(small_file), "--engine", "greedy", "--seed",
                         "2147483647", "--workers", "64", "--time-limit", "604800",
                         "--deterministic-time", "604800", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["seed"] == 2147483647
    code, _, err = run("plan", str(small_file), "--engine", "greedy", "--seed", "0")
    assert code == 0, err


def test_cpsat_runs_with_the_largest_seed(small_file: Path) -> None:
    code, out, err = run("plan", str(small_file), "--engine", "cpsat", "--seed", "2147483647",
                         "--time-limit", "5", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["status"] in ("optimal", "feasible", "greedy")


# --------------------------------------------------------------------------- files


def test_hostile_files_exit_2_for_every_command(tmp_path: Path, small_file: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    events = tmp_path / "events.yaml"
    events.write_text("- []\n")
    for argv in (["validate", str(deep)], ["plan", str(deep), "--engine", "greedy"],
                 ["compare", str(deep)], ["simulate", str(deep), str(events)],
                 ["simulate", str(small_file), str(deep)],
                 ["validate", str(small_file), str(deep)]):
        code, _, err = run(*argv)
        assert code == 2, (argv, err)
        assert f"error: {deep}: the document is nested deeper than" in err
        assert "internal error" not in err


def test_error_listing_is_capped(tmp_path: Path) -> None:
    """Before: one line per error (999,999 lines for 10^6 bad fault ranks)."""
    bad = write(tmp_path / "bad.yaml", scenario([node(f"n{i}", free=99) for i in range(120)]))
    code, _, err = run("validate", str(bad))
    assert code == 2
    lines = err.splitlines()
    assert sum(line.startswith("error: ") for line in lines) == MAX_ERRORS_SHOWN
    assert f"... and {120 - MAX_ERRORS_SHOWN} more error(s) not shown" in lines
    assert lines[-1] == "120 input error(s); the input is not valid"


def test_control_characters_never_reach_the_terminal(tmp_path: Path) -> None:
    bad = tmp_path / "ansi.json"
    data = scenario([node("n0\x1b[2J")], [job("a\x1b]0;pwned\x07")])
    bad.write_text(json.dumps(data))
    code, out, err = run("plan", str(bad), "--engine", "greedy")
    assert code == 2 and out == ""
    assert "\x1b" not in err and "\x07" not in err
    assert "\\x1b[2J" in err


def test_examples_are_looked_up_by_name_only() -> None:
    code, out, err = run("examples", "../examples/superpod-850")
    assert code == 2 and out == ""
    assert "no bundled example named" in err


# --------------------------------------------------------------------------- TTL


def test_plan_notes_cache_owners_older_than_the_ttl(tmp_path: Path) -> None:
    now = 1_000_000
    data = scenario([node("n0"), node("n1")],
                    [job("a", owner_uid="old"), job("b", owner_uid="new")],
                    cache=[entry("old", 0, "n1", updated=now - 101),
                           entry("new", 0, "n0", updated=now - 100)], ttl=100, now=now)
    path = write(tmp_path / "ttl.yaml", data)
    code, out, err = run("plan", str(path), "--engine", "greedy", "--format", "json")
    assert code == 0, err
    placement = json.loads(out)
    jobs = {j["name"]: j for j in placement["jobs"]}
    assert jobs["a"]["origin-candidates"] == 0  # expired: not a candidate
    assert jobs["b"]["origin-candidates"] == 1
    (note,) = [n for n in placement["notes"] if n.startswith("affinity cache:")]
    assert "the entries of 1 owner(s) (old)" in note and "simulate evicts them" in note
    code, out, _ = run("plan", str(path), "--engine", "greedy")
    assert "note: affinity cache: the entries of 1 owner(s) (old)" in out
