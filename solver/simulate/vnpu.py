"""The vNPU side of ``simulate``: vNPU jobs, their running slices, and the chips they use.

Each vNPU node keeps its scenario state (other tenants' slices, unstable chips) as the
*base*; the simulation's running ranks are added on top when a session's scenario is
built: a chip's free AI cores and AI CPUs drop by the slices on it, it is segmented when a
slice is on it, its DVPP state follows the slices (``models/docs/vnpu.md`` §2), and a whole-card
rank takes its chips completely.  The scenario's ``unfinished-templates`` count in the
first session only: afterwards every slice has been cut.

Events: ``scale`` (down releases the highest ranks, up adds pending ranks), ``evict``
(given ranks, or the whole job) and ``delete-job`` work on vNPU jobs as on ordinary jobs;
a node turning unhealthy releases the vNPU jobs with a rank on it.  ``submit-vnpu``
adds a vNPU job (``submit`` takes ordinary jobs).  ``--save-state`` writes pending vNPU
jobs as ``vnpu-jobs`` and folds running vNPU ranks into their nodes' chips (a scenario has
no running vNPU jobs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from models.scenario import Node, VnpuChip, VnpuDvpp, VnpuJob
from models.vnpu import (
    ASCEND_310P,
    Request,
    VNode,
    chip_geometry,
    chip_states,
    downgraded,
    task_request,
)


@dataclass
class RunningSlice:
    """One running vNPU rank: its node, chips and what it takes."""

    node: str
    chips: tuple[int, ...]
    request: Request


@dataclass
class SimVnpuJob:
    """A vNPU job of the simulated cluster."""

    spec: VnpuJob
    desired: int
    placed: dict[int, RunningSlice] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def owner(self) -> str | None:
        return self.spec.owner_uid or None

    def pending_ranks(self) -> list[int]:
        return [r for r in range(self.desired) if r not in self.placed]

    def nodes(self) -> dict[int, str]:
        """Rank → node of the running ranks."""
        return {r: s.node for r, s in self.placed.items()}


def vnpu_view(node: Node) -> VNode:
    """The base chip state of a vNPU node (as in :func:`models.vnpu.compile_vnpu`)."""
    spec = node.vnpu
    assert spec is not None
    geometry = chip_geometry(spec)
    assert geometry is not None  # validated
    cores, cpus = geometry
    chips = chip_states(spec, node.npus, cores, cpus)
    return VNode(0, node.name, spec.chip_kind, cores, cpus, chips,
                 frozenset(spec.unfinished_templates), True)


def node_with_slices(node: Node, slices: list[RunningSlice], first_session: bool) -> Node:
    """``node`` with the simulation's running slices on its chips."""
    spec = node.vnpu
    if spec is None:
        return node
    base = vnpu_view(node)
    chips = []
    for chip in base.chips:
        mine = [s for s in slices if chip.id in s.chips]
        cores, cpus, segmented, dvpp = (chip.free_cores, chip.free_cpus, chip.segmented,
                                        chip.dvpp)
        for s in mine:
            if s.request.is_whole:
                cores = cpus = 0
                continue
            cores -= s.request.cores
            cpus -= s.request.cpus
            segmented = True
            if s.request.dvpp is VnpuDvpp.YES:
                dvpp = VnpuDvpp.NO
            elif s.request.dvpp is VnpuDvpp.NULL and dvpp is not VnpuDvpp.NO:
                dvpp = VnpuDvpp.NULL
        chips.append(VnpuChip(id=chip.id, free_cores=max(0, cores), free_cpus=max(0, cpus),
                              segmented=segmented, dvpp=dvpp, unstable=chip.unstable))
    update: dict[str, Any] = {"chips": chips}
    if not first_session:
        update["unfinished_templates"] = []
    untouched = sum(1 for c in chips if not c.segmented and c.free_cores == base.cores)
    return node.model_copy(update={"vnpu": spec.model_copy(update=update),
                                   "free": min(node.free, untouched)})


def running_slice(node: Node, spec: VnpuJob, chips: list[int], was_downgraded: bool
                  ) -> RunningSlice:
    """What a placed rank takes (its request on the node, downgraded if it was)."""
    view = vnpu_view(node)
    request = task_request(spec, view)
    assert request is not None  # the validator checked the placement
    if was_downgraded and view.kind == ASCEND_310P:
        request = downgraded(request) or request
    return RunningSlice(node.name, tuple(chips), request)
