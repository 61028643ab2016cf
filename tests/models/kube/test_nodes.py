"""Node mapping rules: npus, free chips, health, super pod and rack, labels, both CM modes."""

from __future__ import annotations

import json

import pytest

from tests.models.kube.helpers import cluster, edit_json, errors_of, find, node_of, run


def test_npus_from_capacity_and_labels_kept() -> None:
    b = cluster()
    result = run(b.objects())
    node = node_of(result, "node-0")
    assert node["npus"] == 8 and node["free"] == 8 and node["health"] == "healthy"
    assert node["labels"]["node.kubernetes.io/npu.chip.name"] == "Ascend850"
    assert node["super-pod-id"] == 0 and "rack-id" not in node


def test_malformed_capacity_names_node_and_field() -> None:
    objects = cluster().objects()
    find(objects, "Node", "node-1")["status"]["capacity"]["huawei.com/npu"] = "eight"
    messages = errors_of(objects)
    assert any("Node node-1" in m and "status.capacity[huawei.com/npu]" in m for m in messages)


def test_node_without_npu_capacity_is_reported_not_imported() -> None:
    objects = cluster().objects()
    del find(objects, "Node", "node-3")["status"]["capacity"]["huawei.com/npu"]
    result = run(objects)
    assert [n["name"] for n in result.data["nodes"]] == ["node-0", "node-1", "node-2"]
    assert any("Node node-3" in w and "not imported" in w for w in result.warnings)


def test_free_chips_subtract_pod_chips_unhealthy_and_recovering() -> None:
    b = cluster()
    b.node("node-9", 8, super_pod=1, unhealthy_chips=(7,))
    b.job("ns", "small", 1, 2, policy="chip8-node8", bound={0: "node-9"})
    objects = b.objects()
    cm = find(objects, "ConfigMap", "mindx-dl-deviceinfo-node-9")
    edit_json(cm, "DeviceInfoCfg", lambda d: {**d, "DeviceInfo": {**d["DeviceInfo"], "DeviceList": {
        **d["DeviceInfo"]["DeviceList"], "huawei.com/npu-Recovering": "npu-6"}}})
    # the pod's real chips (AscendReal) win over the scheduler's annotation
    pod = find(objects, "Pod", "small-worker-0")
    pod["metadata"]["annotations"]["huawei.com/AscendReal"] = "npu-4,npu-5"
    result = run(objects)
    assert node_of(result, "node-9")["free"] == 8 - 2 - 1 - 1  # pod, unhealthy, recovering


def test_free_chips_from_the_cm_list_when_not_self_maintained() -> None:
    b = cluster(**{"self-maintain-available-card": "false"})
    objects = b.objects()
    sched = find(objects, "ConfigMap", "volcano-scheduler-configmap")
    sched["data"]["volcano-scheduler.conf"] = sched["data"]["volcano-scheduler.conf"].replace(
        "self-maintain-available-card: 'true'", "self-maintain-available-card: 'false'")
    cm = find(objects, "ConfigMap", "mindx-dl-deviceinfo-node-0")
    edit_json(cm, "DeviceInfoCfg", lambda d: {**d, "DeviceInfo": {**d["DeviceInfo"], "DeviceList": {
        **d["DeviceInfo"]["DeviceList"], "huawei.com/npu": "npu-0,npu-1,npu-2"}}})
    assert node_of(run(objects), "node-0")["free"] == 3
    # self-maintained (default): the CM list is ignored
    objects = cluster().objects()
    edit_json(find(objects, "ConfigMap", "mindx-dl-deviceinfo-node-0"), "DeviceInfoCfg",
              lambda d: {**d, "DeviceInfo": {**d["DeviceInfo"], "DeviceList": {
                  **d["DeviceInfo"]["DeviceList"], "huawei.com/npu": "npu-0"}}})
    assert node_of(run(objects), "node-0")["free"] == 8


