"""At ``npu-place import``: an import that can place nothing says so
(exit 2 naming what to add, unless ``--allow-no-devices``), and warnings of one kind are one
line with a count and a few samples at any scale."""

from __future__ import annotations

import io
from pathlib import Path

import yaml

from benchmarks.kube_dump import DumpBuilder
from models.kube.source import SAMPLES_PER_KIND, Diagnostics, warning_kind
from solver.cli import main
from tests.models.kube.helpers import NOW, cluster

DEVICE_FILES = ("configmaps",)  # the device-info records' file names start with this


def _dump(tmp_path: Path, devices: bool) -> Path:
    folder = tmp_path / "dump"
    builder = cluster(nodes=8)
    builder.job("ml", "train", 2, 8, policy="chip8-node8", bound={0: "node-0"})
    builder.write(folder)
    if not devices:
        for path in folder.iterdir():
            if path.name.startswith(DEVICE_FILES):
                path.unlink()
    return folder


def _import(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(["import", *args, "--now", str(NOW)], out, err), err.getvalue()


def test_an_import_without_device_info_exits_2_naming_what_to_add(tmp_path: Path) -> None:
    folder = _dump(tmp_path, devices=False)
    target = tmp_path / "s.yaml"
    code, err = _import(str(folder), "--output", str(target))
    assert code == 2
    last = err.strip().splitlines()[-1]
    assert "none of the 8 imported nodes has device information" in last
    assert "device-info ConfigMaps" in last and "kubectl" in last
    assert "--allow-no-devices" in last
    assert not target.exists()


def test_allow_no_devices_writes_the_scenario(tmp_path: Path) -> None:
    folder = _dump(tmp_path, devices=False)
    target = tmp_path / "s.yaml"
    code, err = _import(str(folder), "--output", str(target), "--allow-no-devices")
    assert code == 0, err
    data = yaml.safe_load(target.read_text(encoding="utf-8"))
    assert len(data["nodes"]) == 8 and all(n["free"] == 0 for n in data["nodes"])


def test_an_import_with_device_info_is_not_refused(tmp_path: Path) -> None:
    folder = _dump(tmp_path, devices=True)
    code, err = _import(str(folder), "--output", str(tmp_path / "s.yaml"))
    assert code == 0, err
    assert "device information" not in err


def test_one_line_per_kind_of_warning_at_scale(tmp_path: Path) -> None:
    """40 partly running jobs, each with one running rank (rank ``j % 8``, so eight
    different texts) on an unhealthy node: one warning line for them, counting 40, with a
    few samples."""
    builder = DumpBuilder("device-plugin", now=NOW, resource="huawei.com/npu",
                          chip_type="Ascend850")
    builder.params = {"super-pod-size": "8"}
    for i in range(80):
        builder.node(f"node-{i}", 8, super_pod=i // 8, noded="UnHealthy" if i % 2 else "Healthy")
    for j in range(40):
        builder.job("ml", f"job-{j}", 8, 8, policy="chip8-node8",
                    bound={j % 8: f"node-{2 * j + 1}"})
    builder.write(tmp_path / "dump")
    code, err = _import(str(tmp_path / "dump"), "--output", str(tmp_path / "s.yaml"))
    assert code == 0, err
    lines = [line for line in err.splitlines() if "kept where they are" in line]
    assert len(lines) == 1, lines
    assert lines[0].startswith("warning: 40 warnings of one kind, e.g. ")
    assert lines[0].count("sit on an unhealthy node") == SAMPLES_PER_KIND
    assert lines[0].endswith(f"(+{40 - SAMPLES_PER_KIND} more)")


def test_warning_kinds() -> None:
    assert warning_kind("running ranks 3 sit on 'a'") == warning_kind(
        "running ranks 0, 5, 7 sit on 'b', 'c'")
    assert warning_kind("no device info") != warning_kind("stale UpdateTime")
    diag = Diagnostics()
    diag.warn("Node a", "no device info")
    diag.warn("Node b", "no device info")
    diag.warn("Job x", "ranks 1 run on nodes that are not imported")
    assert diag.warnings == ["2 objects (Node a, Node b): no device info",
                             "Job x: ranks 1 run on nodes that are not imported"]
