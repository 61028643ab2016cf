"""``npu-place import`` under attack: every hostile dump is exit 2
with a message naming the file or the object and the field, in bounded time and memory.

Each test writes its hostile input to ``tmp_path`` and runs the real command line
(``solver.cli.main``, or the installed ``npu-place`` where a hang must be ruled out).
"""

from __future__ import annotations

import copy
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import models.kube.source as source
from models.kube.jobs import GROUP_ANNOTATION
from solver.cli import main
from solver.doors import EXIT_INVALID, EXIT_OK
from tests.models.kube.helpers import NOW, cluster, find

DEEP = "[" * 100_000 + "]" * 100_000  # JSON nested 100,000 levels deep
HUGE = "9" * 5_000  # an integer literal of 5,000 digits (Python refuses > 4,300)
#: The classic "billion laughs" (9^9 strings from 507 bytes of YAML).
BOMB_ANCHORS = (
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
    "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
    "i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n"
)

Objects = list[dict[str, Any]]


#: The command line in a child process (``python -m solver.cli``, this checkout first).
NPU_PLACE = [sys.executable, "-m", "solver.cli"]
CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH", "")])}


def _objects() -> Objects:
    """A small device-plugin cluster: 4 nodes, a running job, a pending job, a class."""
    b = cluster(nodes=4)
    b.priority_class("high", 100)
    b.job("ml", "run", 2, 8, policy="chip8-node8", bound={0: "node-0", 1: "node-1"},
          priority_class="high")
    b.job("ml", "wait", 1, 8, policy="chip8-node8")
    b.reschedule_record(b.podgroups[0]["metadata"]["namespace"] + "/"
                        + b.podgroups[0]["metadata"]["name"], NOW - 60,
                        [(0, "node-0", "fault")])
    return b.objects()


def _write(tmp_path: Path, objects: Objects, name: str = "dump.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": objects}),
                    encoding="utf-8")
    return path


def _import(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["import", *args, "--now", str(NOW)], out=io.StringIO())
    return code, capsys.readouterr().err


def _refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run an import that ``--strict`` must refuse: exit 2, no internal error; the error
    lines (without ``--strict`` a refused object takes out only its own job or node)."""
    code, err = _import(capsys, *args, "--strict")
    assert "internal error" not in err and "Traceback" not in err, err
    assert code == EXIT_INVALID, err
    return "\n".join(line for line in err.splitlines() if line.startswith("error:"))


def _device_cm(objects: Objects) -> dict[str, Any]:
    return find(objects, "ConfigMap", "mindx-dl-deviceinfo-node-0")


def _set_base_device_infos(objects: Objects, text: str) -> None:
    find(objects, "Node", "node-0")["metadata"]["annotations"]["baseDeviceInfos"] = text


def _set_device_info_cfg(objects: Objects, text: str) -> None:
    _device_cm(objects)["data"]["DeviceInfoCfg"] = text


def _set_fault_list(objects: Objects, text: str) -> None:
    cm = _device_cm(objects)
    record = json.loads(cm["data"]["DeviceInfoCfg"])
    record["DeviceInfo"]["DeviceList"]["huawei.com/npu-Fault"] = text
    cm["data"]["DeviceInfoCfg"] = json.dumps(record)


def _set_reschedule(objects: Objects, text: str) -> None:
    find(objects, "ConfigMap", "job-reschedule-reason")["data"][
        "recent-reschedule-records"] = text


def _set_init_param(objects: Objects, key: str, value: str) -> None:
    cm = find(objects, "ConfigMap", "volcano-scheduler-configmap")
    conf = yaml.safe_load(cm["data"]["volcano-scheduler.conf"])
    for entry in conf["configurations"]:
        if entry["name"] == "init-params":
            entry["arguments"][key] = value
    cm["data"]["volcano-scheduler.conf"] = yaml.safe_dump(conf)


def _set_level_config(objects: Objects, text: str) -> None:
    _set_init_param(objects, "resource-level-config", text)


#: (where, how to plant text there, the object named, the field named)
PLACES: list[tuple[str, Callable[[Objects, str], None], str, str]] = [
    ("baseDeviceInfos", _set_base_device_infos, "Node node-0",
     "metadata.annotations.baseDeviceInfos"),
    ("DeviceInfoCfg", _set_device_info_cfg,
     "ConfigMap kube-system/mindx-dl-deviceinfo-node-0", "data.DeviceInfoCfg"),
    ("-Fault", _set_fault_list, "ConfigMap kube-system/mindx-dl-deviceinfo-node-0",
     "DeviceList[huawei.com/npu-Fault]"),
    ("job-reschedule-reason", _set_reschedule, "ConfigMap mindx-dl/job-reschedule-reason",
     "data.recent-reschedule-records"),
    ("resource-level-config", _set_level_config,
     "ConfigMap volcano-system/volcano-scheduler-configmap",
     "init-params.resource-level-config"),
]


def test_the_untouched_cluster_imports(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The base of every hostile case below is a good dump."""
    out = tmp_path / "s.yaml"
    code, err = _import(capsys, str(_write(tmp_path, _objects())), "--output", str(out))
    assert code == EXIT_OK, err
    assert main(["validate", str(out)]) == EXIT_OK


