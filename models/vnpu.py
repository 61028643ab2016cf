"""Dynamic vNPU (``huawei.com/npu-core``): chips, templates, requests, rules and terms.

The rules are upstream's (``models/docs/vnpu.md`` describes them with their sources): a task asks
for AI cores; on a node the request becomes either a whole-card request (a multiple of
the chip's AI cores) or a slice named by a template of the node's chip kind; slices take
AI cores and AI CPUs from one chip, whole cards take untouched chips; a node runs the
unfinished slices of one template only; a 310P slice may drop one AI CPU when the full
request does not fit (the downgrade).

The tables, a task's request on a node and the input rules (:func:`validate_vnpu`) live in
:mod:`models.vnpu_rules` (re-exported here), below :mod:`models.validation`.  This module
holds the compiled view of the vNPU part of a scenario (:class:`VnpuProblem`), the
placement rules
(:func:`check_vnpu`, used by :func:`models.check.check`) and the objective's vNPU terms
(:func:`vnpu_hosts`, used by :func:`models.objective.evaluate`).  vNPU nodes serve vNPU
jobs only: the compiled problem gives ordinary jobs no free chip on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from models.derived import Derived
from models.placement import JobPlacement
from models.scenario import VnpuDvpp, VnpuJob, VnpuNode
from models.vnpu_rules import (  # noqa: F401 - re-exported
    A3_PREFIX,
    ASCEND_310P,
    CHIP_GEOMETRY,
    TEMPLATES,
    Request,
    VChip,
    VNode,
    chip_geometry,
    downgraded,
    family_refusal,
    job_family,
    kind_family,
    node_refusal,
    request_error,
    task_request,
    template_name,
    validate_vnpu,
)

if TYPE_CHECKING:
    from models.compiled import Problem
    from models.placement import PlacementFile

# --------------------------------------------------------------------------- compiled view


@dataclass(frozen=True, slots=True)
class VJob:
    """One pending vNPU job."""

    index: int
    name: str
    owner_uid: str | None
    tasks: int
    priority: int
    image_size_gb: float
    spec: VnpuJob
    origin: tuple[int, ...]  # node index of the live cache entry per rank, -1 when none

    @property
    def label(self) -> str:
        """What a task asks for, for tables: ``vnpu 4 cores`` or ``vnpu vir02``."""
        if self.spec.template is not None:
            return f"vnpu {self.spec.template}"
        return f"vnpu {self.spec.ai_cores} cores"


@dataclass(frozen=True, eq=False)
class VnpuProblem:
    """The vNPU part of a compiled scenario."""

    nodes: tuple[VNode, ...]
    position: dict[int, int]  # problem node index → position in ``nodes``
    jobs: tuple[VJob, ...]
    job_index: dict[str, int]
    queue: tuple[int, ...]  # priority descending, then file order
    prefer_previous: bool
    _resolved: dict[tuple[int, int], Request | str] = field(default_factory=dict, repr=False)

    def resolve(self, j: int, v: int) -> Request | str:
        """Job ``j``'s per-task request on vNPU node position ``v``, or upstream's reason
        why the node refuses it whatever its chips hold: the job's family, the request
        against this node's own chip kind, no template (:func:`node_refusal`,
        :func:`task_request`)."""
        key = (j, v)
        found = self._resolved.get(key)
        if found is None:
            spec, vnode = self.jobs[j].spec, self.nodes[v]
            why = node_refusal(spec, vnode.kind)
            request = task_request(spec, vnode) if why is None else None
            found = request if request is not None else (
                why or f"task<{spec.name}> get virTemplate is null")
            self._resolved[key] = found
        return found

    def request(self, j: int, v: int) -> Request | None:
        """Job ``j``'s per-task request on vNPU node position ``v`` (None: cannot run)."""
        found = self.resolve(j, v)
        return found if isinstance(found, Request) else None

    def family(self, v: int) -> str:
        """The handler family of vNPU node position ``v`` (310P or 910)."""
        return kind_family(self.nodes[v].kind)


def compile_vnpu(problem: Problem) -> VnpuProblem:
    """The vNPU view of ``problem`` (computed once per problem)."""
    return problem.derived.get_or_compute(VNPU_VIEW, None, lambda: _compile_vnpu(problem))