def test_network_unhealthy_chips_are_subtracted_with_a_warning() -> None:
    b = cluster()
    b.node("node-9", 8, super_pod=1, network_unhealthy=(0, 1))
    result = run(b.objects())
    assert node_of(result, "node-9")["free"] == 6
    assert any("Node node-9" in w and "network-unhealthy" in w for w in result.warnings)


def test_free_capped_by_allocatable_minus_requests() -> None:
    objects = cluster().objects()
    find(objects, "Node", "node-2")["status"]["allocatable"]["huawei.com/npu"] = "5"
    result = run(objects)
    assert node_of(result, "node-2")["free"] == 5
    assert any("Node node-2" in w and "capped" in w for w in result.warnings)


def test_missing_and_malformed_base_device_infos() -> None:
    objects = cluster().objects()
    del find(objects, "Node", "node-1")["metadata"]["annotations"]["baseDeviceInfos"]
    result = run(objects)
    assert node_of(result, "node-1")["free"] == 0
    assert any("Node node-1" in w and "baseDeviceInfos" in w for w in result.warnings)
    objects = cluster().objects()
    find(objects, "Node", "node-1")["metadata"]["annotations"]["baseDeviceInfos"] = "{oops"
    messages = errors_of(objects)
    assert any("Node node-1" in m and "metadata.annotations.baseDeviceInfos" in m
               for m in messages)


def test_vnpu_chips_are_not_counted_from_base() -> None:
    objects = cluster().objects()
    node = find(objects, "Node", "node-0")
    base = json.loads(node["metadata"]["annotations"]["baseDeviceInfos"])
    base["npu-2c-100-0"] = {"IP": "x"}
    node["metadata"]["annotations"]["baseDeviceInfos"] = json.dumps(base)
    result = run(objects)
    assert any("vNPU" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("kwargs", "health"),
    [
        ({"noded": "UnHealthy"}, "unhealthy"),
        ({"noded": "PreSeparate"}, "unhealthy"),
        ({"switch": "UnHealthy"}, "unhealthy"),
        ({"switch": "SubHealthy"}, "subhealthy"),
        ({"subhealth_fault": True}, "subhealthy"),
        ({"ready": False}, "unhealthy"),
        ({"unschedulable": True}, "unhealthy"),
        ({"subhealth_fault": True, "noded": "UnHealthy"}, "unhealthy"),
        ({"switch": "Healthy", "noded": "Healthy"}, "healthy"),
    ],
)
@pytest.mark.parametrize("mode", ["device-plugin", "clusterd"])
def test_health_rules(kwargs: dict[str, object], health: str, mode: str) -> None:
    b = cluster(mode)
    b.node("node-9", 8, super_pod=1, **kwargs)  # type: ignore[arg-type]
    result = run(b.objects())
    assert node_of(result, "node-9")["health"] == health
    if kwargs.get("noded") == "PreSeparate":
        assert any("PreSeparate" in w for w in result.warnings)


def test_super_pod_negative_is_none_and_rack_only_when_present() -> None:
    b = cluster()
    b.node("node-8", 8)  # SuperPodID -2, no RackID
    b.node("node-9", 8, super_pod=1, rack=0)  # RackID 0 is a real rack
    result = run(b.objects())
    assert "super-pod-id" not in node_of(result, "node-8")
    assert "rack-id" not in node_of(result, "node-8")
    assert node_of(result, "node-9")["rack-id"] == 0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda cm: cm["data"].update(DeviceInfoCfg="{not json"), "data.DeviceInfoCfg"),
        (lambda cm: edit_json(cm, "DeviceInfoCfg", lambda d: {**d, "SuperPodID": "one"}),
         "data.DeviceInfoCfg.SuperPodID"),
        (lambda cm: edit_json(cm, "DeviceInfoCfg", lambda d: {**d, "DeviceInfo": {
            "DeviceList": {"huawei.com/npu": 3}}}), "data.DeviceInfoCfg.DeviceList"),
        (lambda cm: cm["data"].pop("DeviceInfoCfg"), "data.DeviceInfoCfg"),
        (lambda cm: edit_json(cm, "DeviceInfoCfg", lambda d: {**d, "RackID": 2**40}),
         "data.DeviceInfoCfg.RackID"),
    ],
)
def test_malformed_device_info_names_configmap_and_field(change, field) -> None:  # type: ignore[no-untyped-def]
    objects = cluster().objects()
    change(find(objects, "ConfigMap", "mindx-dl-deviceinfo-node-2"))
    messages = errors_of(objects)
    assert any("ConfigMap kube-system/mindx-dl-deviceinfo-node-2" in m and f"'{field}'" in m
               for m in messages), messages