# --------------------------------------------------------------------------- item 10


@pytest.mark.parametrize(("place", "plant", "who", "field"), PLACES,
                         ids=[p[0] for p in PLACES])
@pytest.mark.parametrize(("payload", "says"), [
    (DEEP, "nested deeper than"),
    ('{"x": [1, ' + HUGE + "]}", "integer is out of range"),
    ('{"x": 1, "x": 2}', "duplicate key"),
], ids=["100k-deep", "5000-digit", "duplicate-key"])
def test_embedded_json_is_read_within_bounds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], place: str,
        plant: Callable[[Objects, str], None], who: str, field: str, payload: str,
        says: str) -> None:
    objects = _objects()
    plant(objects, payload)
    errors = _refused(capsys, str(_write(tmp_path, objects)))
    assert f"{who}: field '{field}'" in errors and says in errors, errors


@pytest.mark.parametrize(("text", "says"), [
    (DEEP, "nested deeper than 64 levels"),
    ('{"kind": "List", "items": [], "x": ' + HUGE + "}",
     "the document: field 'x': an integer of 5000 digits is out of range"),
], ids=["100k-deep", "5000-digit"])
def test_a_hostile_dump_file_is_refused_naming_it(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  text: str, says: str) -> None:
    path = tmp_path / "dump.json"
    path.write_text(text, encoding="utf-8")
    errors = _refused(capsys, str(path))
    assert errors.startswith(f"error: {path}: ") and says in errors, errors


@pytest.mark.parametrize(("value", "says"), [
    (10**30, "PriorityClass high: field 'value': an integer of 31 digits is out of range"),
    (1e30, "PriorityClass high: field 'value': expected an integer, got 1e+30"),
    (2**40, "PriorityClass high: field 'value': 1099511627776 is out of range (a priority "
            "is a 32-bit integer"),
], ids=["int-1e30", "float-1e30", "int-2^40"])
def test_priority_class_value_out_of_range(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           value: Any, says: str) -> None:
    objects = _objects()
    find(objects, "PriorityClass", "high")["value"] = value
    errors = _refused(capsys, str(_write(tmp_path, objects)))
    assert says in errors, errors


@pytest.mark.parametrize(("value", "says"), [
    (10**20, "field 'spec.priority': an integer of 21 digits is out of range"),
    (1e20, "field 'spec.priority': expected an integer, got 1e+20"),
    (-(2**31) - 5, "field 'spec.priority': -2147483653 is out of range"),
], ids=["int-1e20", "float-1e20", "below-int32"])
def test_pod_priority_out_of_range(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   value: Any, says: str) -> None:
    objects = _objects()
    pod = find(objects, "Pod", "wait")
    pod["spec"]["priority"] = value
    errors = _refused(capsys, str(_write(tmp_path, objects)))
    assert f"Pod ml/{pod['metadata']['name']}" in errors and says in errors, errors


