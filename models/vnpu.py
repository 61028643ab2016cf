"""Dynamic vNPU (``huawei.com/npu-core``): chips, templates, requests, rules and terms.

The rules are upstream's (``docs/vnpu.md`` describes them with their sources): a task asks
for AI cores; on a node the request becomes either a whole-card request (a multiple of
the chip's AI cores) or a slice named by a template of the node's chip kind; slices take
AI cores and AI CPUs from one chip, whole cards take untouched chips; a node runs the
unfinished slices of one template only; a 310P slice may drop one AI CPU when the full
request does not fit (the downgrade).

This module holds the tables, the compiled view of the vNPU part of a scenario
(:class:`VnpuProblem`), the input rules (:func:`validate_vnpu`), the placement rules
(:func:`check_vnpu`, used by :func:`models.check.check`) and the objective's vNPU terms
(:func:`vnpu_hosts`, used by :func:`models.objective.evaluate`).  vNPU nodes serve vNPU
jobs only: the compiled problem gives ordinary jobs no free chip on them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from models.placement import JobPlacement
from models.scenario import VnpuDvpp, VnpuJob, VnpuLevel, VnpuNode

if TYPE_CHECKING:
    from models.compiled import Problem
    from models.placement import PlacementFile
    from models.scenario import Scenario

ASCEND_310P = "Ascend310P"
A3_PREFIX = "Ascend910A3-"

#: (AI cores, AI CPUs) per chip a chip kind may have (upstream ``initTemplate``); the
#: first entry is the default when a node gives no ``ai-cores``.
CHIP_GEOMETRY: dict[str, tuple[tuple[int, int], ...]] = {
    ASCEND_310P: ((8, 7), (10, 7)),
    "910B1": ((25, 6),),
    "910B2C": ((24, 6),),
    "910B2": ((24, 6),),
    "910B3": ((20, 6),),
    "910B4": ((20, 6),),
    "910B4-1": ((20, 6),),
    "Ascend910A3-20": ((20, 6),),
    "Ascend910A3-24": ((24, 6),),
}

_N = VnpuDvpp.NULL
_B1_TABLE = {"vir06_1c_16g": (6, 1, _N), "vir03_1c_8g": (3, 1, _N), "vir12_3c_32g": (12, 3, _N)}
_B3_TABLE = {"vir05_1c_16g": (5, 1, _N), "vir10_3c_32g": (10, 3, _N)}

#: Template tables per chip kind (upstream ``getJobTemplate``): name → (cores, CPUs, DVPP).
TEMPLATES: dict[str, dict[str, tuple[int, int, VnpuDvpp]]] = {
    ASCEND_310P: {
        "vir01": (1, 1, _N),
        "vir02": (2, 2, _N),
        "vir02_1c": (2, 1, _N),
        "vir04": (4, 4, _N),
        "vir04_3c": (4, 3, _N),
        "vir04_3c_ndvpp": (4, 3, VnpuDvpp.NO),
        "vir04_4c_dvpp": (4, 4, VnpuDvpp.YES),
    },
    "910B1": _B1_TABLE,
    "910B2C": _B1_TABLE,
    "910B2": _B1_TABLE,
    "910B3": _B3_TABLE,
    "910B4": {
        "vir05_1c_8g": (5, 1, _N),
        "vir10_3c_16g_nm": (10, 3, VnpuDvpp.NO),
        "vir10_4c_16g_m": (10, 4, VnpuDvpp.YES),
        "vir10_3c_16g": (10, 3, _N),
    },
    "910B4-1": _B3_TABLE,
    "Ascend910A3-20": _B3_TABLE,
    "Ascend910A3-24": {"vir06_1c_16g": (6, 1, _N), "vir12_3c_32g": (12, 3, _N)},
}

#: Chip kinds whose jobs the 910 vNPU handler checks: (fixed slice sizes, whole-card unit).
_REQUEST_RULE_910: dict[str, tuple[tuple[int, ...], int]] = {
    "910B1": ((6, 12), 25),
    "910B2C": ((6, 12), 24),
    "910B2": ((6, 12), 24),
    "910B3": ((5, 10), 20),
    "910B4": ((5, 10), 20),
    "910B4-1": ((5, 10), 20),
    "Ascend910A3-20": ((5, 10), 20),
    "Ascend910A3-24": ((6, 12), 24),
}


@dataclass(frozen=True, slots=True)
class Request:
    """What one task takes on one node: a slice of one chip or ``whole_chips`` chips."""

    cores: int
    cpus: int
    dvpp: VnpuDvpp
    template: str | None  # None for a whole-card request
    whole_chips: int  # 0 for a slice

    @property
    def is_whole(self) -> bool:
        """True for a whole-card request."""
        return self.whole_chips > 0


def template_name(kind: str, cores: int, level: VnpuLevel, dvpp: VnpuDvpp) -> str | None:
    """Upstream's template for a slice of ``cores`` AI cores on chip kind ``kind``."""
    if kind == ASCEND_310P:
        if cores == 1:
            return "vir01"
        if cores == 2:
            return "vir02" if level is VnpuLevel.HIGH else "vir02_1c"
        if cores == 4:
            if dvpp is VnpuDvpp.YES:
                return "vir04_4c_dvpp"
            if dvpp is VnpuDvpp.NO:
                return "vir04_3c_ndvpp"
            return "vir04" if level is VnpuLevel.HIGH else "vir04_3c"
        return None
    if kind == "910B4":
        if cores == 5:
            return "vir05_1c_8g"
        if cores == 10:
            return {VnpuDvpp.YES: "vir10_4c_16g_m",
                    VnpuDvpp.NO: "vir10_3c_16g_nm"}.get(dvpp, "vir10_3c_16g")
        return None
    table = TEMPLATES.get(kind, {})
    for name, (size, _, _) in table.items():
        if size == cores:
            return name
    return None


