"""``replay --snapshots``: a handmade series of kubectl dumps diffed into sessions."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from benchmarks.kube_dump import DumpBuilder
from benchmarks.replay.run import ReplayOptions, replay_engine
from benchmarks.replay.snapshots import series_day
from models.errors import InputError
from solver.cli import main
from tests.models.kube.helpers import NOW

IMAGES = {"serve": ("registry/serve:1", 20_000_000_000),
          "train": ("registry/train:1", 30_000_000_000),
          "batch": ("registry/batch:1", 10_000_000_000)}


def _snapshot(folder: Path, now: int, jobs: dict[str, tuple[int, dict[int, str]]],
              unhealthy: tuple[str, ...] = (), node_images: dict[str, list[str]] | None = None
              ) -> None:
    """Five 8-NPU chip8-node8 nodes and ``jobs`` (name -> tasks, bound ranks)."""
    b = DumpBuilder("device-plugin", now=now)
    b.params = {"prefer-previous-node": "true"}
    for i in range(5):
        name = f"node-{i}"
        b.node(name, 8, noded="UnHealthy" if name in unhealthy else "Healthy")
    for job, (tasks, bound) in jobs.items():
        b.job("ml", job, tasks, 8, policy="chip8-node8", bound=bound, age=7200)
    for pod in b.pods:
        job = pod["metadata"]["labels"]["volcano.sh/job-name"]
        pod["spec"]["containers"][0]["image"] = IMAGES[job][0]
    for node in b.nodes:
        held = (node_images or {}).get(node["metadata"]["name"], [])
        node["status"]["images"] = [{"names": [IMAGES[j][0], f"{IMAGES[j][0]}@sha256:0"],
                                     "sizeBytes": IMAGES[j][1]} for j in held]
    b.write(folder)
    (folder / "now").write_text(str(now), encoding="utf-8")


def _series(root: Path) -> Path:
    # t0: serve runs on node-0 and node-1 (node-0 also holds train's image); train pending;
    # node-4 down
    _snapshot(root / "t0", NOW, {"serve": (2, {0: "node-0", 1: "node-1"}), "train": (2, {})},
              unhealthy=("node-4",),
              node_images={"node-0": ["serve", "train"], "node-1": ["serve"]})
    # t1: serve scaled to 1; train runs; node-3 down, node-4 repaired; batch submitted
    _snapshot(root / "t1", NOW + 600, {"serve": (1, {0: "node-0"}),
                                       "train": (2, {0: "node-2", 1: "node-1"}),
                                       "batch": (1, {})}, unhealthy=("node-3",),
              node_images={"node-0": ["serve", "train", "batch"]})  # batch's size: 10 GB
    # t2: serve back to 2 (rank 1 pending); batch gone; train preempted (pending again)
    _snapshot(root / "t2", NOW + 1200, {"serve": (2, {0: "node-0"}), "train": (2, {})},
              unhealthy=("node-3",))
    return root


def test_the_series_becomes_sessions(tmp_path: Path) -> None:
    day = series_day(_series(tmp_path / "series"))
    lines = [[e.describe() for e in s.events] for s in day.sessions]
    names = {info.name.split("/")[1].split("-")[0]: info.name for info in day.jobs.values()}
    serve, train, batch = names["serve"], names["train"], names["batch"]
    assert lines[0] == []
    assert lines[1] == ["advance 600 s", "node node-3: health unhealthy",
                        "node node-4: health healthy",
                        f"scale {serve} to 1", f"submit {batch} (1 x 8 NPUs)"]
    assert lines[2] == ["advance 600 s", f"delete-job {batch}", f"scale {serve} to 2",
                        f"evict {train} (ranks 0, 1)"]
    assert day.elapsed == [0, 600, 1200]
    assert day.jobs[serve].image == "registry/serve:1"
    assert day.jobs[train].image_size_gb == pytest.approx(30.0)
    assert day.initial_images["node-0"] == [("registry/serve:1", 20.0),
                                            ("registry/train:1", 30.0)]


def test_replaying_the_series_counts_its_pulls(tmp_path: Path) -> None:
    day = series_day(_series(tmp_path / "series"))
    run = replay_engine(day, "rfc", ReplayOptions(engines=("rfc",)))
    rows = run.sessions
    # session 1: serve fills node-0 and node-1, node-4 is down: train goes to node-2 and
    # node-3, which have no image: two pulls of 30 GB
    assert (rows[0].placed_pods, rows[0].pulls, rows[0].pulled_gb) == (2, 2, 60.0)
    # session 2: node-3 fails: train is rescheduled whole (2 pods released), its rank on
    # node-3 a fault rank; serve's rank 1 leaves node-1; batch arrives; node-4 is back.
    # Train's other rank returns to node-2 (a hit, image there); its fault rank and batch
    # take node-1 and node-4, neither holding their image: 30 + 10 GB
    assert rows[1].evicted_pods == 2
    assert (rows[1].placed_pods, rows[1].hits, rows[1].placed_candidates) == (3, 1, 1)
    assert (rows[1].pulls, rows[1].pulled_gb, rows[1].image_hits) == (2, 40.0, 1)
    # session 3: train is preempted (2 pods); batch is deleted; serve's rank 1 and train
    # come back: three pods on the three free healthy nodes
    assert rows[2].evicted_pods == 2
    assert rows[2].placed_pods == 3
    assert rows[2].placed_candidates == 3


def test_bad_series_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a directory"):
        series_day(tmp_path / "missing")
    (tmp_path / "one" / "t0").mkdir(parents=True)
    with pytest.raises(InputError, match="at least two"):
        series_day(tmp_path / "one")
    root = _series(tmp_path / "bad")
    (root / "t1" / "now").write_text("yesterday", encoding="utf-8")
    with pytest.raises(InputError, match="file 'now'"):
        series_day(root)
    (root / "t1" / "now").write_text(str(NOW - 10), encoding="utf-8")
    with pytest.raises(InputError, match="before the previous snapshot"):
        series_day(root)
    (root / "t1" / "now").write_text(str(NOW + 600), encoding="utf-8")
    (root / "t1" / "pods.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match=r"--snapshots t1: .*pods\.json"):
        series_day(root)


def test_the_now_file_is_read_within_a_bound(tmp_path: Path) -> None:
    """A 400 MB sparse ``now`` file was read whole (3.7 GB peak); a
    ``now`` that is a named pipe without a writer or a device must not block or grow."""
    root = _series(tmp_path / "series")
    stamp = root / "t1" / "now"
    stamp.unlink()
    with stamp.open("wb") as handle:  # sparse: no disk used
        handle.truncate(400 * 1024 * 1024)
    with pytest.raises(InputError, match=r"^--snapshots .*t1/now: the file is 419430400 "
                                         r"bytes; the limit is 256 bytes$"):
        series_day(root)
    stamp.unlink()
    stamp.symlink_to("/dev/zero")
    with pytest.raises(InputError, match=r"t1/now: the file is larger than the limit of "
                                         r"256 bytes"):
        series_day(root)
    stamp.unlink()
    os.mkfifo(stamp)  # no writer: read as empty, refused as not a time
    with pytest.raises(InputError, match=r"t1: file 'now': expected unix seconds"):
        series_day(root)


def test_cli_snapshots(tmp_path: Path) -> None:
    root = _series(tmp_path / "series")
    out, err = io.StringIO(), io.StringIO()
    code = main(["replay", "--snapshots", str(root), "--out", str(tmp_path / "out"),
                 "--no-plots", "--engines", "upstream,rfc"], out, err)
    assert code == 0, err.getvalue()
    assert "| rfc |" in out.getvalue()
    assert (tmp_path / "out" / "sessions.csv").read_text().count("\n") == 1 + 2 * 3


def test_cli_snapshots_refuses_seeds_and_bad_series(tmp_path: Path) -> None:
    root = _series(tmp_path / "series")
    out, err = io.StringIO(), io.StringIO()
    assert main(["replay", "--snapshots", str(root), "--seeds", "0-3", "--out",
                 str(tmp_path / "o")], out, err) == 2
    assert "--seeds: a recorded series has no seeds" in err.getvalue()
    err = io.StringIO()
    assert main(["replay", "--snapshots", str(tmp_path / "none"), "--out",
                 str(tmp_path / "o")], out, err) == 2
    assert "not a directory" in err.getvalue() and "Traceback" not in err.getvalue()