def test_a_podgroup_name_too_long_for_a_job_name(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    objects = _objects()
    long_name = "w" * 254
    group = find(objects, "PodGroup", "wait")
    old = group["metadata"]["name"]
    group["metadata"]["name"] = long_name
    for pod in objects:
        annotations = pod["metadata"].get("annotations") or {}
        if pod["kind"] == "Pod" and annotations.get(GROUP_ANNOTATION) == old:
            annotations[GROUP_ANNOTATION] = long_name
    errors = _refused(capsys, str(_write(tmp_path, objects)))
    assert f"PodGroup ml/{long_name[:20]}" in errors
    assert "field 'metadata.name'" in errors and "is 257 characters" in errors, errors


@pytest.mark.parametrize(("text", "says"), [
    ('{"kind": "List", "kind": "List", "items": []}', "duplicate key 'kind'"),
    ('{"kind": "List", "kind": "List", "items": [}', "duplicate key 'kind'"),  # YAML then
    ("{" + '"a":{' * 100_000 + "}" * 100_001, "nested deeper than 64 levels"),
], ids=["json-duplicate", "yaml-fallback-duplicate", "deep"])
def test_a_yaml_file_starting_with_a_brace(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           text: str, says: str) -> None:
    path = tmp_path / "dump.yaml"
    path.write_text(text, encoding="utf-8")
    errors = _refused(capsys, str(path))
    assert errors.startswith(f"error: {path}: ") and says in errors, errors


def test_deeply_nested_scheduler_configmap(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    objects = _objects()
    find(objects, "ConfigMap", "volcano-scheduler-configmap")["data"][
        "volcano-scheduler.conf"] = "[" * 5_000 + "]" * 5_000
    errors = _refused(capsys, str(_write(tmp_path, objects)))
    assert ("ConfigMap volcano-system/volcano-scheduler-configmap: field "
            "'data.volcano-scheduler.conf'") in errors and "nested deeper" in errors, errors


def test_an_owner_uid_a_scenario_refuses(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    objects = _objects()
    group = find(objects, "PodGroup", "wait")
    group["metadata"]["ownerReferences"][0]["uid"] = "u\x1b[2J" + "x" * 10
    errors = _refused(capsys, str(_write(tmp_path, objects)))
    assert "field 'metadata.ownerReferences[controller].uid'" in errors
    assert "\\x1b" in errors and "\x1b" not in errors, errors


# --------------------------------------------------------------------------- item 11


def _yaml_dump_with_bomb(objects: Objects, label_value: str) -> str:
    """A YAML List whose first node has label ``x`` set to ``label_value`` (an alias)."""
    text = yaml.safe_dump({"kind": "List", "apiVersion": "v1", "items": objects},
                          sort_keys=False)
    last = label_value.lstrip("*")  # the anchors up to the one used
    lines = BOMB_ANCHORS.splitlines()
    lines = lines[:[line[0] for line in lines].index(last) + 1]
    anchors = "".join(f"  {line}\n" for line in lines)
    text = text.replace("kind: List\n", f"kind: List\nbomb:\n{anchors}", 1)
    marker = "    labels:\n"
    assert marker in text
    return text.replace(marker, f"{marker}      x: {label_value}\n", 1)


def test_alias_bomb_as_a_node_label_value(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "dump.yaml"
    path.write_text(_yaml_dump_with_bomb(_objects(), "*i"), encoding="utf-8")
    errors = _refused(capsys, str(path))
    assert errors.startswith(f"error: {path}: line ")
    assert "values (alias expansions counted)" in errors, errors


def test_a_smaller_alias_expansion_as_a_label_value_is_not_a_label(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Within the value bound the list is read (shared, not copied), then refused as a
    label value, as the scenario loader refuses it."""
    path = tmp_path / "dump.yaml"
    path.write_text(_yaml_dump_with_bomb(_objects(), "*c"), encoding="utf-8")
    errors = _refused(capsys, str(path))
    assert "Node node-0: field 'metadata.labels.x': a value must be a string" in errors
    assert "not a list" in errors, errors


def test_alias_bomb_in_the_scheduler_init_params(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    objects = _objects()
    find(objects, "ConfigMap", "volcano-scheduler-configmap")["data"][
        "volcano-scheduler.conf"] = (BOMB_ANCHORS + "configurations:\n- name: init-params\n"
                                     "  arguments: {super-pod-size: *i}\n")
    errors = _refused(capsys, str(_write(tmp_path, objects)))
    assert ("ConfigMap volcano-system/volcano-scheduler-configmap: field "
            "'data.volcano-scheduler.conf'") in errors
    assert "alias expansions counted" in errors, errors


def test_dev_zero_is_refused_at_the_dump_limit(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(source, "MAX_DUMP_FILE_BYTES", 4096)
    errors = _refused(capsys, "/dev/zero")
    assert errors == "error: /dev/zero: the file is larger than the limit of 4096 bytes"


def test_stdin_fed_from_dev_zero_is_refused(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(source, "MAX_DUMP_FILE_BYTES", 4096)
    with open("/dev/zero", "rb") as zero:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(zero))
        errors = _refused(capsys, "-")
    assert errors == "error: <stdin>: the file is larger than the limit of 4096 bytes"


def test_a_large_regular_file_is_refused_by_its_size(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """200 MB (sparse: nothing is written) against the real 128 MiB limit, refused by its
    size before a byte is read."""
    path = tmp_path / "big.json"
    with open(path, "wb") as handle:
        handle.truncate(200_000_000)
    errors = _refused(capsys, str(path))
    assert errors == (f"error: {path}: the file is 200000000 bytes; the limit is "
                      f"{source.MAX_DUMP_FILE_BYTES} bytes")


def test_the_dump_files_of_one_import_share_a_budget(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    first = _write(tmp_path, _objects(), "a.json")
    second = _write(tmp_path, _objects()[:1], "b.json")
    monkeypatch.setattr(source, "MAX_DUMP_TOTAL_BYTES", first.stat().st_size + 100)
    errors = _refused(capsys, str(first), str(second))
    assert errors.startswith(f"error: {second}: the file is ")
    assert "that all the dump files of one import may hold" in errors, errors


def test_an_empty_file_is_not_a_cluster(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.json"
    path.write_text("  \n", encoding="utf-8")
    errors = _refused(capsys, str(path))
    assert errors == f"error: {path}: no Kubernetes objects: the file is empty (a named pipe " \
                     "is read without waiting for a writer)"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")
def test_a_named_pipe_without_a_writer_does_not_hang(tmp_path: Path) -> None:
    """The installed command, in a child process with a timeout: a hang fails the test."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    done = subprocess.run([*NPU_PLACE, "import", str(fifo), "--now", str(NOW)],
                          capture_output=True, text=True, timeout=120, check=False,
                          env=CHILD_ENV)
    assert done.returncode == EXIT_INVALID, done.stderr
    assert f"{fifo}: no Kubernetes objects" in done.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")
def test_a_named_pipe_with_a_writer_is_read(tmp_path: Path) -> None:
    """``import <(kubectl get ... -o json)`` and named pipes with a writer still work."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    dump = _write(tmp_path, _objects())
    with subprocess.Popen([*NPU_PLACE, "import", str(fifo), "--now", str(NOW)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=CHILD_ENV) as child:
        with open(fifo, "wb") as writer:  # blocks until the child opened the pipe
            writer.write(dump.read_bytes())
        out, err = child.communicate(timeout=120)
    assert child.returncode == EXIT_OK, err
    assert "imported 4 nodes" in err and yaml.safe_load(out)["nodes"]


# --------------------------------------------------------------------------- item 12


def test_a_40_digit_reserve_nodes_imports_a_scenario_validate_accepts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Go's strconv.Atoi fails on it and upstream keeps its default: so does the import."""
    objects = _objects()
    _set_init_param(objects, "reserve-nodes", "1" * 40)
    out = tmp_path / "s.yaml"
    code, err = _import(capsys, str(_write(tmp_path, objects)), "--output", str(out))
    assert code == EXIT_OK, err
    assert "init-params reserve-nodes='1111" in err and "upstream's default used" in err
    assert "reserve-nodes" not in yaml.safe_load(out.read_text())["config"]
    assert main(["validate", str(out)]) == EXIT_OK


def test_a_40_digit_sp_block_is_refused_naming_the_podgroup(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = cluster(nodes=8)
    b.job("ml", "sp", 2, 8, policy="chip8-node8-sp", annotations={"sp-block": "9" * 40})
    errors = _refused(capsys, str(_write(tmp_path, b.objects())))
    assert "PodGroup ml/sp" in errors and "field 'metadata.annotations.sp-block'" in errors
    assert "not a 64-bit integer" in errors, errors


@pytest.mark.parametrize(("value", "kind"), [({"a": 1}, "mapping"), (["a"], "list")])
def test_a_mapping_or_list_as_a_label_value_is_refused(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str],
                                                       value: Any, kind: str) -> None:
    objects = _objects()
    find(objects, "Node", "node-0")["metadata"]["labels"]["rack"] = value
    errors = _refused(capsys, str(_write(tmp_path, objects)))
    assert "Node node-0: field 'metadata.labels.rack': a value must be a string (or a " \
           f"number or boolean), not a {kind}" in errors, errors


def test_a_number_as_a_label_value_becomes_a_string(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    objects = _objects()
    find(objects, "Node", "node-0")["metadata"]["labels"]["rack"] = 7
    out = tmp_path / "s.yaml"
    code, err = _import(capsys, str(_write(tmp_path, objects)), "--output", str(out))
    assert code == EXIT_OK, err
    node = yaml.safe_load(out.read_text())["nodes"][0]
    assert node["name"] == "node-0" and node["labels"]["rack"] == "7"


@pytest.mark.parametrize(("label", "says"), [
    ("a\x1b[31m", "contains the control or formatting character \\x1b"),
    ("v" * 1025, "is 1025 characters long; the limit is 1024"),
], ids=["escape", "long"])
def test_a_label_a_scenario_refuses_names_the_node(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str],
                                                   label: str, says: str) -> None:
    objects = _objects()
    find(objects, "Node", "node-1")["metadata"]["labels"]["x"] = label
    errors = _refused(capsys, str(_write(tmp_path, objects)))
    assert "Node node-1: field 'metadata.labels" in errors and says in errors, errors


def test_too_many_labels_names_the_node(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    objects = _objects()
    find(objects, "Node", "node-2")["metadata"]["labels"].update(
        {f"k{i}": "v" for i in range(300)})
    errors = _refused(capsys, str(_write(tmp_path, objects)))
    assert "Node node-2: field 'metadata.labels'" in errors and "256" in errors, errors


def test_a_scenario_larger_than_the_readers_accept_is_not_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import models.kube.build as build

    monkeypatch.setattr(build, "MAX_FILE_BYTES", 2000)
    errors = _refused(capsys, str(_write(tmp_path, copy.deepcopy(_objects()))),
                      "--output", str(tmp_path / "s.yaml"))
    assert "the imported scenario is" in errors and "at most 2000 bytes" in errors, errors
    assert not (tmp_path / "s.yaml").exists()