def downgraded(request: Request) -> Request | None:
    """The 310P AI-CPU downgrade of a slice (vir02 → vir02_1c, vir04 → vir04_3c), if any."""
    if request.template == "vir02":
        return Request(2, 1, request.dvpp, "vir02_1c", 0)
    if request.template == "vir04":
        return Request(4, 3, request.dvpp, "vir04_3c", 0)
    return None


# --------------------------------------------------------------------------- compiled view


@dataclass(frozen=True, slots=True)
class VChip:
    """One healthy chip of a vNPU node with its state at session start."""

    id: int
    free_cores: int
    free_cpus: int
    segmented: bool
    dvpp: VnpuDvpp
    unstable: bool


@dataclass(frozen=True, slots=True)
class VNode:
    """One vNPU node."""

    node: int  # index into the problem's nodes
    name: str
    kind: str
    cores: int  # AI cores per chip
    cpus: int  # AI CPUs per chip
    chips: tuple[VChip, ...]
    unfinished: frozenset[str]
    usable: bool  # not unhealthy

    def chip(self, chip_id: int) -> VChip | None:
        """The chip with ID ``chip_id``, if the node has it."""
        for chip in self.chips:
            if chip.id == chip_id:
                return chip
        return None

    def untouched(self, chip: VChip) -> bool:
        """True when ``chip`` is whole and free (a whole-card request may take it)."""
        return (not chip.segmented and chip.free_cores == self.cores
                and chip.free_cpus == self.cpus)


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


@dataclass(frozen=True, eq=False)
class VnpuProblem:
    """The vNPU part of a compiled scenario."""

    nodes: tuple[VNode, ...]
    position: dict[int, int]  # problem node index → position in ``nodes``
    jobs: tuple[VJob, ...]
    job_index: dict[str, int]
    queue: tuple[int, ...]  # priority descending, then file order
    prefer_previous: bool

    def request(self, j: int, v: int) -> Request | None:
        """Job ``j``'s per-task request on vNPU node position ``v`` (None: cannot run)."""
        return task_request(self.jobs[j].spec, self.nodes[v])


