"""Greedy placement of dynamic vNPU jobs (``huawei.com/npu-core``), per upstream.

Jobs in queue order (priority descending, then file order), each all-or-nothing; ranks
with a cached node first, then the others, each by rank (the RFC's ``TaskOrderFn``).  Per
rank (``models/docs/vnpu.md`` §5–§6):

* **predicate** — the node is a usable vNPU node of the job's family (its
  ``ring-controller``, else the family of the job's first placed rank), the request
  passes upstream's job check against the node's own chip kind and resolves there, one
  chip takes the slice (AI cores, AI CPUs, DVPP, stable) or enough untouched chips (DVPP
  state not ``no``) take the whole card; a 310P node where the full slice fits no chip
  is tried with the AI-CPU downgrade (and remembered as downgraded for this rank); the
  node's unfinished slices (before the session and placed in this batch) are all of the
  rank's template;
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

Speed without changing a placement (a test compares with the plain loop): each node's
predicate is evaluated once per job and again only for the node a rank took; without the
RFC bonus the winner is found in one pass and kept while its slice still fits the same
chip; a gang larger than an upper bound of the room is refused without trying its ranks.
With a deadline the greedy stops there (the jobs it did not finish stay pending).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from heuristics.images import tie_list
from models.compiled import SUBHEALTHY, Problem
from models.errors import OutOfTime
from models.scenario import VnpuDvpp
from models.vnpu import (
    ASCEND_310P,
    Request,
    VnpuPlan,
    VnpuProblem,
    compile_vnpu,
    downgraded,
)
from models.vnpu_rules import OUT_OF_TIME_REASON

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
    idle: int = -1  # the chips' free AI cores (kept up to date by :func:`take`; -1: not
    # counted yet)

    def free_cores(self) -> int:
        """Idle AI cores (upstream sorts candidates by ``Idle[npu-core]``)."""
        if self.idle < 0:
            self.idle = sum(chip.free_cores for chip in self.chips)
        return self.idle


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
                                    n.has_whole, n.slices, n.idle) for n in self.nodes])


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
    fitting = [c for c in node.chips if slice_fits(c, request)]
    if not fitting:
        return None
    return (min(fitting, key=lambda c: (c.free_cores, c.free_cpus, c.id)).id,)


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


def candidate(view: VnpuProblem, state: VnpuState, j: int, v: int,
              family: str | None = None) -> Candidate | str:
    """Upstream's predicate for one rank of job ``j`` on node position ``v``: the
    candidate, or upstream's refusal text.  ``family``: the family the job's placed ranks
    already use (a job takes one family)."""
    vnode = view.nodes[v]
    job = view.jobs[j]
    if not vnode.usable:
        return f"node {vnode.name} is unhealthy"
    if family is not None and view.family(v) != family:
        return (f"{job.name}'s other tasks are on {family} nodes; {vnode.name} is "
                f"{vnode.kind}")
    found = view.resolve(j, v)
    if not isinstance(found, Request):
        return f"{found} on {vnode.name}"
    request = found
    node = state.nodes[v]
    chips = select_chips(node, request)
    was_downgraded = False
    if chips is None:
        # upstream downgrades only when the full request fits no chip of the node
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
            if node.idle >= 0:
                node.idle -= chip.free_cores
            chip.free_cores = chip.free_cpus = 0
            continue
        if node.idle >= 0:
            node.idle -= request.cores
        chip.free_cores -= request.cores
        chip.free_cpus -= request.cpus
        chip.segmented = True
        if request.dvpp is VnpuDvpp.YES:
            chip.dvpp = VnpuDvpp.NO
        elif request.dvpp is VnpuDvpp.NULL and chip.dvpp is not VnpuDvpp.NO:
            chip.dvpp = VnpuDvpp.NULL
        break  # a slice takes one chip
    if request.is_whole:
        node.has_whole = True
    else:
        node.slices += 1
        node.templates.add(request.template or "")


def _tie_list(problem: Problem, view: VnpuProblem, j: int) -> list[int]:
    """Natural positions, holders of vNPU job ``j``'s image first: the
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


