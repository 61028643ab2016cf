"""The live reader: the same objects as the kubectl dumps, listed through the Kubernetes API.

Uses the official ``kubernetes`` client with **list calls only** (RBAC ``list`` on nodes,
pods, configmaps, priorityclasses and podgroups), paginated (``limit``/``continue``) so
that each page is reduced to compact records before the next is fetched: memory follows
the records, not the size of the cluster's JSON.  Responses are read as raw JSON
(``_preload_content=False``), so the objects are exactly what ``kubectl -o json`` prints
and go through the same code as the dumps.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from models.documents import read_bytes
from models.kube.config import SCHEDULER_CM, SCHEDULER_NAMESPACE
from models.kube.jobs import RESCHEDULE_CM, RESCHEDULE_NAMESPACE
from models.kube.nodes import MINDX_NAMESPACE
from models.kube.source import Diagnostics, Sink
from models.limits import MAX_FILE_BYTES
from models.validation import InputError

#: Objects per list page.
PAGE_SIZE = 500
#: Seconds allowed per request.
REQUEST_TIMEOUT = 60.0


@dataclass(frozen=True)
class ListCall:
    """One list call: what it reads, whether a failure is fatal, and the kind of its items."""

    what: str
    kind: str
    required: bool
    call: Callable[..., Any]
    kwargs: dict[str, Any]


def _check_kubeconfig_files(path: str | None) -> None:
    """The Kubernetes client reads the kubeconfig files itself, by name: each present one
    must be a regular file of at most :data:`~models.limits.MAX_FILE_BYTES` (a named pipe
    would block it, ``/dev/zero`` fill the memory).

    Raises
    ------
    InputError
        Naming the file.
    """
    names = (path or os.path.join("~", ".kube", "config")).split(os.pathsep)
    for name in (os.path.expanduser(n) for n in names if n):
        if os.path.lexists(name):
            read_bytes(name, MAX_FILE_BYTES,
                       regular_only="the Kubernetes client reads a kubeconfig by name")


def api_client(kubeconfig: str | None, context: str | None, in_cluster: bool) -> Any:
    """An ``ApiClient`` from a kubeconfig (default location when ``None``) or in-cluster.

    Raises
    ------
    InputError
        When no configuration can be loaded.
    """
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    if not in_cluster:
        _check_kubeconfig_files(kubeconfig or os.environ.get("KUBECONFIG") or None)
    try:
        if in_cluster:
            config.load_incluster_config()
            return client.ApiClient()
        path = kubeconfig or os.environ.get("KUBECONFIG") or None
        if path is None and not os.path.exists(os.path.expanduser("~/.kube/config")) and (
                os.environ.get("KUBERNETES_SERVICE_HOST")):
            config.load_incluster_config()
            return client.ApiClient()
        return config.new_client_from_config(config_file=path, context=context,
                                             persist_config=False)
    except (ConfigException, OSError, TypeError, ValueError) as exc:
        where = ("in-cluster configuration" if in_cluster
                 else f"kubeconfig {kubeconfig or '(default)'}")
        raise InputError([f"{where}: cannot load the cluster configuration: {exc}"]) from None


def list_calls(api: Any) -> list[ListCall]:
    """The list calls of ``import --kubeconfig``: the kubectl set of the README."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    sched = client.SchedulingV1Api(api)
    custom = client.CustomObjectsApi(api)
    return [
        ListCall("nodes", "Node", True, core.list_node, {}),
        ListCall("pods (all namespaces)", "Pod", True, core.list_pod_for_all_namespaces, {}),
        ListCall("podgroups.scheduling.volcano.sh (all namespaces)", "PodGroup", False,
                 custom.list_cluster_custom_object,
                 {"group": "scheduling.volcano.sh", "version": "v1beta1",
                  "plural": "podgroups"}),
        ListCall("priorityclasses", "PriorityClass", False, sched.list_priority_class, {}),
        ListCall(f"configmaps in {MINDX_NAMESPACE} with mx-consumer-volcano=true", "ConfigMap",
                 False, core.list_namespaced_config_map,
                 {"namespace": MINDX_NAMESPACE, "label_selector": "mx-consumer-volcano=true"}),
        ListCall("configmaps with mx-consumer-cim=true (all namespaces)", "ConfigMap", False,
                 core.list_config_map_for_all_namespaces,
                 {"label_selector": "mx-consumer-cim=true"}),
        ListCall(f"configmap {SCHEDULER_NAMESPACE}/{SCHEDULER_CM}", "ConfigMap", False,
                 core.list_namespaced_config_map,
                 {"namespace": SCHEDULER_NAMESPACE,
                  "field_selector": f"metadata.name={SCHEDULER_CM}"}),
        ListCall(f"configmap {RESCHEDULE_NAMESPACE}/{RESCHEDULE_CM}", "ConfigMap", False,
                 core.list_namespaced_config_map,
                 {"namespace": RESCHEDULE_NAMESPACE,
                  "field_selector": f"metadata.name={RESCHEDULE_CM}"}),
    ]


def _pages(call: ListCall, page_size: int) -> Iterator[dict[str, Any]]:
    token: str | None = None
    while True:
        kwargs = dict(call.kwargs, limit=page_size, _preload_content=False,
                      _request_timeout=REQUEST_TIMEOUT)
        if token:
            kwargs["_continue"] = token
        response = call.call(**kwargs)
        try:
            body = json.loads(response.data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError([f"API list of {call.what}: the answer is not JSON: {exc}"]) from None
        if not isinstance(body, dict) or not isinstance(body.get("items"), list):
            raise InputError([f"API list of {call.what}: the answer is not a list object"])
        yield body
        token = (body.get("metadata") or {}).get("continue")
        if not token:
            return


def read_live(sink: Sink, diagnostics: Diagnostics, *, kubeconfig: str | None = None,
              context: str | None = None, in_cluster: bool = False,
              page_size: int | None = None, kinds: frozenset[str] | None = None) -> None:
    """List the cluster's objects and feed each one to ``sink(obj, source)``.

    ``kinds`` limits the list calls to those kinds (e.g. ``ConfigMap`` and
    ``PriorityClass`` for the extender, which gets nodes and pods from Volcano).

    Raises
    ------
    InputError
        When the cluster cannot be reached, or a required list (nodes, pods) fails.
    """
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    api = api_client(kubeconfig, context, in_cluster)
    try:
        for call in list_calls(api):
            if kinds is not None and call.kind not in kinds:
                continue
            source = f"API list of {call.what}"
            try:
                for page in _pages(call, page_size or PAGE_SIZE):
                    for item in page["items"]:
                        if isinstance(item, dict):
                            item.setdefault("kind", call.kind)  # list items omit their kind
                            sink(item, source)
            except ApiException as exc:
                text = f"HTTP {exc.status} {exc.reason}"
                if call.required:
                    raise InputError([f"{source}: {text}"]) from None
                diagnostics.warn(source, f"failed ({text}): imported without these objects")
            except HTTPError as exc:
                raise InputError([f"{source}: cannot reach the API server: {exc}"]) from None
    finally:
        api.close()