def task_request(spec: VnpuJob, vnode: VNode) -> Request | None:
    """Upstream's ``GetTaskResource`` on one node (None when no resource resolves)."""
    table = TEMPLATES[vnode.kind]
    if spec.template is not None:
        found = table.get(spec.template)
        if found is None:
            return None
        return Request(found[0], found[1], found[2], spec.template, 0)
    cores = spec.ai_cores or 0
    if cores % vnode.cores == 0:
        chips = cores // vnode.cores
        return Request(cores, chips * vnode.cpus, VnpuDvpp.NULL, None, chips)
    name = template_name(vnode.kind, cores, spec.vnpu_level, spec.vnpu_dvpp)
    if name is None:
        return None
    c, p, d = table[name]
    return Request(c, p, d, name, 0)


def chip_geometry(spec: VnpuNode) -> tuple[int, int] | None:
    """(AI cores, AI CPUs) per chip of a node description, None when the kind is unknown
    or the AI-core count is not one the kind has."""
    options = CHIP_GEOMETRY.get(spec.chip_kind)
    if options is None:
        return None
    cores = spec.ai_cores if spec.ai_cores is not None else options[0][0]
    for known_cores, known_cpus in options:
        if known_cores == cores:
            return cores, spec.ai_cpus if spec.ai_cpus is not None else known_cpus
    return None


def compile_vnpu(problem: Problem) -> VnpuProblem:
    """The vNPU view of ``problem`` (computed once per problem)."""
    found: VnpuProblem | None = problem.memo.get("vnpu")
    if found is not None:
        return found
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
                           cpus=cpus, chips=_chips(spec, node.npus, cores, cpus),
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
    view = VnpuProblem(nodes=tuple(nodes), position={v.node: i for i, v in enumerate(nodes)},
                       jobs=tuple(jobs), job_index={job.name: job.index for job in jobs},
                       queue=queue, prefer_previous=problem.prefer_previous_node)
    problem.memo["vnpu"] = view
    return view


def _chips(spec: VnpuNode, npus: int, cores: int, cpus: int) -> tuple[VChip, ...]:
    if spec.chips is None:
        return tuple(VChip(i, cores, cpus, False, VnpuDvpp.YES, False) for i in range(npus))
    return tuple(
        VChip(c.id, cores if c.free_cores is None else c.free_cores,
              cpus if c.free_cpus is None else c.free_cpus, c.segmented, c.dvpp, c.unstable)
        for c in sorted(spec.chips, key=lambda c: c.id))


# --------------------------------------------------------------------------- input rules


def request_error(spec: VnpuJob, kind: str) -> str | None:
    """Upstream's ``ValidNPUJob`` text for a job on chip kind ``kind`` (None: valid)."""
    name = spec.name
    if spec.template is not None:
        if spec.template in TEMPLATES[kind]:
            return None
        return f"template '{spec.template}' is not in the {kind} table"
    cores = spec.ai_cores or 0
    if kind == ASCEND_310P:
        if not (cores in (1, 2, 4) or cores % 8 == 0 or cores % 10 == 0):
            return (f"expected: task req npu should be [1,2,4,8,10], actual: task<{name}> "
                    f"req npu: {cores}, ")
        if cores in (1, 2) and spec.vnpu_dvpp is not VnpuDvpp.NULL:
            return f"{name} req {cores} ai-core, but dvpp label is:{spec.vnpu_dvpp.value}"
        return None
    fixed, unit = _REQUEST_RULE_910[kind]
    if not (cores in fixed or cores % unit == 0):
        return f"{name} req err {cores}"
    if not (kind == "910B4" and cores == 10):
        if spec.vnpu_level is not VnpuLevel.LOW:
            return (f"{name} req {cores} ai-core and npu is {kind}, but cpu level "
                    f"is:{spec.vnpu_level.value}")
        if spec.vnpu_dvpp is not VnpuDvpp.NULL:
            return (f"{name} req {cores} ai-core and npu is {kind}, but dvpp label "
                    f"is:{spec.vnpu_dvpp.value}")
    return None


