"""Speed of reading a 100,000-node scenario (load, validate, compile; and refusing one).

The point is that the YAML path does not take PyYAML's pure-Python ~20 s for a file this
size (measured ~1-3 s on an idle core).  Measure with::

    python -m pytest tests/bench/test_bench_loading.py --benchmark-enable -q

In CI (``--benchmark-disable``) every case runs once and its answer is checked; no time
is asserted (the machine may be shared).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from models.compiled import compile_scenario
from models.io import load_scenario
from models.validation import InputError
from tests.models.builders import entry, job, scenario

BIG_NODES = 100_000
SP: dict[str, Any] = {"policy": "chip8-node8-sp", "npu": 8}


def _big_yaml(count: int) -> str:
    """A block-style scenario of ``count`` nodes (what ``save_scenario`` writes)."""
    lines = ["now: 1764400000", "config:", "  super-pod-size: 48", "  prefer-previous-node: true",
             "nodes:"]
    for i in range(count):
        lines += [f"- name: node-{i}", "  npus: 8", f"  free: {8 if i % 5 else 3}",
                  "  health: healthy", f"  super-pod-id: {i // 48}", f"  rack-id: {i // 8}",
                  "  labels:", f"    rack: r{i // 8}", f"    switch: s{i // 64}"]
    lines += ["affinity-cache:", "  entries:"]
    lines += [f"  - {{owner-uid: o1, rank: {r}, node: node-{r}, updated: 1764399000}}"
              for r in range(32)]
    lines += ["jobs:", "- {name: big, owner-uid: o1, policy: chip8-node8-sp, tasks: 32, "
              "npu-per-task: 8, sp-block: 64}", ""]
    return "\n".join(lines)


def _big_json(count: int) -> str:
    nodes = [{"name": f"node-{i}", "npus": 8, "free": 8 if i % 5 else 3, "health": "healthy",
              "super-pod-id": i // 48, "rack-id": i // 8,
              "labels": {"rack": f"r{i // 8}", "switch": f"s{i // 64}"}} for i in range(count)]
    data = scenario(nodes, [job("big", **SP, tasks=32, sp_block=64, owner_uid="o1")],
                    {"super-pod-size": 48, "prefer-previous-node": True},
                    cache=[entry("o1", r, f"node-{r}", 1764399000) for r in range(32)])
    return json.dumps(data)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_100k_node_scenario_loads(tmp_path: Path, fmt: str, benchmark: Any) -> None:
    """A 100,000-node file loads, validates and compiles to the right problem."""
    path = tmp_path / f"big.{fmt}"
    path.write_text(_big_json(BIG_NODES) if fmt == "json" else _big_yaml(BIG_NODES),
                    encoding="utf-8")
    problem = benchmark.pedantic(lambda: compile_scenario(load_scenario(path)), rounds=1)
    assert problem.num_nodes == BIG_NODES
    assert problem.node_names[-1] == f"node-{BIG_NODES - 1}"
    assert int(problem.free[5]) == 3 and int(problem.super_pod[BIG_NODES - 1]) == 2083
    assert problem.jobs[0].origin.tolist() == list(range(32))


@pytest.mark.slow
def test_100k_node_scenario_with_errors_is_refused(tmp_path: Path, benchmark: Any) -> None:
    text = _big_yaml(BIG_NODES).replace("- name: node-40\n", "- name: node-39\n", 1)
    path = tmp_path / "dup.yaml"
    path.write_text(text, encoding="utf-8")

    def refuse() -> InputError:
        with pytest.raises(InputError) as info:
            load_scenario(path)
        return info.value

    error = benchmark.pedantic(refuse, rounds=1)
    assert error.messages == [
        f"{path}: node 'node-39': field 'name': duplicate node name (node #40)"]
