"""Dynamic vNPU rules that need no compiled problem: chip kinds, template tables, a task's
request on a node, the 310P downgrade, and the input rules of a scenario's vNPU part.

:mod:`models.validation` uses this module; :mod:`models.vnpu` (the compiled view, the
placement rules and the objective's terms) builds on it.  ``models/docs/vnpu.md`` gives the
upstream sources.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from models.scenario import RingController, VnpuDvpp, VnpuJob, VnpuLevel, VnpuNode

if TYPE_CHECKING:
    from models.scenario import Scenario

ASCEND_310P = "Ascend310P"
#: The reason of the vNPU jobs an engine did not reach before its deadline.
OUT_OF_TIME_REASON = ("not placed: the time budget ran out before the vNPU greedy reached "
                      "this job")
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


#: The two handler families (upstream: the 910 and the 310P vNPU handler).
FAMILY_910 = "910"
FAMILY_310P = "310P"
#: ``ring-controller.atlas`` value → handler family (upstream ``GetPluginNameByReq``).
RING_CONTROLLER_FAMILY: dict[RingController, str] = {
    RingController.ASCEND_910: FAMILY_910,
    RingController.ASCEND_910B: FAMILY_910,
    RingController.HUAWEI_NPU: FAMILY_910,
    RingController.ASCEND_310P: FAMILY_310P,
}


def kind_family(kind: str) -> str:
    """The handler family whose jobs a chip kind serves (310P or 910)."""
    return FAMILY_310P if kind == ASCEND_310P else FAMILY_910


def job_family(spec: VnpuJob) -> str | None:
    """The family a job's ``ring-controller`` binds it to (None: not given)."""
    return None if spec.ring_controller is None else RING_CONTROLLER_FAMILY[spec.ring_controller]


def family_refusal(spec: VnpuJob, kind: str) -> str | None:
    """Why a job's ``ring-controller`` keeps it off a node of chip kind ``kind`` (None: it
    does not)."""
    family = job_family(spec)
    if family is None or family == kind_family(kind):
        return None
    assert spec.ring_controller is not None
    return (f"{spec.name} has ring-controller.atlas={spec.ring_controller.value} (the "
            f"{family} vNPU handler), the node's chips are {kind}")


def node_refusal(spec: VnpuJob, kind: str) -> str | None:
    """Why upstream refuses a job's tasks on a node of chip kind ``kind`` before looking at
    its chips (None: it does not): the job's handler family (``GetPluginNameByReq``), the
    request against that node's own kind (``ValidNPUJob``: ``checkDyVJobReq``,
    ``validDyVNPUJobLabel``) and whether a resource resolves there (``GetTaskResource``)."""
    return family_refusal(spec, kind) or request_error(spec, kind)


#: The request shapes upstream may downgrade (``taskAICPUCanBeDowngrade``): the template
#: of the full request → the template of the downgraded one.
DOWNGRADES = {"vir02": "vir02_1c", "vir04": "vir04_3c"}


def downgraded(request: Request) -> Request | None:
    """The 310P AI-CPU downgrade of a slice (vir02 → vir02_1c, vir04 → vir04_3c), if any
    (upstream ``taskAICPUCanBeDowngrade`` / ``downgradeTaskAICPU``: (2, 2) → (2, 1) and
    (4, 4, DVPP not ``yes``) → (4, 3))."""
    if request.template == "vir02":
        return Request(2, 1, request.dvpp, "vir02_1c", 0)
    if request.template == "vir04":
        return Request(4, 3, request.dvpp, "vir04_3c", 0)
    return None


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
        """True when a whole-card request may take ``chip`` (upstream
        ``selectChipFromNodeWhole``): not segmented, its whole resource free and its DVPP
        state not ``no`` (the chip must meet a full chip with DVPP ``null``)."""
        return (not chip.segmented and chip.free_cores == self.cores
                and chip.free_cpus == self.cpus and chip.dvpp is not VnpuDvpp.NO)


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
        family = job_family(job)
        own = sorted(k for k in kinds if family is None or kind_family(k) == family)
        if not own:
            continue  # nothing to check against: the job stays pending ("no vNPU node")
        errors = [text for kind in own if (text := request_error(job, kind))]
        if len(errors) == len(own):
            say(where, "ai-cores" if job.template is None else "template",
                "; ".join(errors))
    return messages


