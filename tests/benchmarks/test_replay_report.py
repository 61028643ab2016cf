"""Reports of ``npu-place replay``: files, determinism, many seeds on Dask, the CLI."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
import yaml

from benchmarks.replay.api import parse_seeds, replay_many, replay_one
from benchmarks.replay.report import mean_interval, paired_rows
from benchmarks.replay.run import ReplayOptions
from benchmarks.replay.spec import load_spec
from benchmarks.sweep import INPROCESS, dask_client
from models.errors import InputError
from solver.cli import main
from tests.replay_specs import short_spec

FAST = ReplayOptions(deterministic_time=0.2)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_same_seed_identical_summary_and_sessions(tmp_path: Path) -> None:
    spec = load_spec(short_spec(), "day.yaml")
    first = replay_one(spec, 5, FAST, tmp_path / "a", plots=False, progress=False)
    replay_one(spec, 5, FAST, tmp_path / "b", plots=False, progress=False)
    for name in ("summary.csv", "sessions.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert [r["engine"] for r in first] == ["upstream", "rfc", "cpsat"]
    summary = _rows(tmp_path / "a" / "summary.csv")
    sessions = _rows(tmp_path / "a" / "sessions.csv")
    assert len(sessions) == 3 * 12
    for row in summary:  # the summary is the sum of the sessions
        mine = [s for s in sessions if s["engine"] == row["engine"]]
        assert int(row["pulls"]) == sum(int(s["pulls"]) for s in mine)
        assert int(row["pods-placed"]) == sum(int(s["placed-pods"]) for s in mine)
        assert float(row["pulled-gb"]) == pytest.approx(sum(float(s["pulled-gb"])
                                                            for s in mine))
    report = (tmp_path / "a" / "report.md").read_text(encoding="utf-8")
    assert "## Summary" in report and "| upstream |" in report


def test_plots_are_written(tmp_path: Path) -> None:
    spec = load_spec(short_spec(hours=1), "day.yaml")
    replay_one(spec, 0, ReplayOptions(engines=("upstream", "rfc")), tmp_path, progress=False)
    for name in ("pulled-gb.png", "hit-rate.png"):
        assert (tmp_path / name).stat().st_size > 1000
    assert "![hit-rate.png](hit-rate.png)" in (tmp_path / "report.md").read_text()


def test_progress_bar_only_when_asked_or_on_a_terminal(tmp_path: Path) -> None:
    spec = load_spec(short_spec(hours=0.5), "day.yaml")
    quiet, loud = io.StringIO(), io.StringIO()
    options = ReplayOptions(engines=("rfc",))
    replay_one(spec, 0, options, tmp_path / "q", plots=False, stream=quiet)  # not a tty
    replay_one(spec, 0, options, tmp_path / "l", plots=False, stream=loud, progress=True)
    assert quiet.getvalue() == ""
    assert "3/3" in loud.getvalue()


def test_many_seeds_through_the_sweep_runner(tmp_path: Path) -> None:
    spec = load_spec(short_spec(hours=1), "day.yaml")
    options = ReplayOptions(engines=("upstream", "rfc"))
    with dask_client(INPROCESS) as client:
        result = replay_many(spec, [2, 0, 1], options, client, tmp_path, progress=False)
    assert result.failures == []
    assert [(r["seed"], r["engine"]) for r in result.rows] == [
        (0, "upstream"), (0, "rfc"), (1, "upstream"), (1, "rfc"), (2, "upstream"),
        (2, "rfc")]
    single = replay_one(spec, 1, options, tmp_path / "one", plots=False, progress=False)
    assert [r for r in result.rows if r["seed"] == 1] == single  # the same day either way
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "over 3 seeds" in report and "95 %" in report
    assert len(_rows(tmp_path / "summary.csv")) == 6


def test_mean_interval() -> None:
    assert mean_interval([4.0, 4.0, 4.0]) == (4.0, 4.0, 4.0)
    mean, low, high = mean_interval([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5 and 1.0 <= low < 2.5 < high <= 4.0
    assert mean_interval([7.0]) == (7.0, 7.0, 7.0)


@pytest.mark.parametrize(("text", "seeds"), [("0-3", [0, 1, 2, 3]), ("5", [5]),
                                             ("0,2,5-6", [0, 2, 5, 6]), ("1,1", [1])])
def test_parse_seeds(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "a", "3-1", "0-5000", "-1"])
def test_bad_seeds_are_refused(text: str) -> None:
    with pytest.raises(InputError, match="--seeds"):
        parse_seeds(text)


def test_cli_replay_writes_the_report(tmp_path: Path) -> None:
    spec = tmp_path / "day.yaml"
    spec.write_text(yaml.safe_dump(short_spec(hours=1)), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = main(["replay", "--workload", str(spec), "--seed", "2", "--out",
                 str(tmp_path / "out"), "--engines", "upstream,rfc", "--no-plots"], out, err)
    assert code == 0, err.getvalue()
    assert "| upstream |" in out.getvalue()
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"summary.csv", "sessions.csv",
                                                              "report.md"}


def test_cli_bad_spec_names_the_field(tmp_path: Path) -> None:
    spec = tmp_path / "day.yaml"
    spec.write_text(yaml.safe_dump(short_spec(**{"session-minutes": 500})), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    assert main(["replay", "--workload", str(spec)], out, err) == 2
    assert "day.yaml: field 'session-minutes'" in err.getvalue()
    assert "Traceback" not in err.getvalue()


@pytest.mark.parametrize("argv", [["--example", "nope"], ["--example", "sharing-850",
                                                          "--engines", "fast"],
                                  ["--example", "sharing-850", "--seeds", "x"]])
def test_cli_bad_options_exit_2(argv: list[str], tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(["replay", *argv, "--out", str(tmp_path)], out, err) == 2
    assert err.getvalue().startswith("error: ")


def test_cli_dask_workers_is_the_local_cluster_and_workers_its_old_name(
        tmp_path: Path) -> None:
    """``--workers`` means CP-SAT threads in plan; replay's Dask processes are
    ``--dask-workers`` (as in sweep and bench), ``--workers`` still works with a note."""
    base = ["replay", "--example", "sharing-850", "--seeds", "0-1", "--out", str(tmp_path)]
    out, err = io.StringIO(), io.StringIO()
    assert main([*base, "--dask-workers", "100000"], out, err) == 2
    assert "--dask-workers 100000: a local cluster takes 1 to" in err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    assert main([*base, "--workers", "100000"], out, err) == 2
    assert "replay --workers is deprecated, use --dask-workers" in err.getvalue()
    assert "--workers 100000: a local cluster takes 1 to" in err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    assert main([*base, "--workers", "2", "--dask-workers", "2"], out, err) == 2
    assert "deprecated name" in err.getvalue()


def test_examples_lists_the_days() -> None:
    out = io.StringIO()
    assert main(["examples"], out, io.StringIO()) == 0
    assert "sharing-850" in out.getvalue() and "faults-950-multilevel" in out.getvalue()
    out = io.StringIO()
    assert main(["examples", "sharing-850"], out, io.StringIO()) == 0
    assert load_spec(yaml.safe_load(out.getvalue()), "x").name == "sharing-850"


def test_paired_rows_hand_computed() -> None:
    rows = [{"seed": 0, "engine": "upstream", "pulls": 10, "pulled-gb": 100.0,
             "pull-minutes": 50.0, "origin-hit-rate": 0.5},
            {"seed": 0, "engine": "rfc", "pulls": 7, "pulled-gb": 70.0,
             "pull-minutes": 35.0, "origin-hit-rate": 0.9},
            {"seed": 1, "engine": "upstream", "pulls": 12, "pulled-gb": 120.0,
             "pull-minutes": 60.0, "origin-hit-rate": ""},
            {"seed": 1, "engine": "rfc", "pulls": 8, "pulled-gb": 80.0,
             "pull-minutes": 40.0, "origin-hit-rate": 0.8}]
    (row,) = paired_rows(rows, ["upstream", "rfc"])
    assert row["engine"] == "rfc - upstream" and row["seeds"] == 2
    assert row["pulls"].startswith("-3.5 [-4, -3")
    assert row["origin-hit-rate"].startswith("+0.4 [+0.4, +0.4]")  # seed 1 has no rate


# --------------------------------------------------------------------------- --out folder
# the bench/sweep rule, checked before any work; no symlink followed


def _cli_replay(tmp_path: Path, out_dir: Path, *extra: str) -> tuple[int, str]:
    spec = tmp_path / "day.yaml"
    spec.write_text(yaml.safe_dump(short_spec(hours=1)), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = main(["replay", "--workload", str(spec), "--out", str(out_dir), "--engines",
                 "upstream", "--no-plots", *extra], out, err)
    return code, err.getvalue()


def _no_replay(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record any replay started (the folder must be refused before)."""
    from benchmarks.replay import api

    started: list[str] = []

    def refuse(*args: object, **kwargs: object) -> None:
        started.append("replay_one")
        raise AssertionError("the replay started before --out was checked")

    monkeypatch.setattr(api, "replay_one", refuse)
    return started