def validate_vnpu(scenario: Scenario, source: str, other_job_names: set[str]) -> list[str]:
    """Every input rule of the vNPU part of a scenario, one message per error."""
    messages: list[str] = []

    def say(where: str, field: str, text: str) -> None:
        messages.append(f"{source}: {where}: field '{field}': {text}")

    kinds: set[str] = set()
    for node in scenario.nodes:
        spec = node.vnpu
        if spec is None:
            continue
        where = f"node '{node.name}'"
        if spec.chip_kind not in CHIP_GEOMETRY:
            say(where, "vnpu.chip-kind", f"unknown chip kind '{spec.chip_kind}'; known: "
                f"{', '.join(CHIP_GEOMETRY)}")
            continue
        kinds.add(spec.chip_kind)
        geometry = chip_geometry(spec)
        if geometry is None:
            allowed = sorted({c for c, _ in CHIP_GEOMETRY[spec.chip_kind]})
            say(where, "vnpu.ai-cores", f"{spec.chip_kind} chips have {allowed} AI cores, "
                f"not {spec.ai_cores}")
            continue
        cores, cpus = geometry
        table = TEMPLATES[spec.chip_kind]
        for name in spec.unfinished_templates:
            if name not in table:
                say(where, "vnpu.unfinished-templates",
                    f"template '{name}' is not in the {spec.chip_kind} table "
                    f"({', '.join(table)})")
        if spec.chips is None:
            continue
        if len(spec.chips) > node.npus:
            say(where, "vnpu.chips", f"{len(spec.chips)} chips listed but npus is {node.npus}")
        ids = Counter(chip.id for chip in spec.chips)
        dup = sorted(i for i, c in ids.items() if c > 1)
        if dup:
            say(where, "vnpu.chips", f"chip ids {dup} are listed more than once")
        for chip in spec.chips:
            if chip.free_cores is not None and chip.free_cores > cores:
                say(where, f"vnpu.chips[{chip.id}].free-cores",
                    f"free-cores {chip.free_cores} exceeds the chip's {cores} AI cores")
            if chip.free_cpus is not None and chip.free_cpus > cpus:
                say(where, f"vnpu.chips[{chip.id}].free-cpus",
                    f"free-cpus {chip.free_cpus} exceeds the chip's {cpus} AI CPUs")
    names: set[str] = set()
    for job in scenario.vnpu_jobs:
        where = f"vnpu job '{job.name}'"
        if job.name in names or job.name in other_job_names:
            say(where, "name", "duplicate job name")
        names.add(job.name)
        if (job.ai_cores is None) == (job.template is None):
            say(where, "ai-cores", "give exactly one of ai-cores (huawei.com/npu-core) and "
                "template")
            continue
        if not kinds:
            continue  # nothing to check against: the job stays pending ("no vNPU node")
        errors = [text for kind in sorted(kinds) if (text := request_error(job, kind))]
        if len(errors) == len(kinds):
            say(where, "ai-cores" if job.template is None else "template",
                "; ".join(errors))
    return messages


# --------------------------------------------------------------------------- placement rules


@dataclass(frozen=True, slots=True)
class VnpuViolation:
    """One broken vNPU rule (turned into a :class:`models.check.Violation`)."""

    rule: str  # "vnpu-chip", "vnpu-template" or "format"/"gang"/"unhealthy"
    message: str
    job: str | None = None
    node: str | None = None


@dataclass(frozen=True, slots=True)
class RankUse:
    """What one placed vNPU rank takes: node position, chips and its request."""

    job: int
    rank: int
    node: int  # position in VnpuProblem.nodes
    chips: tuple[int, ...]
    request: Request


