"""At ``replay --snapshots``: a ``now`` file or a folder name holding
digits other than ASCII, or more digits than Python converts, ends in exit 2 naming the
file (or is read in natural order), never an internal error."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from benchmarks.replay.snapshots import series_day
from solver.cli import main
from tests.benchmarks.test_replay_snapshots import _series
from tests.models.kube.helpers import NOW


@pytest.mark.parametrize("text", ["12³", "9" * 5000, "١٢٣", "1_700_000_000", "-5",
                                  str(10**12)])
def test_a_now_file_with_other_digits_exits_2_naming_it(tmp_path: Path, text: str) -> None:
    root = _series(tmp_path / "series")
    (root / "t1" / "now").write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = main(["replay", "--snapshots", str(root), "--out", str(tmp_path / "out"),
                 "--no-plots", "--engines", "upstream"], out, err)
    assert code == 2, err.getvalue()
    text_err = err.getvalue()
    # a value longer than the file bound (256 bytes) is refused by its size before parsing
    assert ("t1: file 'now': expected unix seconds" in text_err
            or ("t1/now: the file is" in text_err and "the limit is 256 bytes" in text_err))
    assert "Traceback" not in text_err and "internal error" not in text_err


def test_folders_with_other_digits_are_read_in_natural_order(tmp_path: Path) -> None:
    root = _series(tmp_path / "series")
    (root / "t1").rename(root / "t1²")
    (root / "t2").rename(root / "t10")
    day = series_day(root)
    assert day.elapsed == [0, 600, 1200]  # t0, t1², t10: the 'now' files agree
    (root / "t10" / "now").write_text(str(NOW + 300), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = main(["replay", "--snapshots", str(root), "--out", str(tmp_path / "out"),
                 "--no-plots", "--engines", "upstream"], out, err)
    assert code == 2 and "before the previous snapshot" in err.getvalue()