#: The vNPU view of a problem (:func:`compile_vnpu`).
VNPU_VIEW: Derived[None, VnpuProblem] = Derived("vnpu view")


def _compile_vnpu(problem: Problem) -> VnpuProblem:
    scenario = problem.scenario
    nodes: list[VNode] = []
    for n, node in enumerate(scenario.nodes):
        spec = node.vnpu
        if spec is None:
            continue
        geometry = chip_geometry(spec)
        assert geometry is not None  # validated
        cores, cpus = geometry
        nodes.append(VNode(node=n, name=node.name, kind=spec.chip_kind, cores=cores,
                           cpus=cpus, chips=chip_states(spec, node.npus, cores, cpus),
                           unfinished=frozenset(spec.unfinished_templates),
                           usable=node.health.value != "unhealthy"))
    jobs = []
    for j, spec_job in enumerate(scenario.vnpu_jobs):
        cached = problem.live.get(spec_job.owner_uid or "", {}) if spec_job.owner_uid else {}
        origin = tuple(problem.node_index.get(cached.get(r, ""), -1)
                       for r in range(spec_job.tasks))
        jobs.append(VJob(index=j, name=spec_job.name, owner_uid=spec_job.owner_uid,
                         tasks=spec_job.tasks, priority=spec_job.priority,
                         image_size_gb=spec_job.image_size_gb, spec=spec_job, origin=origin))
    queue = tuple(sorted(range(len(jobs)), key=lambda j: (-jobs[j].priority, j)))
    return VnpuProblem(nodes=tuple(nodes), position={v.node: i for i, v in enumerate(nodes)},
                       jobs=tuple(jobs), job_index={job.name: job.index for job in jobs},
                       queue=queue, prefer_previous=problem.prefer_previous_node)


def chip_states(spec: VnpuNode, npus: int, cores: int, cpus: int) -> tuple[VChip, ...]:
    if spec.chips is None:
        return tuple(VChip(i, cores, cpus, False, VnpuDvpp.YES, False) for i in range(npus))
    return tuple(
        VChip(c.id, cores if c.free_cores is None else c.free_cores,
              cpus if c.free_cpus is None else c.free_cpus, c.segmented, c.dvpp, c.unstable)
        for c in sorted(spec.chips, key=lambda c: c.id))


# --------------------------------------------------------------------------- placement rules


@dataclass(frozen=True, slots=True)
class VnpuViolation:
    """One broken vNPU rule (turned into a :class:`models.check.Violation`)."""

    rule: str  # "vnpu-chip", "vnpu-template", "vnpu-request", "vnpu-downgrade",
    # "vnpu-family" or "format"/"gang"/"unhealthy"
    message: str
    job: str | None = None
    node: str | None = None


@dataclass(frozen=True, slots=True)
class RankUse:
    """What one placed vNPU rank takes: node position, chips and its request (the
    downgraded one when ``full`` is set: then ``full`` is the request it was cut from)."""

    job: int
    rank: int
    node: int  # position in VnpuProblem.nodes
    chips: tuple[int, ...]
    request: Request
    full: Request | None = None