def test_an_out_that_is_a_file_is_refused_before_any_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started = _no_replay(monkeypatch)
    target = tmp_path / "not-a-folder"
    target.write_text("keep me\n", encoding="utf-8")
    code, err = _cli_replay(tmp_path, target)
    assert code == 2 and started == [], err
    assert f"--out {target}: a file, not a folder" in err
    assert target.read_text(encoding="utf-8") == "keep me\n"


def test_a_used_out_folder_is_refused_and_a_symlink_in_it_never_followed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "summary.csv").symlink_to(victim)
    started = _no_replay(monkeypatch)
    code, err = _cli_replay(tmp_path, out_dir)
    assert code == 2 and started == [], err
    assert "the folder is not empty" in err and "--force" in err
    code, err = _cli_replay(tmp_path, out_dir, "--force")
    assert code == 2 and started == [], err
    assert f"--out {out_dir / 'summary.csv'}: a symbolic link" in err
    assert victim.read_text(encoding="utf-8") == "precious\n"


def test_force_replaces_an_earlier_run(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    assert _cli_replay(tmp_path, out_dir)[0] == 0
    first = (out_dir / "summary.csv").read_bytes()
    (out_dir / "notes.txt").write_text("mine\n", encoding="utf-8")
    code, err = _cli_replay(tmp_path, out_dir)
    assert code == 2 and "the folder is not empty" in err
    code, err = _cli_replay(tmp_path, out_dir, "--force")
    assert code == 0, err
    assert (out_dir / "summary.csv").read_bytes() == first  # same seed: same file
    assert (out_dir / "notes.txt").read_text(encoding="utf-8") == "mine\n"  # left alone


def test_outputs_are_opened_without_following_links_or_blocking(tmp_path: Path) -> None:
    """The writer itself (a link planted after the folder was checked, a named pipe)."""
    import os

    from benchmarks.outputs import open_output, write_output

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    link = tmp_path / "report.md"
    link.symlink_to(victim)
    with pytest.raises(InputError, match=r"report\.md: a symbolic link"):
        write_output(link, "x")
    assert victim.read_text(encoding="utf-8") == "precious\n"
    pipe = tmp_path / "summary.csv"
    os.mkfifo(pipe)
    with pytest.raises(InputError, match=r"summary\.csv: not a regular file"):
        open_output(pipe)
    fresh = tmp_path / "sessions.csv"
    fresh.write_text("old and longer\n", encoding="utf-8")
    write_output(fresh, "new\n")
    assert fresh.read_text(encoding="utf-8") == "new\n"
