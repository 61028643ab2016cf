"""Small things a new user trips on: --version, option typos, compare --example,
the closing line after input errors, upstream's misspelt text quoted, not repeated."""

from __future__ import annotations

import io
from importlib import metadata
from pathlib import Path

import pytest

from solver.cli import main
from solver.doors import example_path
from tests.models.builders import job, node, scenario, write


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run("--version")
    assert code == 0
    assert capsys.readouterr().out == f"npu-place {metadata.version('npu-place')}\n"


@pytest.mark.parametrize(("argv", "usage", "hint"), [
    (("plan", "--time-limt", "3"), "usage: npu-place plan", "did you mean --time-limit?"),
    (("sweep", "g.yaml", "--basline", "x.csv"), "usage: npu-place sweep",
     "did you mean --baseline?"),
    (("validate", "s.yaml", "--formt=json"), "usage: npu-place validate",
     "did you mean --format?"),
])
def test_an_option_typo_shows_the_subcommand_usage_and_the_closest_option(
        argv: tuple[str, ...], usage: str, hint: str) -> None:
    code, out, err = run(*argv)
    assert code == 2 and out == ""
    assert err.startswith(usage)
    assert "unrecognized arguments" in err and hint in err


def test_an_unknown_word_gets_no_made_up_hint() -> None:
    code, _, err = run("plan", "--zzzzzz")
    assert code == 2 and "usage: npu-place plan" in err and "did you mean" not in err


def test_compare_example() -> None:
    code, out, err = run("compare", "--example", "ordinary-8npu", "--time-limit", "5",
                         "--deterministic-time", "1")
    assert code == 0, err
    # the bundled file by its name, not its installed path (greedy and cpsat rows)
    assert out.count("\nexample:ordinary-8npu ") == 2 and str(example_path("ordinary-8npu")) \
        not in out
    assert max(len(line) for line in out.splitlines()) < 140  # was 160+ with the path
    code, _, err = run("compare", "--example", "nope")
    assert code == 2 and "no bundled example named 'nope'" in err
    code, _, err = run("compare", "--example", "sharing-850")
    assert code == 2 and "'sharing-850' is a replay day" in err
    assert "npu-place replay --example sharing-850" in err
    code, _, err = run("compare")
    assert code == 2 and "--example NAME" in err


@pytest.mark.parametrize(("argv", "closing"), [
    (("validate", "{missing}"), "the input is not valid"),
    (("plan", "{missing}"), "nothing was placed"),
    (("compare", "{missing}"), "nothing was compared"),
    (("import", "{missing}"), "nothing was imported"),
    (("sweep", "{missing}"), "no cell was run"),
    (("simulate", "{missing}", "{missing}"), "nothing was simulated"),
])
def test_the_closing_line_after_input_errors_fits_the_command(
        tmp_path: Path, argv: tuple[str, ...], closing: str) -> None:
    missing = str(tmp_path / "missing.yaml")
    code, _, err = run(*(a.replace("{missing}", missing) for a in argv),
                       *(("--out", str(tmp_path / "o")) if argv[0] == "sweep" else ()))
    assert code == 2
    assert err.splitlines()[-1].endswith(f"input error(s); {closing}"), err


def test_upstream_text_is_quoted_and_the_message_is_spelt_right(tmp_path: Path) -> None:
    bad = write(tmp_path / "s.yaml", scenario(
        [node(f"n{i}", super_pod_id=0) for i in range(4)],
        [job("j", policy="chip8-node8-sp", tasks=2, npu=8, sp_block=12)]))
    code, _, err = run("validate", str(bad))
    assert code == 2
    assert "sp-block 12 is not a multiple of the node's 8 NPUs" in err
    assert '(Volcano: "sp-block(12) is not mutiple of node npu (8)")' in err
    assert err.count("mutiple") == 1



def test_the_lazy_parser_lists_every_subcommand_as_the_full_one() -> None:
    """``npu-place`` builds only the options of the command it runs; the other
    commands' help lines in ``main.COMMANDS`` are those their modules register."""
    import argparse

    from solver.cli.main import COMMANDS, build_parser, chosen_command

    def help_lines(parser: argparse.ArgumentParser) -> dict[str, str | None]:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return {c.dest: c.help for c in sub._choices_actions}

    full = build_parser()
    assert help_lines(full) == {name: line for name, _module, line in COMMANDS}
    for name, _module, _line in COMMANDS:
        lazy = build_parser(name)
        assert help_lines(lazy) == help_lines(full)
        assert full.format_help() == lazy.format_help()
    assert chosen_command(["--version"]) is None
    assert chosen_command(["plan", "--example", "multilevel"]) == "plan"
    assert chosen_command(["plna"]) is None
