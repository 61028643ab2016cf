"""Greedy placement of dynamic vNPU jobs (``huawei.com/npu-core``), per upstream.

Jobs in queue order (priority descending, then file order), each all-or-nothing; ranks
with a cached node first, then the others, each by rank (the RFC's ``TaskOrderFn``).  Per
rank (``models/docs/vnpu.md`` §5–§6):

* **predicate** — the node is a usable vNPU node, its request resolves there, one chip
  takes the slice (AI cores, AI CPUs, DVPP, stable) or enough untouched chips take the
  whole card; a 310P node where the full slice does not fit is tried with the AI-CPU
  downgrade (and remembered as downgraded for this rank); the node's unfinished slices
  (before the session and placed in this batch) are all of the rank's template;
* **score** — candidates sorted by free AI cores ascending (natural node order on ties,
  upstream [random]); with no downgraded candidate the first gets 8, otherwise the
  downgraded ones before the first non-downgraded get 8 and that one 16;
* **RFC bonus** (vNPU jobs are "identical to ordinary NPU jobs"): ``max + 100`` on the
  rank's cached node when it is a candidate, else on the best node no other rank of the
  owner has cached, else on the best such node; then −1 on sub-healthy nodes, ×100;
  the highest score wins, natural node order on ties;
* **chip** — the chips in ascending free resource (AI cores, AI CPUs, chip id; upstream
  [random] on ties): a slice takes the first that fits, a whole card the first untouched.

Deviation (order-free rule, also in the validator): a whole-card vNPU rank and slices of
the same batch never share a node (upstream admits the whole card first, slices after).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from heuristics.images import tie_list
from models.compiled import SUBHEALTHY, Problem
from models.scenario import VnpuDvpp
from models.vnpu import (
    ASCEND_310P,
    Request,
    VnpuPlan,
    VnpuProblem,
    compile_vnpu,
    downgraded,
)

#: Upstream policy scores (``ScoreBestNPUNodes``): first node, first non-downgraded node.
SCORE_FIRST = 8
SCORE_NOT_DOWNGRADED = 16
#: RFC bonus over the best score (``defaultPreferPreviousScore``) and the score weight.
PREFER_PREVIOUS_SCORE = 100
SCORE_WEIGHT = 100


@dataclass
class ChipState:
    """A chip's free resources as the batch fills it."""

    id: int
    free_cores: int
    free_cpus: int
    segmented: bool
    dvpp: VnpuDvpp
    unstable: bool
    whole: bool  # untouched: a whole-card request may take it


@dataclass
class NodeState:
    """A vNPU node as the batch fills it."""

    chips: list[ChipState]
    templates: set[str]  # unfinished slices: before the session and placed in this batch
    has_whole: bool = False  # a whole-card rank of this batch is here
    slices: int = 0  # slices of this batch here

    def free_cores(self) -> int:
        """Idle AI cores (upstream sorts candidates by ``Idle[npu-core]``)."""
        return sum(chip.free_cores for chip in self.chips)


@dataclass
class VnpuState:
    """Every vNPU node's state."""

    nodes: list[NodeState] = field(default_factory=list)

    @classmethod
    def initial(cls, view: VnpuProblem) -> VnpuState:
        """The state before any pending vNPU job is placed."""
        nodes = []
        for vnode in view.nodes:
            chips = [ChipState(c.id, c.free_cores, c.free_cpus, c.segmented, c.dvpp, c.unstable,
                               vnode.untouched(c)) for c in vnode.chips]
            nodes.append(NodeState(chips, set(vnode.unfinished)))
        return cls(nodes)

    def copy(self) -> VnpuState:
        """An independent copy."""
        return VnpuState([NodeState([ChipState(**vars(c)) for c in n.chips], set(n.templates),
                                    n.has_whole, n.slices) for n in self.nodes])


def _chip_order(node: NodeState) -> list[ChipState]:
    return sorted(node.chips, key=lambda c: (c.free_cores, c.free_cpus, c.id))


