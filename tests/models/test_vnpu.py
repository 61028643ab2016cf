"""The vNPU contract: templates and requests (upstream's unit-test facts), input rules,
the validator's chip-level rules (a valid and an invalid case each) and the objective."""

from __future__ import annotations

from typing import Any

import pytest

from models.check import Rule, check
from models.objective import evaluate, resolve_weights
from models.scenario import VnpuDvpp, VnpuJob, VnpuLevel
from models.validation import InputError
from models.vnpu import (
    TEMPLATES,
    Request,
    VChip,
    VNode,
    compile_vnpu,
    downgraded,
    request_error,
    task_request,
    template_name,
)
from tests.models.builders import (
    NOW,
    entry,
    job,
    node,
    placed,
    placement,
    problem,
    scenario,
    unplaced,
)


def vnode_row(name: str, kind: str = "Ascend310P", npus: int = 2, **vnpu: Any) -> dict[str, Any]:
    """A vNPU node row; ``vnpu`` keys use contract spelling with ``_`` for ``-``."""
    data = node(name, npus=npus)
    data["vnpu"] = {"chip-kind": kind, **{k.replace("_", "-"): v for k, v in vnpu.items()}}
    return data


def vjob(name: str, tasks: int = 1, cores: int | None = 1, **extra: Any) -> dict[str, Any]:
    """A vNPU job entry."""
    data: dict[str, Any] = {"name": name, "tasks": tasks}
    if cores is not None:
        data["ai-cores"] = cores
    data.update({k.replace("_", "-"): v for k, v in extra.items()})
    return data


