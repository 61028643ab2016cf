"""The scheduler ConfigMap: init-params normalisation (A.5, A.6)."""

from __future__ import annotations

import json

import pytest

from tests.models.kube.helpers import cluster, errors_of, find, run


def _with_params(**params: str) -> list[dict[str, object]]:
    b = cluster()
    b.params = dict(params)
    return b.objects()


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"super-pod-size": "8", "reserve-nodes": "3", "prefer-previous-node": "true"},
         {"super-pod-size": 8, "reserve-nodes": 3, "prefer-previous-node": True}),
        ({"super-pod-size": "0"}, {"super-pod-size": 0, "prefer-previous-node": False}),
        ({"reserve-nodes": "0", "prefer-previous-node": "True"},
         {"prefer-previous-node": False}),
        ({"super-pod-size": "-4", "reserve-nodes": "x"}, {"prefer-previous-node": False}),
    ],
)
def test_init_params_normalisation(params: dict[str, str], expected: dict[str, object]) -> None:
    result = run(_with_params(**params))
    assert result.data["config"] == expected
    if params.get("reserve-nodes") == "0":
        assert any("reserve-nodes=0" in w for w in result.warnings)
    if params.get("super-pod-size") == "-4":
        assert any("negative" in w for w in result.warnings)
        assert any("not an integer" in w for w in result.warnings)
    # the contract reads the same numbers: absent reserve means 2, size <= 0 means 48
    assert result.scenario.config.effective_super_pod_size == (
        8 if params.get("super-pod-size") == "8" else 48)


def test_resource_level_config_is_parsed_and_checked() -> None:
    tree = {"default": {"level1": {"label": "rack", "reservedNode": 1},
                        "level2": {"label": "switch"}}}
    result = run(_with_params(**{"resource-level-config": json.dumps(tree)}))
    assert result.data["config"]["resource-level-config"] == tree
    messages = errors_of(_with_params(**{"resource-level-config": "{bad"}))
    assert any("volcano-scheduler-configmap" in m and "init-params.resource-level-config" in m
               for m in messages)
    gap = {"default": {"level1": {"label": "rack"}, "level3": {"label": "x"}}}
    messages = errors_of(_with_params(**{"resource-level-config": json.dumps(gap)}))
    assert any("not continuous" in m for m in messages)


def test_missing_scheduler_configmap_uses_upstream_defaults() -> None:
    objects = [o for o in cluster().objects()
               if o["metadata"]["name"] != "volcano-scheduler-configmap"]
    result = run(objects)
    assert result.data["config"] == {"prefer-previous-node": False}
    assert any("volcano-scheduler-configmap" in w and "defaults" in w for w in result.warnings)


def test_malformed_scheduler_conf_names_the_field() -> None:
    objects = cluster().objects()
    find(objects, "ConfigMap", "volcano-scheduler-configmap")["data"][
        "volcano-scheduler.conf"] = "configurations: [unclosed"
    assert any("'data.volcano-scheduler.conf'" in m for m in errors_of(objects))


def test_unmodelled_params_are_warned() -> None:
    result = run(_with_params(**{"nslb-version": "2.0", "shared-tor-num": "1"}))
    assert sum("cannot be expressed" in w for w in result.warnings) == 2
