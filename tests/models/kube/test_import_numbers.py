"""At the importer: annotations and labels holding digits other than ASCII
(``²``, ``¹``, Arabic-Indic) or too many of them are reported, never an internal error."""

from __future__ import annotations

import pytest

from tests.models.kube.helpers import node_of, run
from tests.models.kube.test_vnpu_import import device_cm, vnode, vpod


@pytest.mark.parametrize("annotation", ["¹-vir04_3c", "0,¹", "٣-vir02_1c", "٣",
                                        "9" * 5000 + "-vir02_1c", "0," + "9" * 5000])
def test_npu_core_annotations_with_other_digits_are_not_counted(annotation: str) -> None:
    objects = [vnode("v1"), device_cm("v1", "Ascend310P", [0, 1, 2, 3]),
               vpod("a-0", "svc-a", 2, node="v1", annotation=annotation)]
    row = node_of(run(objects), "v1")
    chips = {c["id"]: c for c in row["vnpu"]["chips"]}
    assert sorted(chips) == [0, 1, 2, 3]
    # a chip the annotation names in ASCII is taken; the others are left as they were
    taken = {0} if annotation.startswith("0,") else set()
    assert {i for i, c in chips.items() if c["free-cores"] == 0} == taken


@pytest.mark.parametrize("server", ["Ascend310P-²", "Ascend310P-٨", "Ascend310P-" + "8" * 5000])
def test_servertype_with_other_digits_is_reported(server: str) -> None:
    result = run([vnode("v1", server=server), vnode("v2"),
                  device_cm("v1", "Ascend310P", [0, 1, 2, 3])])
    assert [n["name"] for n in result.data["nodes"]] == ["v2"]
    assert any("has no AI-core count" in str(w) for w in result.warnings)


def test_device_info_chip_names_with_other_digits_are_not_chips() -> None:
    cm = device_cm("v1", "Ascend310P", [0, 1])
    cm["data"]["DeviceInfoCfg"] = cm["data"]["DeviceInfoCfg"].replace(
        "Ascend310P-1", "Ascend310P-\\u00b9")
    row = node_of(run([vnode("v1"), cm]), "v1")
    assert [c["id"] for c in row["vnpu"]["chips"]] == [0]