#: Ranks placed between two looks at the clock.
CLOCK_EVERY = 32


def _winner(problem: Problem, view: VnpuProblem, state: VnpuState, cands: list[Candidate],
            natural: list[int]) -> int:
    """The best candidate when no RFC bonus applies: what :func:`node_scores` ranks first,
    found in one pass.  The first candidate in (free AI cores, tie order) order that is
    not downgraded wins (8 or 16 points against at most 8); when every candidate is
    downgraded all score 8 and the first in tie order that is not sub-healthy wins.
    ``natural`` is the job's tie order (:func:`_tie_list`: natural node order, image
    holders first when image locality applies)."""
    health = problem.health_list
    full = [i for i, c in enumerate(cands) if not c.downgraded]
    if full:
        return min(full, key=lambda i: (state.nodes[cands[i].position].free_cores(),
                                        natural[view.nodes[cands[i].position].node]))
    return min(range(len(cands)), key=lambda i: (
        health[view.nodes[cands[i].position].node] == SUBHEALTHY,
        natural[view.nodes[cands[i].position].node]))


def rank_bound(view: VnpuProblem, state: VnpuState, j: int) -> int:
    """At most how many ranks of job ``j`` the vNPU nodes can take in ``state`` (an upper
    bound: AI cores and AI CPUs per chip with the cheaper of the full and the downgraded
    request, one DVPP ``yes`` slice per chip, no unstable chip, untouched chips for whole
    cards, the node's unfinished template, one family per job)."""
    per_family: dict[str, int] = {}
    for v, vnode in enumerate(view.nodes):
        request = view.request(j, v)
        if request is None or not vnode.usable:
            continue
        node = state.nodes[v]
        count = 0
        if request.is_whole:
            if not node.templates and node.slices == 0:
                count = sum(1 for chip in node.chips if chip.whole) // request.whole_chips
        else:
            lower = downgraded(request) if vnode.kind == ASCEND_310P else None
            allowed = {request.template} | ({lower.template} if lower is not None else set())
            if not node.has_whole and (not node.templates or node.templates <= allowed):
                cpus = lower.cpus if lower is not None else request.cpus
                for chip in node.chips:
                    if chip.unstable:
                        continue
                    fit = min(chip.free_cores // request.cores,
                              chip.free_cpus // cpus if cpus else chip.free_cores)
                    count += min(fit, 1) if request.dvpp is VnpuDvpp.YES else fit
        family = view.family(v)
        per_family[family] = per_family.get(family, 0) + count
    return max(per_family.values(), default=0)


def _same_chip(state: VnpuState, pick: Candidate) -> Candidate | None:
    """``pick`` again when its slice still fits its chip after it was taken there: that
    chip lost free resources and the others did not change, so the chip order still puts
    it first among the chips that fit, and the node's other answers (downgrade or not,
    template) are unchanged.  None: work it out again (:func:`candidate`)."""
    if pick.request.is_whole:
        return None
    chip_id = pick.chips[0]
    for chip in state.nodes[pick.position].chips:
        if chip.id == chip_id:
            return pick if slice_fits(chip, pick.request) else None
    return None


def place_vnpu_job(problem: Problem, view: VnpuProblem, j: int, state: VnpuState,
                   deadline: float | None = None
                   ) -> tuple[list[Candidate] | None, str | None]:
    """Place every rank of vNPU job ``j`` on a copy of ``state``: the picks, or a reason.

    A rank changes only the node it takes, so each node's predicate is evaluated once per
    job and again only after a rank took that node.  Raises :class:`OutOfTime` past
    ``deadline`` (``state`` unchanged).
    """
    job = view.jobs[j]
    room = rank_bound(view, state, j)
    if 0 < room < job.tasks:
        # a gang that cannot fit: its ranks are not tried one by one (65,536 tasks: ms,
        # not seconds); with no room at all the first rank's refusals say why
        return None, (f"no vNPU node can take task {room} of job '{job.name}' (resource not "
                      f"enough: the nodes that accept its request hold at most {room} of its "
                      f"{job.tasks} tasks)")
    trial = state.copy()
    cached = [r for r in range(job.tasks) if job.origin[r] >= 0 and view.prefer_previous]
    cached_set = set(cached)
    rest = [r for r in range(job.tasks) if r not in cached_set]
    rfc = view.prefer_previous and any(o >= 0 for o in job.origin)  # node_scores' bonus
    picks: list[Candidate | None] = [None] * job.tasks
    natural = _tie_list(problem, view, j)
    family: str | None = None
    found = [candidate(view, trial, j, v) for v in range(len(view.nodes))]
    last: Candidate | None = None
    for count, rank in enumerate(cached + rest):
        if deadline is not None and count % CLOCK_EVERY == 0 and (
                time.perf_counter() > deadline):
            raise OutOfTime
        if not rfc and last is not None:
            # only the last winner's node changed, and it lost free AI cores: while it is
            # still a candidate of the same kind (downgraded or not) it still wins
            again = found[last.position]
            if isinstance(again, Candidate) and again.downgraded == last.downgraded:
                picks[rank] = last = again
                take(view, trial, again)
                found[again.position] = (_same_chip(trial, again)
                                         or candidate(view, trial, j, again.position, family))
                continue
        cands = [c for c in found if isinstance(c, Candidate)]
        if not cands:
            refusals = [c for c in found if isinstance(c, str)]
            shown = "; ".join(refusals[:3]) + (f"; ... ({len(refusals) - 3} more)"
                                               if len(refusals) > 3 else "")
            return None, (f"no vNPU node can take task {rank} of job '{job.name}' "
                          f"({len(view.nodes)} vNPU nodes: {shown or 'none in the cluster'})")
        if rfc:
            scores = node_scores(problem, view, trial, j, rank, cands)
            best = max(range(len(cands)), key=lambda i: (
                scores[i], -natural[view.nodes[cands[i].position].node]))
        else:
            best = _winner(problem, view, trial, cands, natural)
        pick = cands[best]
        picks[rank] = last = pick
        take(view, trial, pick)
        if family is None:
            family = view.family(pick.position)
            found = [candidate(view, trial, j, v, family) for v in range(len(view.nodes))]
        else:
            found[pick.position] = candidate(view, trial, j, pick.position, family)
    state.nodes = trial.nodes
    return [p for p in picks if p is not None], None


def greedy_vnpu(problem: Problem, state: VnpuState | None = None,
                deadline: float | None = None) -> VnpuPlan:
    """Place every pending vNPU job of ``problem`` greedily, in queue order.

    Past ``deadline`` (``time.perf_counter()`` seconds) the job being placed and every
    later one stay pending with :data:`OUT_OF_TIME_REASON` and the plan's ``out_of_time``
    is set: the answer is still valid (a gang is placed whole or not at all).
    """
    view = compile_vnpu(problem)
    plan = VnpuPlan.empty(view)
    state = state.copy() if state is not None else VnpuState.initial(view)
    for at, j in enumerate(view.queue):
        try:
            if deadline is not None and time.perf_counter() > deadline:
                raise OutOfTime
            picks, reason = place_vnpu_job(problem, view, j, state, deadline)
        except OutOfTime:
            for later in view.queue[at:]:
                plan.reasons[later] = OUT_OF_TIME_REASON
            plan.out_of_time = True
            break
        if picks is None:
            plan.reasons[j] = reason
            continue
        plan.nodes[j] = [view.nodes[p.position].node for p in picks]
        plan.chips[j] = [p.chips for p in picks]
        plan.downgraded[j] = [r for r, p in enumerate(picks) if p.downgraded]
    return plan