def rank_uses(view: VnpuProblem, node_index: dict[str, int], placement: PlacementFile,
              out: list[VnpuViolation]) -> list[RankUse]:
    """Read the vNPU jobs of ``placement``; report malformed ones into ``out``, and ranks
    on nodes that refuse the job whatever their chips hold (family, request against the
    node's own chip kind, no template, downgrade shape)."""
    uses: list[RankUse] = []
    chip_ids = [{chip.id for chip in vnode.chips} for vnode in view.nodes]
    for jp in placement.jobs:
        j = view.job_index.get(jp.name)
        if j is None or not jp.placed:
            if j is not None and jp.ranks:
                out.append(VnpuViolation("gang", f"job '{jp.name}' is not placed but lists "
                                         "ranks", jp.name))
            continue
        job = view.jobs[j]
        keys = {str(r) for r in range(job.tasks)}
        if set(jp.ranks) != keys:
            out.append(VnpuViolation("gang", f"job '{job.name}' must place every rank "
                                     f"0..{job.tasks - 1} exactly once", job.name))
            continue
        down = set(jp.downgraded)
        if not down <= keys:
            out.append(VnpuViolation("format", f"job '{job.name}': downgraded ranks "
                                     f"{sorted(down - keys)} do not exist", job.name))
        families: dict[str, list[int]] = {}
        # node name → (position, node, family, the job's request there); ranks share nodes
        seen: dict[str, tuple[int, VNode, str, Request | str] | None] = {}
        for r in range(job.tasks):
            key = str(r)
            name = jp.ranks[key]
            if name in seen:
                known = seen[name]
            else:
                n = node_index.get(name)
                at = view.position.get(n) if n is not None else None
                known = seen[name] = (None if at is None else (
                    at, view.nodes[at], view.family(at), view.resolve(j, at)))
            if known is None:
                out.append(VnpuViolation("format", f"job '{job.name}' rank {r}: node '{name}' "
                                         "is not a vNPU node", job.name, name))
                continue
            v, vnode, node_family, found = known
            families.setdefault(node_family, []).append(r)
            if not vnode.usable:
                out.append(VnpuViolation("unhealthy", f"job '{job.name}' rank {r} is on "
                                         f"unhealthy node '{name}'", job.name, name))
            if not isinstance(found, Request):
                family = family_refusal(job.spec, vnode.kind) is not None
                out.append(VnpuViolation(
                    "vnpu-family" if family else "vnpu-request",
                    f"job '{job.name}' rank {r}: {vnode.kind} node '{name}' refuses the job "
                    f"({found})", job.name, name))
                continue
            request, full = found, None
            if key in down:
                lower = downgraded(request) if vnode.kind == ASCEND_310P else None
                if lower is None:
                    out.append(VnpuViolation(
                        "vnpu-downgrade", f"job '{job.name}' rank {r}: "
                        f"{request.template or 'a whole-card request'} cannot be downgraded "
                        f"on {vnode.kind} node '{name}' (only vir02 and vir04 on Ascend310P)",
                        job.name, name))
                    continue
                request, full = lower, request
            chips = tuple(jp.chips.get(key, ()))
            wanted = request.whole_chips or 1
            if len(chips) != wanted or len(set(chips)) != wanted:
                out.append(VnpuViolation("vnpu-chip", f"job '{job.name}' rank {r} must name "
                                         f"{wanted} distinct chip(s) of node '{name}', not "
                                         f"{list(chips)}", job.name, name))
                continue
            missing = [c for c in chips if c not in chip_ids[v]]
            if missing:
                out.append(VnpuViolation("vnpu-chip", f"job '{job.name}' rank {r}: node "
                                         f"'{name}' has no healthy chip {missing}",
                                         job.name, name))
                continue
            uses.append(RankUse(j, r, v, chips, request, full))
        if len(families) > 1:
            shown = ", ".join(f"{f}: ranks {ranks[:4]}{' ...' if len(ranks) > 4 else ''}"
                              for f, ranks in sorted(families.items()))
            out.append(VnpuViolation("vnpu-family", f"job '{job.name}' spans the 310P and the "
                                     f"910 vNPU handler ({shown}); a job has one "
                                     "ring-controller.atlas family", job.name))
    return uses


@dataclass
class ChipLoad:
    """What the placed ranks take from one chip (the plan's final state)."""

    cores: int = 0
    cpus: int = 0
    dvpp_yes: int = 0
    whole: bool = False