def slice_fits(chip: ChipState, request: Request) -> bool:
    """Upstream ``isChipMeetResReq`` (no vGroup rule) and not unstable."""
    if chip.unstable or chip.free_cores < request.cores or chip.free_cpus < request.cpus:
        return False
    if request.dvpp is VnpuDvpp.YES:
        return chip.dvpp is VnpuDvpp.YES
    if request.dvpp is VnpuDvpp.NULL:
        return chip.dvpp is not VnpuDvpp.NO
    return True


def select_chips(node: NodeState, request: Request) -> tuple[int, ...] | None:
    """Upstream ``SelectChipFromNode``: the chips a request takes on a node, if it fits."""
    if request.is_whole:
        picked = [c.id for c in _chip_order(node) if c.whole]
        return tuple(picked[:request.whole_chips]) if len(picked) >= request.whole_chips else None
    for chip in _chip_order(node):
        if slice_fits(chip, request):
            return (chip.id,)
    return None


def template_ok(node: NodeState, request: Request) -> bool:
    """The one-template rule (order-free for whole cards, see the module docstring)."""
    if request.is_whole:
        return not node.templates and node.slices == 0
    if node.has_whole:
        return False
    return not node.templates or node.templates == {request.template}


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node that passes the predicate for one rank."""

    position: int  # in VnpuProblem.nodes
    request: Request  # after a downgrade, if any
    chips: tuple[int, ...]
    downgraded: bool


def candidate(view: VnpuProblem, state: VnpuState, j: int, v: int) -> Candidate | str:
    """Upstream's predicate for one rank of job ``j`` on node position ``v``: the
    candidate, or upstream's refusal text."""
    vnode = view.nodes[v]
    job = view.jobs[j]
    if not vnode.usable:
        return f"node {vnode.name} is unhealthy"
    request = view.request(j, v)
    if request is None:
        return f"task<{job.name}> get virTemplate is null on {vnode.name}"
    node = state.nodes[v]
    chips = select_chips(node, request)
    was_downgraded = False
    if chips is None:
        lower = downgraded(request) if vnode.kind == ASCEND_310P else None
        chips = select_chips(node, lower) if lower is not None else None
        if lower is None or chips is None:
            return (f"dynamic vnpu task<{job.name}> CheckNodeNPUByDyTask node {vnode.name} "
                    "resource not enough")
        request, was_downgraded = lower, True
    if not template_ok(node, request):
        return f"{job.name} is using {vnode.name}, and not rewrite"
    return Candidate(v, request, chips, was_downgraded)


def take(view: VnpuProblem, state: VnpuState, pick: Candidate) -> None:
    """Commit one rank's chips to ``state``."""
    node = state.nodes[pick.position]
    request = pick.request
    for chip in node.chips:
        if chip.id not in pick.chips:
            continue
        chip.whole = False
        if request.is_whole:
            chip.free_cores = chip.free_cpus = 0
            continue
        chip.free_cores -= request.cores
        chip.free_cpus -= request.cpus
        chip.segmented = True
        if request.dvpp is VnpuDvpp.YES:
            chip.dvpp = VnpuDvpp.NO
        elif request.dvpp is VnpuDvpp.NULL and chip.dvpp is not VnpuDvpp.NO:
            chip.dvpp = VnpuDvpp.NULL
    if request.is_whole:
        node.has_whole = True
    else:
        node.slices += 1
        node.templates.add(request.template or "")


def _tie_list(problem: Problem, view: VnpuProblem, j: int) -> list[int]:
    """Natural positions, holders of vNPU job ``j``'s image first (issue 34): the
    tie-break between equally scored nodes."""
    image = view.jobs[j].spec.image
    return tie_list(problem, image.name if image is not None else None)