def rank_uses(view: VnpuProblem, node_index: dict[str, int], placement: PlacementFile,
              out: list[VnpuViolation]) -> list[RankUse]:
    """Read the vNPU jobs of ``placement``; report malformed ones into ``out``."""
    uses: list[RankUse] = []
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
        for r in range(job.tasks):
            name = jp.ranks[str(r)]
            n = node_index.get(name)
            v = view.position.get(n) if n is not None else None
            if v is None:
                out.append(VnpuViolation("format", f"job '{job.name}' rank {r}: node '{name}' "
                                         "is not a vNPU node", job.name, name))
                continue
            vnode = view.nodes[v]
            if not vnode.usable:
                out.append(VnpuViolation("unhealthy", f"job '{job.name}' rank {r} is on "
                                         f"unhealthy node '{name}'", job.name, name))
            request = view.request(j, v)
            if request is None:
                out.append(VnpuViolation("vnpu-chip", f"job '{job.name}' rank {r}: its request "
                                         f"has no resource on {vnode.kind} node '{name}'",
                                         job.name, name))
                continue
            if str(r) in down:
                lower = downgraded(request) if vnode.kind == ASCEND_310P else None
                if lower is None:
                    out.append(VnpuViolation("vnpu-chip", f"job '{job.name}' rank {r}: "
                                             f"{request.template or 'whole-card'} cannot be "
                                             f"downgraded on node '{name}'", job.name, name))
                    continue
                request = lower
            chips = tuple(jp.chips.get(str(r), []))
            wanted = request.whole_chips or 1
            if len(chips) != wanted or len(set(chips)) != wanted:
                out.append(VnpuViolation("vnpu-chip", f"job '{job.name}' rank {r} must name "
                                         f"{wanted} distinct chip(s) of node '{name}', not "
                                         f"{list(chips)}", job.name, name))
                continue
            missing = [c for c in chips if vnode.chip(c) is None]
            if missing:
                out.append(VnpuViolation("vnpu-chip", f"job '{job.name}' rank {r}: node "
                                         f"'{name}' has no healthy chip {missing}",
                                         job.name, name))
                continue
            uses.append(RankUse(j, r, v, chips, request))
    return uses


def check_vnpu(problem: Problem, placement: PlacementFile) -> list[VnpuViolation]:
    """Every vNPU rule over the vNPU jobs of ``placement`` (chip capacity, whole cards,
    DVPP, unstable chips, one template per node)."""
    view = compile_vnpu(problem)
    out: list[VnpuViolation] = []
    uses = rank_uses(view, problem.node_index, placement, out)
    per_chip: dict[tuple[int, int], list[RankUse]] = {}
    per_node: dict[int, list[RankUse]] = {}
    for use in uses:
        per_node.setdefault(use.node, []).append(use)
        for c in use.chips:
            per_chip.setdefault((use.node, c), []).append(use)
    for (v, c), users in sorted(per_chip.items()):
        vnode = view.nodes[v]
        chip = vnode.chip(c)
        assert chip is not None
        who = sorted({f"{view.jobs[u.job].name}/{u.rank}" for u in users})
        where = f"node '{vnode.name}' chip {c}"
        whole = [u for u in users if u.request.is_whole]
        if whole:
            if len(users) > 1:
                out.append(VnpuViolation("vnpu-chip", f"{where}: a whole-card rank shares the "
                                         f"chip ({who})", None, vnode.name))
            elif not vnode.untouched(chip):
                out.append(VnpuViolation("vnpu-chip", f"{where}: a whole-card rank needs an "
                                         f"untouched chip ({who})", None, vnode.name))
            continue
        cores = sum(u.request.cores for u in users)
        cpus = sum(u.request.cpus for u in users)
        if cores > chip.free_cores or cpus > chip.free_cpus:
            out.append(VnpuViolation("vnpu-chip", f"{where}: slices take {cores} AI cores and "
                                     f"{cpus} AI CPUs but {chip.free_cores} and "
                                     f"{chip.free_cpus} are free ({who})", None, vnode.name))
        if chip.unstable:
            out.append(VnpuViolation("vnpu-chip", f"{where} is unstable (being cut) and takes "
                                     f"no slice ({who})", None, vnode.name))
        yes = sum(1 for u in users if u.request.dvpp is VnpuDvpp.YES)
        null = sum(1 for u in users if u.request.dvpp is VnpuDvpp.NULL)
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
    return out


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
                   hit_weight: int, subhealthy_weight: int) -> int:
    """The vNPU part of :func:`models.objective.evaluate`'s objective (vNPU nodes serve no
    other job, so the whole objective is the other jobs' part plus this)."""
    view = compile_vnpu(problem)
    total = 0
    used: set[int] = set()
    for j, nodes in plan.as_mapping().items():
        total += placed_weight[j]
        origin = view.jobs[j].origin
        total += hit_weight * sum(1 for r, n in enumerate(nodes) if n == origin[r])
        used.update(nodes)
    total -= subhealthy_weight * sum(1 for n in used if problem.health_list[n] == 1)
    return total