def check_vnpu(problem: Problem, placement: PlacementFile) -> list[VnpuViolation]:
    """Every vNPU rule over the vNPU jobs of ``placement`` (family, request against the
    node's own chip kind, chip capacity, whole cards, DVPP, unstable chips, one template
    per node, the downgrade rule)."""
    view = compile_vnpu(problem)
    out: list[VnpuViolation] = []
    uses = rank_uses(view, problem.node_index, placement, out)
    per_chip: dict[tuple[int, int], list[RankUse]] = {}
    per_node: dict[int, list[RankUse]] = {}
    for use in uses:
        per_node.setdefault(use.node, []).append(use)
        for c in use.chips:
            per_chip.setdefault((use.node, c), []).append(use)
    load: dict[tuple[int, int], ChipLoad] = {}
    for (v, c), users in sorted(per_chip.items()):
        vnode = view.nodes[v]
        chip = vnode.chip(c)
        assert chip is not None
        who = sorted({f"{view.jobs[u.job].name}/{u.rank}" for u in users})
        where = f"node '{vnode.name}' chip {c}"
        whole = [u for u in users if u.request.is_whole]
        if whole:
            load[(v, c)] = ChipLoad(vnode.cores, vnode.cpus, 0, True)
            if len(users) > 1:
                out.append(VnpuViolation("vnpu-chip", f"{where}: a whole-card rank shares the "
                                         f"chip ({who})", None, vnode.name))
            elif not vnode.untouched(chip):
                out.append(VnpuViolation("vnpu-chip", f"{where}: a whole-card rank needs an "
                                         "untouched chip with DVPP state other than 'no' "
                                         f"({who})", None, vnode.name))
            continue
        cores = sum(u.request.cores for u in users)
        cpus = sum(u.request.cpus for u in users)
        yes = sum(1 for u in users if u.request.dvpp is VnpuDvpp.YES)
        null = sum(1 for u in users if u.request.dvpp is VnpuDvpp.NULL)
        load[(v, c)] = ChipLoad(cores, cpus, yes)
        if cores > chip.free_cores or cpus > chip.free_cpus:
            out.append(VnpuViolation("vnpu-chip", f"{where}: slices take {cores} AI cores and "
                                     f"{cpus} AI CPUs but {chip.free_cores} and "
                                     f"{chip.free_cpus} are free ({who})", None, vnode.name))
        if chip.unstable:
            out.append(VnpuViolation("vnpu-chip", f"{where} is unstable (being cut) and takes "
                                     f"no slice ({who})", None, vnode.name))
        if yes > 1 or (yes and (null or chip.dvpp is not VnpuDvpp.YES)) or (
                null and chip.dvpp is VnpuDvpp.NO):
            out.append(VnpuViolation("vnpu-chip", f"{where}: DVPP conflict (state "
                                     f"{chip.dvpp.value}, {yes} 'yes' and {null} 'null' "
                                     f"slices; {who})", None, vnode.name))
    for v, users in sorted(per_node.items()):
        vnode = view.nodes[v]
        slices = [u for u in users if not u.request.is_whole]
        wholes = [u for u in users if u.request.is_whole]
        templates = set(vnode.unfinished) | {u.request.template or "" for u in slices}
        if slices and len(templates) > 1:
            out.append(VnpuViolation("vnpu-template", f"node '{vnode.name}' would run "
                                     f"unfinished slices of templates {sorted(templates)}; "
                                     "a node runs one template at a time", None, vnode.name))
        if wholes and (vnode.unfinished or slices):
            out.append(VnpuViolation("vnpu-template", f"node '{vnode.name}': a whole-card vNPU "
                                     "rank cannot join unfinished slices "
                                     f"{sorted(templates)}", None, vnode.name))
        for use in slices:
            if use.full is None:
                continue
            fits = full_fits_elsewhere(vnode, v, use, load)
            if fits is not None:
                job = view.jobs[use.job]
                out.append(VnpuViolation(
                    "vnpu-downgrade", f"job '{job.name}' rank {use.rank} on node "
                    f"'{vnode.name}' is downgraded to {use.request.template} although its "
                    f"full request {use.full.template} fits chip {fits} with the plan's other "
                    "slices placed (upstream downgrades only when no chip of the node takes "
                    "the full request)", job.name, vnode.name))
    return out


def full_fits_elsewhere(vnode: VNode, v: int, use: RankUse,
                        load: dict[tuple[int, int], ChipLoad]) -> int | None:
    """A chip of ``vnode`` where the full request of the downgraded rank ``use`` fits once
    every other rank of the plan is placed (None: none — the downgrade is upstream's).

    Upstream (``CheckNodeNPUByDyTask``) downgrades only when ``IsNodeNotMeetRes`` holds
    for the full request: no stable chip has its AI cores and AI CPUs free with a DVPP
    state that takes it.  Other ranks only take resources, so a chip where the full
    request fits in the plan's final state (without this rank) had it free whenever
    upstream placed this rank: such a downgrade is never upstream's.
    """
    full = use.full
    assert full is not None
    for chip in vnode.chips:
        if chip.unstable or chip.dvpp is VnpuDvpp.NO:
            continue
        taken = load.get((v, chip.id), ChipLoad())
        if taken.whole or taken.dvpp_yes:
            continue
        cores = chip.free_cores - taken.cores
        cpus = chip.free_cpus - taken.cpus
        if chip.id in use.chips:  # without this rank's own slice
            cores += use.request.cores
            cpus += use.request.cpus
        if cores >= full.cores and cpus >= full.cpus:
            return chip.id
    return None


