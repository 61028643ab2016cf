"""Image locality: ``node.status.images`` and the pods' container images."""

from __future__ import annotations

from tests.models.kube.helpers import cluster, find, job_of, node_of, run

IMAGE = "swr.cn-south-1.myhuaweicloud.com/ascendhub/mindspeed-llm:2.1.0-a3-arm"


def _hold(node: dict, names: list[str], size_bytes: object) -> None:
    node["status"].setdefault("images", []).append({"names": names, "sizeBytes": size_bytes})


def test_node_images_every_name_with_its_size_and_the_job_image_sized_from_them() -> None:
    b = cluster()
    b.job("ns", "train", 2, 8, policy="chip8-node8")
    objects = b.objects()
    _hold(find(objects, "Node", "node-1"), [IMAGE, "ascendhub/mindspeed-llm@sha256:00"],
          32_500_000_000)
    _hold(find(objects, "Node", "node-2"), ["busybox:1"], 4_000_000)
    result = run(objects)
    assert node_of(result, "node-1")["images"] == {
        IMAGE: 32.5, "ascendhub/mindspeed-llm@sha256:00": 32.5}
    assert node_of(result, "node-2")["images"] == {"busybox:1": 0.004}
    assert "images" not in node_of(result, "node-0")
    assert job_of(result, "ns/train-")["image"] == {"name": IMAGE, "size-gb": 32.5}
    problem_holders = result.scenario.nodes[1].images
    assert problem_holders is not None and IMAGE in problem_holders


def test_job_image_without_a_node_listing_it_has_no_size() -> None:
    b = cluster()
    b.job("ns", "train", 1, 8, policy="chip8-node8")
    result = run(b.objects())
    job = job_of(result, "ns/train-")
    assert job["image"] == {"name": IMAGE}
    assert all("images" not in node for node in result.data["nodes"])


def test_malformed_image_entries_are_skipped_with_a_warning_naming_node_and_field() -> None:
    objects = cluster().objects()
    node = find(objects, "Node", "node-3")
    _hold(node, ["good:1"], 1_000_000_000)
    _hold(node, "not-a-list", 5)
    _hold(node, ["bad:1"], -3)
    _hold(node, ["bool:1"], True)
    result = run(objects)
    assert node_of(result, "node-3")["images"] == {"good:1": 1.0}
    # the three skipped entries are warnings of one kind: one line with their count
    warned = [w for w in result.warnings if "node-3" in w and "status.images[" in w]
    assert len(warned) == 1, result.warnings
    assert warned[0].startswith("3 warnings of one kind"), warned
