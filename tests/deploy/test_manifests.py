"""The Kubernetes files that run ``serve --extender`` beside Volcano's scheduler
(``solver/deploy/``, written out by ``npu-place examples --copy extender-deploy DIR``).

Each file is read into the official ``kubernetes`` client's models (``V1Deployment``,
``V1ClusterRole``, ``V1ClusterRoleBinding``, ``V1ConfigMap``), so a misspelt field or a
wrong type fails here, and the fields that make the set-up work are checked: the sidecar's
command line parses and agrees with the ConfigMap's ``urlPrefix`` and ``httpTimeout``,
``ignorable`` is true, and the role grants what ``--extender-in-cluster`` lists.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

kubernetes = pytest.importorskip("kubernetes")  # the test extra installs it

from solver.cli.main import build_parser  # noqa: E402

DEPLOY = Path(__file__).resolve().parents[2] / "solver" / "deploy"


def _deserialize(client: Any, doc: Any, kind: str) -> Any:
    """``doc`` as the client's model ``kind``: the conversion ``ApiClient.deserialize``
    makes of a response's JSON body (its public signature differs between client
    versions; the conversion it calls does not)."""
    return client._ApiClient__deserialize(json.loads(json.dumps(doc)), kind)


def _load(name: str) -> list[Any]:
    """Every document of ``solver/deploy/NAME`` as the client's model of its kind."""
    client = kubernetes.client.ApiClient()
    models = []
    for doc in yaml.safe_load_all((DEPLOY / name).read_text(encoding="utf-8")):
        kind = {"Deployment": "V1Deployment", "ConfigMap": "V1ConfigMap",
                "ClusterRole": "V1ClusterRole",
                "ClusterRoleBinding": "V1ClusterRoleBinding"}[doc["kind"]]
        model = _deserialize(client, doc, kind)
        # every key of the file became a field of the model: nothing was dropped as unknown
        assert client.sanitize_for_serialization(model) == doc, f"{name}: {doc['kind']}"
        models.append(model)
    return models


def _scheduler_conf() -> dict[str, Any]:
    (configmap,) = _load("scheduler-configmap.yaml")
    conf = yaml.safe_load(configmap.data["volcano-scheduler.conf"])
    assert isinstance(conf, dict)
    return conf


def _extender_arguments() -> dict[str, Any]:
    plugins = [p for tier in _scheduler_conf()["tiers"] for p in tier["plugins"]]
    (extender,) = [p for p in plugins if p["name"] == "extender"]
    arguments = extender["arguments"]
    assert isinstance(arguments, dict)
    return arguments


def _sidecar() -> Any:
    (deployment,) = _load("sidecar-patch.yaml")
    (container,) = [c for c in deployment.spec.template.spec.containers
                    if c.name == "npu-place"]
    return deployment, container


def test_the_deploy_folder_holds_the_three_files() -> None:
    assert sorted(p.name for p in DEPLOY.glob("*.yaml")) == [
        "rbac.yaml", "scheduler-configmap.yaml", "sidecar-patch.yaml"]


def test_the_configmap_turns_the_extender_on_beside_the_ascend_plugin() -> None:
    (configmap,) = _load("scheduler-configmap.yaml")
    assert (configmap.metadata.name, configmap.metadata.namespace) == (
        "volcano-scheduler-configmap", "volcano-system")
    conf = _scheduler_conf()
    names = [p["name"] for tier in conf["tiers"] for p in tier["plugins"]]
    assert any(n.startswith("volcano-npu") for n in names)
    assert names.index("extender") > names.index("gang")
    arguments = _extender_arguments()
    assert arguments["extender.ignorable"] is True  # every failure leaves stock Volcano
    for verb in ("onSessionOpen", "onSessionClose", "prioritize", "predicate",
                 "allocateFunc", "deallocateFunc"):
        assert arguments[f"extender.{verb}Verb"] == verb
    assert "huawei.com/npu-core" in arguments["extender.managedResources"]


def test_the_sidecar_serves_what_the_configmap_calls() -> None:
    deployment, container = _sidecar()
    assert (deployment.metadata.name, deployment.metadata.namespace) == (
        "volcano-scheduler", "volcano-system")
    args = build_parser("serve").parse_args(container.args)
    assert args.extender and args.extender_in_cluster
    arguments = _extender_arguments()
    timeout = re.fullmatch(r"(\d+(?:\.\d+)?)s", arguments["extender.httpTimeout"])
    assert timeout is not None
    assert args.extender_http_timeout == float(timeout.group(1))
    url = arguments["extender.urlPrefix"]
    assert url == f"http://{args.host}:{args.port}{args.extender_prefix}"
    assert args.host == "127.0.0.1"  # loopback: only the scheduler's containers reach it
    # the probes reach the loopback from inside the container (an httpGet probe is sent
    # to the pod IP, where nothing listens)
    for probe, path in ((container.readiness_probe, "/readyz"),
                        (container.liveness_probe, "/healthz")):
        assert probe.http_get is None
        command = " ".join(shlex.quote(w) for w in probe._exec.command)
        assert f"http://127.0.0.1:{args.port}{path}" in command
    assert container.resources.limits["memory"] == "4Gi"


def test_the_role_grants_the_list_calls_of_the_in_cluster_refresh() -> None:
    role, binding = _load("rbac.yaml")
    grants = {(group, resource, verb) for rule in role.rules for group in rule.api_groups
              for resource in rule.resources for verb in rule.verbs}
    assert grants == {("", "configmaps", "list"),
                      ("scheduling.k8s.io", "priorityclasses", "list")}
    assert binding.role_ref.name == role.metadata.name
    (subject,) = binding.subjects
    deployment, _container = _sidecar()
    assert (subject.kind, subject.namespace) == ("ServiceAccount",
                                                 deployment.metadata.namespace)


def test_a_misspelt_field_is_caught() -> None:
    client = kubernetes.client.ApiClient()
    doc = yaml.safe_load((DEPLOY / "sidecar-patch.yaml").read_text(encoding="utf-8"))
    doc["spec"]["template"]["spec"]["containers"][0]["imagePullPolice"] = "Always"
    model = _deserialize(client, doc, "V1Deployment")
    assert client.sanitize_for_serialization(model) != doc


def _manual_yaml_blocks() -> list[tuple[str, str]]:
    """Every YAML code block of the README and the manual: (file, text)."""
    root = DEPLOY.parents[1]
    blocks = []
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        blocks += [(page.name, b) for b in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)]
    return blocks


def test_the_manuals_probes_reach_their_server() -> None:
    """The kubelet sends an ``httpGet`` probe to the pod's IP, where a server bound to
    loopback (``serve``'s default ``--host``) does not listen: a container snippet with an
    ``httpGet`` probe must bind another address; a loopback sidecar probes with ``exec``,
    as ``solver/deploy/sidecar-patch.yaml`` does."""
    blocks = _manual_yaml_blocks()
    assert any("readinessProbe" in b for _, b in blocks)  # the snippets are found
    for page, block in blocks:
        for container in re.split(r"\n\s*- name: ", block):
            if re.search(r"\bhttpGet:", container):
                assert re.search(r'"--host",\s*"(?!127\.|localhost|::1)', container), (
                    f"{page}: an httpGet probe on a loopback-bound server:\n{container}")