def vnpu_hosts(problem: Problem, placement: PlacementFile) -> dict[int, list[int]]:
    """Node index per rank of every placed vNPU job of ``placement`` (by vNPU job index)."""
    view = compile_vnpu(problem)
    out: dict[int, list[int]] = {}
    for jp in placement.jobs:
        j = view.job_index.get(jp.name)
        if j is None or not jp.placed:
            continue
        out[j] = [problem.node_index[jp.ranks[str(r)]] for r in range(view.jobs[j].tasks)]
    return out


def achievable_vnpu_hits(view: VnpuProblem, job: VJob) -> int:
    """Ranks whose cached node is a usable vNPU node where the job's request resolves."""
    count = 0
    for origin in job.origin:
        v = view.position.get(origin) if origin >= 0 else None
        if v is not None and view.nodes[v].usable and view.request(job.index, v) is not None:
            count += 1
    return count


# --------------------------------------------------------------------------- engine answers


@dataclass
class VnpuPlan:
    """An engine's answer for the vNPU jobs: per job either its ranks or a reason.

    ``nodes[j]`` is the problem node index per rank (None: not placed), ``chips[j]`` the
    chip IDs per rank, ``downgraded[j]`` the ranks given the 310P AI-CPU downgrade.
    """

    nodes: list[list[int] | None]
    chips: list[list[tuple[int, ...]]]
    downgraded: list[list[int]]
    reasons: list[str | None]
    #: the engine stopped at its deadline before it reached every job
    out_of_time: bool = False

    @classmethod
    def empty(cls, view: VnpuProblem) -> VnpuPlan:
        """No vNPU job placed."""
        count = len(view.jobs)
        return cls([None] * count, [[] for _ in range(count)], [[] for _ in range(count)],
                   [None] * count)

    def as_mapping(self) -> dict[int, list[int]]:
        """vNPU job index → node index per rank, placed jobs only."""
        return {j: list(nodes) for j, nodes in enumerate(self.nodes) if nodes is not None}


def vnpu_job_placements(problem: Problem, plan: VnpuPlan,
                        hits: dict[str, int] | None = None,
                        candidates: dict[str, int] | None = None) -> list[JobPlacement]:
    """The contract's job entries of a :class:`VnpuPlan`."""
    view = compile_vnpu(problem)
    out = []
    for job in view.jobs:
        nodes = plan.nodes[job.index]
        cand = int((candidates or {}).get(job.name, 0))
        if nodes is None:
            out.append(JobPlacement.model_construct(
                name=job.name, placed=False, reason=plan.reasons[job.index] or "not placed",
                origin_candidates=cand))
            continue
        out.append(JobPlacement.model_construct(
            name=job.name, placed=True,
            ranks={str(r): problem.node_names[n] for r, n in enumerate(nodes)},
            chips={str(r): list(c) for r, c in enumerate(plan.chips[job.index])},
            downgraded=[str(r) for r in plan.downgraded[job.index]],
            origin_hits=int((hits or {}).get(job.name, 0)), origin_candidates=cand))
    return out


def vnpu_objective(problem: Problem, plan: VnpuPlan, placed_weight: tuple[int, ...],
                   hit_weight: int, subhealthy_weight: int,
                   image_weight: tuple[int, ...] = ()) -> int:
    """The vNPU part of :func:`models.objective.evaluate`'s objective (vNPU nodes serve no
    other job, so the whole objective is the other jobs' part plus this).  ``image_weight``:
    per vNPU job, the reward per hosting node holding its image (image locality)."""
    view = compile_vnpu(problem)
    total = 0
    used: set[int] = set()
    for j, nodes in plan.as_mapping().items():
        total += placed_weight[j]
        origin = view.jobs[j].origin
        total += hit_weight * sum(1 for r, n in enumerate(nodes) if n == origin[r])
        used.update(nodes)
        reward = image_weight[j] if j < len(image_weight) else 0
        image = view.jobs[j].spec.image
        mask = problem.image_mask(image.name if image is not None else None)
        if reward and mask is not None:
            total += reward * sum(1 for n in set(nodes) if mask[n])
    total -= subhealthy_weight * sum(1 for n in used if problem.health_list[n] == 1)
    return total