def test_malformed_clusterd_configmaps() -> None:
    objects = cluster("clusterd").objects()
    find(objects, "ConfigMap", "cluster-info-device-0")["data"] = {"wrong-key": "{}"}
    assert any("cluster-info-device-0" in m and "data.cluster-info-device-0" in m
               for m in errors_of(objects))
    objects = cluster("clusterd").objects()
    edit_json(find(objects, "ConfigMap", "cluster-info-node-cm"), "cluster-info-node-cm",
              lambda d: {**d, "mindx-dl-nodeinfo-node-1": {"NodeStatus": 7}})
    assert any("cluster-info-node-cm" in m and "NodeStatus" in m for m in errors_of(objects))


def test_both_modes_give_the_same_nodes() -> None:
    def build(mode: str) -> list[dict[str, object]]:
        b = cluster(mode, nodes=8)
        b.node("node-8", 8, super_pod=2, rack=5, switch="SubHealthy", unhealthy_chips=(1,))
        b.node("node-9", 8, super_pod=2, noded="UnHealthy")
        b.job("ns", "run", 2, 8, policy="chip8-node8-sp", annotations={"sp-block": "16"},
              bound={0: "node-4", 1: "node-5"})
        return run(b.objects()).data["nodes"]

    assert build("device-plugin") == build("clusterd")


def test_mode_follows_init_params_and_falls_back_with_a_warning() -> None:
    b = cluster("device-plugin")
    objects = b.objects()
    sched = find(objects, "ConfigMap", "volcano-scheduler-configmap")
    sched["data"]["volcano-scheduler.conf"] = sched["data"]["volcano-scheduler.conf"].replace(
        "useClusterInfoManager: 'false'", "useClusterInfoManager: 'true'")
    result = run(objects)
    assert result.mode == "device-plugin"
    assert any("selects clusterd mode" in w for w in result.warnings)
    # both present: the selected mode wins, the other is reported
    both = cluster("clusterd").objects() + [o for o in objects if o["kind"] == "ConfigMap"
                                             and "deviceinfo" in o["metadata"]["name"]]
    result = run(both)
    assert result.mode == "clusterd"
    assert any("are ignored" in w for w in result.warnings)


def test_stale_update_time_and_missing_device_info_are_reported() -> None:
    b = cluster()
    b.node("node-9", 8, super_pod=1, age=3600)
    objects = [o for o in b.objects()
               if o["metadata"]["name"] != "mindx-dl-deviceinfo-node-3"]
    result = run(objects)
    assert any("mindx-dl-deviceinfo-node-9" in w and "stale UpdateTime" in w
               for w in result.warnings)
    assert any("Node node-3" in w and "no device info" in w for w in result.warnings)
    assert node_of(result, "node-3")["free"] == 0


def test_device_info_for_unknown_node_is_reported() -> None:
    b = cluster()
    objects = [o for o in b.objects() if not (o["kind"] == "Node"
                                              and o["metadata"]["name"] == "node-3")]
    result = run(objects)
    assert any("node 'node-3'" in w and "not in the input" in w for w in result.warnings)