def doc(nodes: list[dict[str, Any]], vjobs: list[dict[str, Any]],
        jobs: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    data = scenario(nodes, jobs or [], **extra)
    data["vnpu-jobs"] = vjobs
    return data


def spec(cores: int | None = None, template: str | None = None, level: str = "low",
         dvpp: str = "null") -> VnpuJob:
    return VnpuJob.model_validate({"name": "t", "tasks": 1, "ai-cores": cores,
                                   "template": template, "vnpu-level": level,
                                   "vnpu-dvpp": dvpp})


def a310p(chips: int = 1, cpus: int = 7, cores: int = 8) -> VNode:
    return VNode(0, "n", "Ascend310P", cores, cpus,
                 tuple(VChip(i, cores, cpus, False, VnpuDvpp.YES, False) for i in range(chips)),
                 frozenset(), True)


def vplaced(name: str, nodes: list[str], chips: list[list[int]],
            downgraded: list[int] | None = None) -> dict[str, Any]:
    return placed(name, nodes, chips={str(r): c for r, c in enumerate(chips)},
                  downgraded=[str(r) for r in downgraded or []])


def rules(data: dict[str, Any], *jobs: dict[str, Any]) -> set[Rule]:
    return {v.rule for v in check(problem(data), placement(*jobs))}


# ----------------------------------------------------------------- upstream facts


class TestTaskResource:
    """Upstream ``frame_test.go`` (``GetTaskResource``) cases on a 310P node."""

    def test_whole_card(self) -> None:  # case 03: 8 cores on an 8-core chip: whole card
        got = task_request(spec(8), a310p(cpus=7))
        assert got == Request(8, 7, VnpuDvpp.NULL, None, 1)

    @pytest.mark.parametrize(("cores", "level", "dvpp", "want"), [
        (1, "low", "null", (1, 1, "null")),  # case 05
        (2, "low", "null", (2, 1, "null")),  # case 06: low level → vir02_1c
        (4, "low", "yes", (4, 4, "yes")),  # case 08
        (4, "low", "no", (4, 3, "no")),  # case 09
        (4, "high", "yes", (4, 4, "yes")),  # case 10
        (4, "high", "null", (4, 4, "null")),  # case 11
        (4, "low", "null", (4, 3, "null")),  # case 12
    ])
    def test_slices(self, cores: int, level: str, dvpp: str, want: tuple[int, int, str]) -> None:
        got = task_request(spec(cores, level=level, dvpp=dvpp), a310p(chips=2))
        assert got is not None
        assert (got.cores, got.cpus, got.dvpp.value) == want
        assert not got.is_whole

    def test_three_cores_have_no_template(self) -> None:  # case 07
        assert task_request(spec(3), a310p()) is None

    def test_unknown_dvpp_label_is_refused(self) -> None:  # case 04: "err dvpp value:haha"
        with pytest.raises(ValueError):
            spec(4, dvpp="haha")


@pytest.mark.parametrize(("kind", "cores", "want"), [
    ("910B1", 3, "vir03_1c_8g"), ("910B2C", 6, "vir06_1c_16g"), ("910B3", 5, "vir05_1c_16g"),
    ("910B4", 5, "vir05_1c_8g"), ("910B4-1", 5, "vir05_1c_16g"), ("910B4-1", 10, "vir10_3c_32g"),
    ("910B2", 12, "vir12_3c_32g"), ("910B4-1", -1, None),
])
def test_template_by_chip_type(kind: str, cores: int, want: str | None) -> None:
    """Upstream ``TestGetResTemplateFromTaskSettingAndChipType`` and the B1/B2C cases."""
    assert template_name(kind, cores, VnpuLevel.LOW, VnpuDvpp.NULL) == want


def test_b4_ten_cores_follow_dvpp() -> None:
    assert template_name("910B4", 10, VnpuLevel.LOW, VnpuDvpp.YES) == "vir10_4c_16g_m"
    assert template_name("910B4", 10, VnpuLevel.LOW, VnpuDvpp.NO) == "vir10_3c_16g_nm"
    assert template_name("910B4", 10, VnpuLevel.LOW, VnpuDvpp.NULL) == "vir10_3c_16g"


def test_downgrade_only_for_full_cpu_310p_slices() -> None:
    """``taskAICPUCanBeDowngrade``: (2,2) → (2,1), (4,4, not dvpp yes) → (4,3)."""
    assert downgraded(Request(2, 2, VnpuDvpp.NULL, "vir02", 0)) == Request(
        2, 1, VnpuDvpp.NULL, "vir02_1c", 0)
    assert downgraded(Request(4, 4, VnpuDvpp.NULL, "vir04", 0)) == Request(
        4, 3, VnpuDvpp.NULL, "vir04_3c", 0)
    assert downgraded(Request(4, 4, VnpuDvpp.YES, "vir04_4c_dvpp", 0)) is None
    assert downgraded(Request(2, 1, VnpuDvpp.NULL, "vir02_1c", 0)) is None


def test_every_template_resolves_to_its_own_entry() -> None:
    for kind, table in TEMPLATES.items():
        for name in table:
            got = task_request(spec(template=name), VNode(0, "n", kind, 99, 9, (), frozenset(),
                                                          True))
            assert got is not None and got.template == name and not got.is_whole


@pytest.mark.parametrize(("kind", "cores", "level", "dvpp", "text"), [
    ("Ascend310P", 3, "low", "null",
     "expected: task req npu should be [1,2,4,8,10], actual: task<t> req npu: 3, "),
    ("Ascend310P", 2, "low", "yes", "t req 2 ai-core, but dvpp label is:yes"),
    ("910B3", 7, "low", "null", "t req err 7"),
    ("910B1", 3, "low", "null", "t req err 3"),  # quirk: B1 refuses 3 though vir03 exists
    ("910B3", 5, "high", "null", "t req 5 ai-core and npu is 910B3, but cpu level is:high"),
    ("910B3", 40, "low", "yes", "t req 40 ai-core and npu is 910B3, but dvpp label is:yes"),
    ("910B4", 10, "high", "yes", None),  # the B4 10-core exemption
    ("Ascend310P", 16, "low", "null", None),
    ("Ascend910A3-24", 48, "low", "null", None),
])
def test_validation_texts(kind: str, cores: int, level: str, dvpp: str,
                          text: str | None) -> None:
    assert request_error(spec(cores, level=level, dvpp=dvpp), kind) == text


# ----------------------------------------------------------------- input rules


@pytest.mark.parametrize(("row", "field"), [
    (vnode_row("v1", kind="Ascend999"), "vnpu.chip-kind"),
    (vnode_row("v1", ai_cores=9), "vnpu.ai-cores"),
    (vnode_row("v1", npus=1, unfinished_templates=["vir99"]), "vnpu.unfinished-templates"),
    (vnode_row("v1", npus=1, ai_cores=10), None),
])
def test_node_rules(row: dict[str, Any], field: str | None) -> None:
    data = doc([row], [])
    if field is None:
        problem(data)
        return
    with pytest.raises(InputError, match=f"field '{field}'"):
        problem(data)


def test_chip_state_rules() -> None:
    row = vnode_row("v1", npus=2, chips=[{"id": 0, "free-cores": 9}, {"id": 0}])
    with pytest.raises(InputError) as err:
        problem(doc([row], []))
    text = str(err.value)
    assert "free-cores 9 exceeds the chip's 8 AI cores" in text
    assert "chip ids [0] are listed more than once" in text


def test_job_rules() -> None:
    with pytest.raises(InputError, match="give exactly one of ai-cores"):
        problem(doc([vnode_row("v1")], [vjob("a", cores=2, template="vir02")]))
    with pytest.raises(InputError, match=r"req npu: 3"):
        problem(doc([vnode_row("v1")], [vjob("a", cores=3)]))
    with pytest.raises(InputError, match="duplicate job name"):
        problem(doc([vnode_row("v1"), node("o1")], [vjob("a")], jobs=[job("a")]))
    # valid for one kind present is enough (upstream checks the session's table)
    problem(doc([vnode_row("v1"), vnode_row("v2", kind="910B3")], [vjob("a", cores=5)]))


# ----------------------------------------------------------------- validator rules


def test_slice_capacity_per_chip() -> None:
    data = doc([vnode_row("v1", npus=1)], [vjob("a", tasks=2, cores=4, vnpu_level="high")])
    ok = vplaced("a", ["v1", "v1"], [[0], [0]])  # 2 × (4 cores, 4 CPUs) on (8, 7): no
    assert Rule.VNPU_CHIP in rules(data, ok)
    roomy = doc([vnode_row("v1", npus=2)], [vjob("a", tasks=2, cores=4, vnpu_level="high")])
    assert rules(roomy, vplaced("a", ["v1", "v1"], [[0], [1]])) == set()
    low = doc([vnode_row("v1", npus=1)], [vjob("a", tasks=2, cores=4)])  # (4, 3) twice: fits
    assert rules(low, vplaced("a", ["v1", "v1"], [[0], [0]])) == set()


def test_free_resources_of_a_cut_chip() -> None:
    row = vnode_row("v1", npus=2, chips=[{"id": 0, "free-cores": 1, "free-cpus": 1,
                                          "segmented": True}, {"id": 3}])
    data = doc([row], [vjob("a", cores=2)])
    assert Rule.VNPU_CHIP in rules(data, vplaced("a", ["v1"], [[0]]))
    assert rules(data, vplaced("a", ["v1"], [[3]])) == set()
    assert Rule.VNPU_CHIP in rules(data, vplaced("a", ["v1"], [[1]]))  # no chip 1


def test_whole_card_needs_untouched_chips() -> None:
    row = vnode_row("v1", npus=3, chips=[{"id": 0, "free-cores": 8, "free-cpus": 7,
                                          "segmented": True}, {"id": 1}, {"id": 2}])
    data = doc([row], [vjob("a", cores=16)])
    assert Rule.VNPU_CHIP in rules(data, vplaced("a", ["v1"], [[0, 1]]))
    assert Rule.VNPU_CHIP in rules(data, vplaced("a", ["v1"], [[1]]))  # two chips needed
    assert rules(data, vplaced("a", ["v1"], [[1, 2]])) == set()


def test_whole_card_does_not_share() -> None:
    data = doc([vnode_row("v1", npus=2)], [vjob("a", cores=8), vjob("b", cores=1)])
    shared = rules(data, vplaced("a", ["v1"], [[0]]), vplaced("b", ["v1"], [[0]]))
    assert Rule.VNPU_CHIP in shared
    apart = rules(data, vplaced("a", ["v1"], [[0]]), vplaced("b", ["v1"], [[1]]))
    assert Rule.VNPU_CHIP not in apart
    assert Rule.VNPU_TEMPLATE in apart  # a whole card and slices of one batch: not together


def test_dvpp() -> None:
    data = doc([vnode_row("v1", npus=2)],
               [vjob("a", cores=4, vnpu_dvpp="yes"), vjob("b", cores=4, vnpu_dvpp="yes")])
    same = rules(data, vplaced("a", ["v1"], [[0]]), vplaced("b", ["v1"], [[0]]))
    assert Rule.VNPU_CHIP in same  # two DVPP slices on one chip
    assert rules(data, vplaced("a", ["v1"], [[0]]), vplaced("b", ["v1"], [[1]])) == set()
    used = doc([vnode_row("v1", npus=1, chips=[{"id": 0, "free-cores": 4, "free-cpus": 4,
                                                 "segmented": True, "dvpp": "no"}])],
               [vjob("c", cores=1)])
    assert Rule.VNPU_CHIP in rules(used, vplaced("c", ["v1"], [[0]]))  # null after yes


def test_unstable_chip_takes_no_slice() -> None:
    row = vnode_row("v1", npus=2, chips=[{"id": 0, "unstable": True}, {"id": 1}])
    data = doc([row], [vjob("a", cores=1)])
    assert Rule.VNPU_CHIP in rules(data, vplaced("a", ["v1"], [[0]]))
    assert rules(data, vplaced("a", ["v1"], [[1]])) == set()


def test_one_template_per_node() -> None:
    """Upstream ``IsNodeHasDifferentUnFinishedTask`` cases 03/04: a node holding an
    unfinished vir01 refuses a (2,2) slice and accepts a (1,1) slice."""
    row = vnode_row("v1", npus=2, unfinished_templates=["vir01"])
    data = doc([row], [vjob("a", cores=2, vnpu_level="high"), vjob("b", cores=1)])
    assert Rule.VNPU_TEMPLATE in rules(data, vplaced("a", ["v1"], [[1]]), unplaced("b"))
    assert rules(data, unplaced("a"), vplaced("b", ["v1"], [[1]])) == set()
    fresh = doc([vnode_row("v1", npus=2)], [vjob("a", cores=2), vjob("b", cores=1)])
    assert Rule.VNPU_TEMPLATE in rules(fresh, vplaced("a", ["v1"], [[0]]),
                                       vplaced("b", ["v1"], [[1]]))


def test_whole_card_refused_on_node_with_unfinished_slices() -> None:
    data = doc([vnode_row("v1", npus=2, unfinished_templates=["vir01"])], [vjob("a", cores=8)])
    assert Rule.VNPU_TEMPLATE in rules(data, vplaced("a", ["v1"], [[1]]))
    clean = doc([vnode_row("v1", npus=2)], [vjob("a", cores=8)])
    assert rules(clean, vplaced("a", ["v1"], [[1]])) == set()


def test_downgrade_only_on_310p() -> None:
    row = vnode_row("v1", npus=1, chips=[{"id": 0, "free-cores": 2, "free-cpus": 1,
                                          "segmented": True}])
    data = doc([row], [vjob("a", cores=2, vnpu_level="high")])
    assert Rule.VNPU_CHIP in rules(data, vplaced("a", ["v1"], [[0]]))  # (2,2) does not fit
    assert rules(data, vplaced("a", ["v1"], [[0]], downgraded=[0])) == set()
    b3 = doc([vnode_row("v1", kind="910B3", npus=1)], [vjob("a", cores=5)])
    assert Rule.VNPU_DOWNGRADE in rules(b3, vplaced("a", ["v1"], [[0]], downgraded=[0]))


@pytest.mark.parametrize(("cores", "extra"), [
    (1, {}), (2, {}), (4, {"vnpu_dvpp": "yes"}), (4, {"vnpu_dvpp": "no"}), (4, {}), (8, {}),
])
def test_downgrade_only_for_the_shapes_upstream_allows(cores: int, extra: dict[str, str]
                                                       ) -> None:
    """``taskAICPUCanBeDowngrade``: only (2, 2) and (4, 4, DVPP not yes), i.e. vir02 and
    vir04; vir01, vir02_1c, vir04_4c_dvpp, vir04_3c_ndvpp, vir04_3c and whole cards are
    never downgraded."""
    row = vnode_row("v1", npus=1, chips=[{"id": 0, "free-cores": 1, "free-cpus": 0,
                                          "segmented": True}, {"id": 1}])
    row["npus"] = 2
    data = doc([row], [vjob("a", cores=cores, **extra)])
    assert Rule.VNPU_DOWNGRADE in rules(data, vplaced("a", ["v1"], [[1]], downgraded=[0]))
    assert Rule.VNPU_DOWNGRADE not in rules(data, vplaced("a", ["v1"], [[1]]))


def test_no_downgrade_where_the_full_request_fits() -> None:
    """One 310P node, a 2-core high job: its full vir02 fits, so the
    1-AI-CPU slice is not upstream's."""
    data = doc([vnode_row("v1", npus=1)], [vjob("a", cores=2, vnpu_level="high")])
    assert Rule.VNPU_DOWNGRADE in rules(data, vplaced("a", ["v1"], [[0]], downgraded=[0]))
    assert rules(data, vplaced("a", ["v1"], [[0]])) == set()


def test_no_downgrade_to_match_an_unfinished_template() -> None:
    """A node whose unfinished template is vir02_1c refuses a vir02 task
    ("is using a, and not rewrite"): the full request fits, so no downgrade either."""
    row = vnode_row("v1", npus=2, unfinished_templates=["vir02_1c"])
    data = doc([row], [vjob("a", cores=2, vnpu_level="high")])
    assert Rule.VNPU_DOWNGRADE in rules(data, vplaced("a", ["v1"], [[1]], downgraded=[0]))
    assert Rule.VNPU_TEMPLATE in rules(data, vplaced("a", ["v1"], [[1]]))
    # where the full request fits no chip, the downgrade matches the node's template
    full = vnode_row("v1", npus=1, unfinished_templates=["vir02_1c"],
                     chips=[{"id": 0, "free-cores": 6, "free-cpus": 1, "segmented": True}])
    tight = doc([full], [vjob("a", cores=2, vnpu_level="high")])
    assert rules(tight, vplaced("a", ["v1"], [[0]], downgraded=[0])) == set()


def cut(chip: int, cores: int, cpus: int, **extra: Any) -> dict[str, Any]:
    return {"id": chip, "free-cores": cores, "free-cpus": cpus, "segmented": True, **extra}


def test_downgrade_judged_with_the_plans_other_slices() -> None:
    """Two vir02 tasks downgraded on one cut 310P chip: legal when the full (2, 2) fits no
    chip once the other rank is placed (4 cores, 2 CPUs free), not when it does (4, 3), nor
    when another chip still takes it — unless that chip's DVPP state is 'no'."""
    both = vplaced("a", ["v1", "v1"], [[0], [0]], downgraded=[0, 1])
    job = [vjob("a", tasks=2, cores=2, vnpu_level="high")]
    tight = doc([vnode_row("v1", npus=1, chips=[cut(0, 4, 2)])], job)
    assert rules(tight, both) == set()
    roomy = doc([vnode_row("v1", npus=1, chips=[cut(0, 4, 3)])], job)
    assert Rule.VNPU_DOWNGRADE in rules(roomy, both)
    other = doc([vnode_row("v1", npus=2, chips=[cut(0, 4, 2), {"id": 1}])], job)
    assert Rule.VNPU_DOWNGRADE in rules(other, both)
    no_dvpp = doc([vnode_row("v1", npus=2, chips=[cut(0, 4, 2), cut(1, 4, 4, dvpp="no")])],
                  job)
    assert rules(no_dvpp, both) == set()
    unstable = doc([vnode_row("v1", npus=2, chips=[cut(0, 4, 2), cut(1, 4, 4, unstable=True)])],
                   job)
    assert rules(unstable, both) == set()


def test_request_against_the_nodes_own_chip_kind() -> None:
    """A 24-core high-level task is a whole 910B2 card by size, but a
    910B2 refuses level high (``validDyVNPUTaskDVPPLabel``); a 10-core DVPP task fits a
    910B4 (vir10_4c_16g_m) but a 910B3 refuses DVPP yes."""
    mixed = doc([vnode_row("p310", npus=2), vnode_row("b2", kind="910B2", npus=8)],
                [vjob("a", cores=24, vnpu_level="high")])
    assert Rule.VNPU_REQUEST in rules(mixed, vplaced("a", ["b2"], [[0]]))
    low = doc([vnode_row("p310", npus=2), vnode_row("b2", kind="910B2", npus=8)],
              [vjob("a", cores=24)])
    assert rules(low, vplaced("a", ["b2"], [[0]])) == set()
    dvpp = doc([vnode_row("b4", kind="910B4", npus=1), vnode_row("b3", kind="910B3", npus=1)],
               [vjob("a", cores=10, vnpu_dvpp="yes")])
    assert Rule.VNPU_REQUEST in rules(dvpp, vplaced("a", ["b3"], [[0]]))
    assert rules(dvpp, vplaced("a", ["b4"], [[0]])) == set()


def test_whole_card_skips_chips_whose_dvpp_state_is_no() -> None:
    """``selectChipFromNodeWhole`` asks each chip for a full chip with DVPP null."""
    row = vnode_row("v1", npus=2, chips=[{"id": 0, "dvpp": "no"}, {"id": 1}])
    data = doc([row], [vjob("a", cores=8)])
    assert Rule.VNPU_CHIP in rules(data, vplaced("a", ["v1"], [[0]]))
    assert rules(data, vplaced("a", ["v1"], [[1]])) == set()


def test_one_family_per_job() -> None:
    """A 10-core job may not take a whole 310P-10 chip for one rank and a
    910B3 slice for another; ``ring-controller`` binds a job to its handler's nodes."""
    nodes = [vnode_row("p", npus=2, ai_cores=10), vnode_row("b3", kind="910B3", npus=2)]
    data = doc(nodes, [vjob("a", tasks=2, cores=10)])
    assert Rule.VNPU_FAMILY in rules(data, vplaced("a", ["p", "b3"], [[0], [0]]))
    assert rules(data, vplaced("a", ["p", "p"], [[0], [1]])) == set()
    assert rules(data, vplaced("a", ["b3", "b3"], [[0], [0]])) == set()
    bound = doc(nodes, [vjob("a", tasks=2, cores=10, ring_controller="ascend-310P")])
    assert Rule.VNPU_FAMILY in rules(bound, vplaced("a", ["b3", "b3"], [[0], [0]]))
    assert rules(bound, vplaced("a", ["p", "p"], [[0], [1]])) == set()
    b910 = doc(nodes, [vjob("a", tasks=2, cores=10, ring_controller="ascend-910b")])
    assert Rule.VNPU_FAMILY in rules(b910, vplaced("a", ["p", "p"], [[0], [1]]))
    assert rules(b910, vplaced("a", ["b3", "b3"], [[0], [0]])) == set()


def test_ring_controller_values() -> None:
    nodes = [vnode_row("b3", kind="910B3", npus=2)]
    for value in ("ascend-910", "ascend-910b", "huawei.com.npu", "ascend-310P"):
        problem(doc(nodes, [vjob("a", cores=5, ring_controller=value)]))
    with pytest.raises(InputError, match="ring-controller"):
        problem(doc(nodes, [vjob("a", cores=5, ring_controller="ascend-310")]))
    # the family's kinds present refuse the request: exit 2 naming the field
    with pytest.raises(InputError, match="field 'ai-cores'"):
        problem(doc([*nodes, vnode_row("p", npus=1)],
                    [vjob("a", cores=1, ring_controller="ascend-910")]))


def test_unhealthy_and_ordinary_nodes() -> None:
    sick = vnode_row("v1", npus=1)
    sick["health"] = "unhealthy"
    data = doc([sick, node("o1")], [vjob("a")], jobs=[job("t")])
    assert Rule.UNHEALTHY in rules(data, vplaced("a", ["v1"], [[0]]), unplaced("t"))
    assert Rule.FORMAT in rules(data, vplaced("a", ["o1"], [[0]]), unplaced("t"))
    # an ordinary job cannot take a vNPU node's chips
    assert Rule.CAPACITY in rules(data, unplaced("a"), placed("t", ["v1"]))


def test_missing_vnpu_job_and_the_engine_view() -> None:
    data = doc([vnode_row("v1"), node("o1")], [vjob("a")], jobs=[job("t")])
    prob = problem(data)
    partial = placement(placed("t", ["o1"]))
    assert {v.rule for v in check(prob, partial)} == {Rule.FORMAT}
    assert check(prob, partial, include_vnpu=False) == []


# ----------------------------------------------------------------- objective


def test_vnpu_hits_count_like_ordinary_hits() -> None:
    data = doc([vnode_row("v1", npus=1), vnode_row("v2", npus=1), node("o1")],
               [vjob("a", tasks=2, owner_uid="u-a")], jobs=[job("t", owner_uid="u-t")],
               cache=[entry("u-a", 0, "v2"), entry("u-a", 1, "v1"), entry("u-t", 0, "o1")])
    prob = problem(data)
    weights = resolve_weights(prob)
    home = placement(placed("t", ["o1"]), vplaced("a", ["v2", "v1"], [[0], [0]]))
    swapped = placement(placed("t", ["o1"]), vplaced("a", ["v1", "v2"], [[0], [0]]))
    assert check(prob, home) == [] and check(prob, swapped) == []
    at_home, away = evaluate(prob, home), evaluate(prob, swapped)
    assert at_home.origin_hits == 3 and away.origin_hits == 1
    assert at_home.origin_candidates == 3 and at_home.achievable_origin_hits == 3
    assert at_home.objective - away.objective == 2 * weights.origin_hit
    assert at_home.placed_jobs == 2
    # placing the vNPU job outweighs every hit
    none = evaluate(prob, placement(placed("t", ["o1"]), unplaced("a")))
    assert weights.vnpu_placed[0] > 3 * weights.origin_hit
    assert none.objective == at_home.objective - weights.vnpu_placed[0] - 2 * weights.origin_hit
    # the mapping form takes the vNPU part as its own argument
    mapping = evaluate(prob, {0: [2]}, vnpu={0: [1, 0]})
    assert mapping.objective == at_home.objective


def test_subhealthy_vnpu_node_costs() -> None:
    sub = vnode_row("v1", npus=1)
    sub["health"] = "subhealthy"
    data = doc([sub, vnode_row("v2", npus=1)], [vjob("a")])
    prob = problem(data)
    on_sub = evaluate(prob, placement(vplaced("a", ["v1"], [[0]])))
    on_ok = evaluate(prob, placement(vplaced("a", ["v2"], [[0]])))
    assert on_sub.subhealthy_nodes == 1 and on_ok.subhealthy_nodes == 0
    assert on_ok.objective - on_sub.objective == resolve_weights(prob).subhealthy


def test_compiled_view() -> None:
    data = doc([vnode_row("v1", kind="910B3", npus=2), node("o1")], [vjob("a", cores=5)],
               now=NOW)
    prob = problem(data)
    view = compile_vnpu(prob)
    assert [v.name for v in view.nodes] == ["v1"]
    assert (view.nodes[0].cores, view.nodes[0].cpus) == (20, 6)
    assert prob.free.tolist() == [0, 8]  # the vNPU node is full for ordinary jobs
    assert view.request(0, 0) == Request(5, 1, VnpuDvpp.NULL, "vir05_1c_16g", 0)