def node_scores(problem: Problem, view: VnpuProblem, state: VnpuState, j: int, rank: int,
                cands: list[Candidate]) -> list[int]:
    """The final score of each candidate of one rank (policy score, RFC bonus, sub-healthy
    −1, ×100)."""
    natural = _tie_list(problem, view, j)
    order = sorted(range(len(cands)), key=lambda i: (
        state.nodes[cands[i].position].free_cores(), natural[view.nodes[cands[i].position].node]))
    score = [0] * len(cands)
    if not any(c.downgraded for c in cands):
        score[order[0]] += SCORE_FIRST
    else:
        for i in order:
            if not cands[i].downgraded:
                score[i] += SCORE_NOT_DOWNGRADED
                break
            score[i] += SCORE_FIRST
    job = view.jobs[j]
    if view.prefer_previous and any(o >= 0 for o in job.origin):
        bonus = max(score) + PREFER_PREVIOUS_SCORE
        own = job.origin[rank]
        peers = {o for r, o in enumerate(job.origin) if o >= 0 and r != rank}
        nodes = [view.nodes[c.position].node for c in cands]
        chosen = next((i for i, n in enumerate(nodes) if n == own), None) if own >= 0 else None
        if chosen is None:
            for group in ([i for i, n in enumerate(nodes) if n not in peers and n != own],
                          [i for i, n in enumerate(nodes) if n in peers]):
                if group:
                    chosen = max(group, key=lambda i: (score[i], -natural[nodes[i]]))
                    break
        if chosen is not None:
            score[chosen] = bonus
    return [max(0, s - 1) * SCORE_WEIGHT if problem.health_list[view.nodes[c.position].node]
            == SUBHEALTHY else s * SCORE_WEIGHT for s, c in zip(score, cands, strict=True)]


def place_vnpu_job(problem: Problem, view: VnpuProblem, j: int,
                   state: VnpuState) -> tuple[list[Candidate] | None, str | None]:
    """Place every rank of vNPU job ``j`` on a copy of ``state``: the picks, or a reason."""
    job = view.jobs[j]
    trial = state.copy()
    cached = [r for r in range(job.tasks) if job.origin[r] >= 0 and view.prefer_previous]
    rest = [r for r in range(job.tasks) if r not in set(cached)]
    picks: list[Candidate | None] = [None] * job.tasks
    natural = _tie_list(problem, view, j)
    for rank in cached + rest:
        cands: list[Candidate] = []
        refusals: list[str] = []
        for v in range(len(view.nodes)):
            found = candidate(view, trial, j, v)
            if isinstance(found, Candidate):
                cands.append(found)
            else:
                refusals.append(found)
        if not cands:
            shown = "; ".join(refusals[:3]) + (f"; ... ({len(refusals) - 3} more)"
                                               if len(refusals) > 3 else "")
            return None, (f"no vNPU node can take task {rank} of job '{job.name}' "
                          f"({len(view.nodes)} vNPU nodes: {shown or 'none in the cluster'})")
        scores = node_scores(problem, view, trial, j, rank, cands)
        best = max(range(len(cands)), key=lambda i: (
            scores[i], -natural[view.nodes[cands[i].position].node]))
        picks[rank] = cands[best]
        take(view, trial, cands[best])
    state.nodes = trial.nodes
    return [p for p in picks if p is not None], None


def greedy_vnpu(problem: Problem, state: VnpuState | None = None) -> VnpuPlan:
    """Place every pending vNPU job of ``problem`` greedily, in queue order."""
    view = compile_vnpu(problem)
    plan = VnpuPlan.empty(view)
    state = state.copy() if state is not None else VnpuState.initial(view)
    for j in view.queue:
        picks, reason = place_vnpu_job(problem, view, j, state)
        if picks is None:
            plan.reasons[j] = reason
            continue
        plan.nodes[j] = [view.nodes[p.position].node for p in picks]
        plan.chips[j] = [p.chips for p in picks]
        plan.downgraded[j] = [r for r, p in enumerate(picks) if p.downgraded]
    return plan
