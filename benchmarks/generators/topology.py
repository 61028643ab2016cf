"""The clean cluster of a family at a scale: nodes, super pods, racks, the multilevel tree."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.generators.params import (
    A3_POD_NODES,
    ML_FANOUT,
    ML_LABELS,
    NODE_NPUS,
    RACK_NODES,
    RESERVE_NODES,
    GenParams,
)
from models.scenario import TOPOTREE_LABEL


@dataclass
class Topology:
    """The clean cluster of one family: nodes, their super pods, racks and tree domains."""

    family: str
    names: list[str]
    npus: np.ndarray
    super_pod: np.ndarray  # -1: none
    rack: np.ndarray  # -1: none
    labels: list[dict[str, str]] | None
    config: dict[str, Any]
    pod_nodes: int
    depth: int
    domain: list[np.ndarray]  # multilevel: level-i domain index per node (i = 0..depth-1)

    @property
    def size(self) -> int:
        return len(self.names)


def default_pod_nodes(family: str, nodes: int) -> int:
    """Nodes per super pod the generator uses at a scale (850/950; A3 is always 48)."""
    if family == "a3":
        return A3_POD_NODES
    if family == "850":
        return int(min(128, max(16, 2 ** math.floor(math.log2(max(1, nodes // 4))))))
    if family == "950":
        return int(min(1024, max(64, 2 ** math.floor(math.log2(max(1, nodes // 2))))))
    return 0


def default_depth(nodes: int) -> int:
    """Multilevel tree depth the generator uses at a scale."""
    if nodes <= 128:
        return 2
    if nodes <= 2048:
        return 3
    return 4


def build_topology(params: GenParams) -> Topology:
    """The clean cluster of ``params.family`` at ``params.nodes`` (whole pods or racks)."""
    family = params.family
    npus_per = NODE_NPUS[family]
    labels: list[dict[str, str]] | None = None
    domain: list[np.ndarray] = []
    depth = 0
    config: dict[str, Any] = {"prefer-previous-node": True}
    if family in ("a3", "850", "950"):
        pod = params.pod_nodes or default_pod_nodes(family, params.nodes)
        if family == "a3":
            pod = params.pod_nodes or A3_POD_NODES
        if family == "950":
            pod = max(RACK_NODES, pod - pod % RACK_NODES)
        pods = max(1, math.ceil(params.nodes / pod))
        count = pods * pod
        index = np.arange(count)
        super_pod = (index // pod).astype(np.int32)
        local = index % pod
        if family == "950":
            rack = (index // RACK_NODES).astype(np.int32)
            names = [f"sp{p}-r{r}-n{i}" for p, r, i in
                     zip(super_pod.tolist(), rack.tolist(), (local % RACK_NODES).tolist(),
                         strict=True)]
        else:
            rack = np.full(count, -1, dtype=np.int32)
            prefix = "a3-sp" if family == "a3" else "sp"
            names = [f"{prefix}{p}-node-{i}" for p, i in
                     zip(super_pod.tolist(), local.tolist(), strict=True)]
        config["super-pod-size"] = pod
        config["reserve-nodes"] = RESERVE_NODES
    elif family == "multilevel":
        depth = params.depth or default_depth(params.nodes)
        racks = max(1, math.ceil(params.nodes / ML_FANOUT[0]))
        count = racks * ML_FANOUT[0]
        index = np.arange(count)
        span = 1
        for level in range(depth):
            span *= ML_FANOUT[level]
            domain.append((index // span).astype(np.int32))
        kinds = ("rack", "sw", "spine", "zone")
        labels = []
        for n in range(count):
            node_labels = {TOPOTREE_LABEL: "default"}
            for level in range(depth):
                node_labels[ML_LABELS[level]] = f"{kinds[level]}-{int(domain[level][n])}"
            labels.append(node_labels)
        names = [f"r{int(domain[0][n])}-n{n % ML_FANOUT[0]}" for n in range(count)]
        super_pod = np.full(count, -1, dtype=np.int32)
        rack = np.full(count, -1, dtype=np.int32)
        levels: dict[str, Any] = {}
        for level in range(depth):
            spec: dict[str, Any] = {"label": ML_LABELS[level]}
            if level == 0:
                spec["reservedNode"] = 1
            levels[f"level{level + 1}"] = spec
        config["resource-level-config"] = {"default": levels}
        pod = 0
    else:
        count = params.nodes
        names = [f"node-{i}" for i in range(count)]
        super_pod = np.full(count, -1, dtype=np.int32)
        rack = np.full(count, -1, dtype=np.int32)
        pod = 0
    return Topology(
        family=family,
        names=names,
        npus=np.full(len(names), npus_per, dtype=np.int32),
        super_pod=super_pod,
        rack=rack,
        labels=labels,
        config=config,
        pod_nodes=pod,
        depth=depth,
        domain=domain,
    )


def nodes_data(topo: Topology, free: np.ndarray, health: list[str]) -> list[dict[str, Any]]:
    """The contract's ``nodes`` of ``topo`` with the given free NPUs and health."""
    nodes = []
    for n in range(topo.size):
        node: dict[str, Any] = {
            "name": topo.names[n],
            "npus": int(topo.npus[n]),
            "free": int(free[n]),
            "health": health[n],
        }
        if topo.super_pod[n] >= 0:
            node["super-pod-id"] = int(topo.super_pod[n])
        if topo.rack[n] >= 0:
            node["rack-id"] = int(topo.rack[n])
        if topo.labels is not None:
            node["labels"] = dict(topo.labels[n])
        nodes.append(node)
    return nodes


def cluster_nodes(family: str, nodes: int, pod_nodes: int | None = None,
                  depth: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A clean cluster of one family: node mappings (all free, healthy) and its config.

    The topology is the generators' (see the module docstring); ``replay`` builds its
    node pools with it.
    """
    topo = build_topology(GenParams(family, nodes=nodes, pod_nodes=pod_nodes, depth=depth))
    return nodes_data(topo, topo.npus.copy(), ["healthy"] * topo.size), dict(topo.config)
