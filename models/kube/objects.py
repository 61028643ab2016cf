"""What the watcher keeps of an object as it arrives, and how it knows it again.

The dropping rules applied on arrival (``managedFields``, ``kubectl``'s last-applied
annotation, the subtrees the importer never reads: :func:`strip_object`), which Pods are
kept at all (:func:`wanted`), an object's key and version, the stub held of the bulky
kinds besides their importer records (:func:`stub`), and the comparison of a listed
object with the held one by uid and ``resourceVersion`` (:func:`same_object`).  Shared by
the cluster watch (:mod:`models.kube.watch`) and the extender's lean snapshot.
"""

from __future__ import annotations

from typing import Any

from models.kube.jobs import GROUP_ANNOTATION

#: Annotation ``kubectl apply`` writes: a copy of the whole object, never read.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: Subtrees of each kind that the importer does not read (dropped on arrival).
UNUSED = {
    "Pod": (("spec", "volumes"), ("spec", "tolerations"), ("spec", "initContainers"),
            ("status", "containerStatuses"), ("status", "initContainerStatuses"),
            ("status", "conditions"), ("status", "podIPs")),
    "Node": (("status", "volumesAttached"), ("status", "volumesInUse"),
             ("status", "daemonEndpoints"), ("status", "nodeInfo"), ("status", "addresses")),
}


def strip_object(obj: dict[str, Any], *, copy: bool = False) -> dict[str, Any]:
    """Drop what the importer never reads; the object.

    In place, or with ``copy`` in a new object built from copies of the dictionaries on
    the way (``obj`` is not changed): the extender's parsed snapshot then keeps the
    dropped subtrees, freed with it in slices after the plan instead of one by one
    before it (``managedFields`` alone is hundreds of objects per object)."""
    out = dict(obj) if copy else obj
    meta = out.get("metadata")
    if isinstance(meta, dict):
        if copy:
            meta = out["metadata"] = dict(meta)
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:
            if copy:
                annotations = meta["annotations"] = dict(annotations)
            annotations.pop(LAST_APPLIED)
    for path in UNUSED.get(str(out.get("kind")), ()):
        parent = out.get(path[0])
        if isinstance(parent, dict) and path[1] in parent:
            if copy:
                parent = out[path[0]] = dict(parent)
            parent.pop(path[1])
    return out


def wanted(obj: dict[str, Any]) -> bool:
    """Whether the importer reads this object: every object but Pods that neither
    request a ``huawei.com/`` resource nor carry the Volcano group annotation."""
    if obj.get("kind") != "Pod":
        return True
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if isinstance(annotations, dict) and GROUP_ANNOTATION in annotations:
        return True
    spec = obj.get("spec") or {}
    containers = spec.get("containers") if isinstance(spec, dict) else None
    for container in containers if isinstance(containers, list) else ():
        resources = container.get("resources") if isinstance(container, dict) else None
        if not isinstance(resources, dict):
            continue
        for section in ("requests", "limits"):
            values = resources.get(section)
            if isinstance(values, dict) and any(str(k).startswith("huawei.com/")
                                                for k in values):
                return True
    return False


def object_key(obj: dict[str, Any]) -> tuple[str, str]:
    """(namespace, name) of an object: its key in a stream."""
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def identity(obj: dict[str, Any]) -> tuple[Any, Any]:
    """(uid, resourceVersion) of an object, as its metadata has them."""
    meta = obj.get("metadata") or {}
    return meta.get("uid"), meta.get("resourceVersion")


def version_of(obj: dict[str, Any]) -> str | None:
    """An object's ``resourceVersion`` (``None``: none)."""
    meta = obj.get("metadata") or {}
    value = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return str(value) if value else None


def same_object(held: dict[str, Any] | None, obj: dict[str, Any]) -> bool:
    """Whether ``obj`` is the held object unchanged: the same uid and resourceVersion."""
    if held is None:
        return False
    version = version_of(obj)
    if version is None or version_of(held) != version:
        return False
    meta, was = obj.get("metadata") or {}, held.get("metadata") or {}
    return bool(meta.get("uid") == was.get("uid"))


def stub(obj: dict[str, Any]) -> dict[str, Any]:
    """What is held of a Node, Pod or PodGroup besides its record: kind, name, namespace,
    uid and resourceVersion (enough to forget it and to compare a fresh list)."""
    meta = obj.get("metadata") or {}
    keep = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion")
            if k in meta}
    return {"kind": obj.get("kind"), "metadata": keep}
