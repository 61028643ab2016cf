"""Volcano's side of the extender protocol: verb names, codes, answers, the snapshot's shape.

The constants and canned answers of the verbs, the refusal of a snapshot
(:class:`SnapshotError`), the Kubernetes objects inside an ``onSessionOpen`` snapshot
(:func:`snapshot_objects`) and a task's job, rank and uid (:func:`task_identity`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson

from models.kube.jobs import GROUP_ANNOTATION, pod_record
from models.kube.source import Diagnostics
from models.kube.watch import strip_object, wanted
from models.limits import escape_text

#: Route prefix of the extender verbs (``extender.urlPrefix`` ends with it).
DEFAULT_PREFIX = "/volcano"
#: The verb names of Volcano's documentation (the routes' names).
VERBS = ("onSessionOpen", "onSessionClose", "predicate", "prioritize", "allocateFunc",
         "deallocateFunc")
#: The planned node's score.  Volcano adds every plugin's score (``BatchNodeOrderFn``):
#: the Ascend plugin adds up to 1e10 for the nodes of its own super-pod / multilevel
#: choice, the stock node-order plugins at most 100 × their weight each.  1e12 is about 90
#: times the most the others reach together (1e10 plus ten plugins at 100 × a weight below
#: 1e6), and exact in a float64.
PLANNED_SCORE = 1.0e12
#: Predicate codes (Volcano ``api.Status`` codes).
CODE_SUCCESS = 0
CODE_UNSCHEDULABLE = 2
#: Volcano ``TaskStatus`` values (``1 << iota``) seen by ``deallocateFunc``.
STATUS_PENDING = 1
STATUS_RELEASING = 64

#: Canned answers: an abstaining score, a fitting node, an event taken, an empty body.
ABSTAIN = b'{"nodeScore":{},"errorMessage":""}'
FITS = b'{"status":"","code":0}'
EVENT_OK = b'{"errorMessage":""}'
EMPTY = b"{}"


class SnapshotError(Exception):
    """A session snapshot the extender refuses: HTTP status and one message per problem."""

    def __init__(self, status: int, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.status = status
        self.messages = messages


#: Bytes one parsed JSON value takes at most: a hostile ``[{},{},…]`` of empty objects
#: measured 108 bytes a value with tracemalloc (orjson's dict and the list's slot);
#: Kubernetes objects take less per value.
BYTES_PER_VALUE = 110


def _nothing() -> None:
    """No pause between the stretches of a parse."""


def count_values(body: bytes, between: Callable[[], None] = _nothing) -> int:
    """An upper bound of the JSON values in ``body`` (minus one): its ``,`` and ``:``.

    Every value after a container's first is preceded by a ``,``, every object member by
    a ``:``; empty containers nest at most as deep as the parser allows, so the count bounds
    the parse's memory (with :data:`BYTES_PER_VALUE`) whatever the body holds.  Counted in
    slices of :data:`PIECE_BYTES` with ``between()`` before each (each ``count`` holds the
    GIL: 80 MB at once took 40-80 ms).
    """
    values = 0
    for start in range(0, len(body), PIECE_BYTES):
        between()
        end = start + PIECE_BYTES
        values += body.count(b",", start, end) + body.count(b":", start, end)
    return values


def check_values(body: bytes, limit: int, what: str,
                 between: Callable[[], None] = _nothing) -> None:
    """Refuse (413, before parsing) a body of more than ``limit`` JSON values
    (``between``: :func:`count_values`).

    Raises
    ------
    SnapshotError
        413 naming ``what``, the count and the bound.
    """
    values = count_values(body, between)
    if values > limit:
        raise SnapshotError(413, [
            f"{what}: about {values} JSON values; the extender parses at most {limit} "
            f"(about {limit * BYTES_PER_VALUE >> 20} MB once parsed)"])




#: Bytes of a snapshot parsed by one ``orjson.loads`` call at most (about 5-30 ms of
#: CPU): between calls the event loop thread can take the GIL and answer on time.
PIECE_BYTES = 1 << 20


def _next_member(raw: bytes, start: int, end: int, marker: bytes, then: bytes) -> int:
    """The first ``marker`` in ``raw[start:end]`` followed by ``then`` within 300 bytes
    (-1: none)."""
    found = raw.find(marker, start, end)
    while found >= 0 and raw.find(then, found, min(end, found + 300)) < 0:
        found = raw.find(marker, found + 1, end)
    return found


def _map_pieces(raw: bytes, start: int, end: int, marker: bytes, then: bytes,
                between: Callable[[], None] = _nothing) -> list[dict[str, Any]] | None:
    """Parse the members ``raw[start:end]`` of a JSON object in pieces of about
    :data:`PIECE_BYTES`, cutting only before a member whose value opens with ``marker``
    followed by ``then`` (``None``: a cut that does not parse; the caller parses the body
    whole)."""
    out: list[dict[str, Any]] = []
    pos = start
    while pos < end:
        found = (_next_member(raw, pos + PIECE_BYTES, end, marker, then)
                 if end - pos > PIECE_BYTES else -1)
        cut = raw.rfind(b',"', pos, found) if found >= 0 else -1
        if found < 0 or cut <= pos:
            cut = end
        elif b'"' in raw[cut + 2:found] or b"\\" in raw[cut + 2:found]:
            return None
        between()
        try:
            piece = orjson.loads(b"{" + raw[pos:cut] + b"}")
        except orjson.JSONDecodeError:
            return None
        out.append(piece)
        pos = cut + 1
    return out


def parse_snapshot(raw: bytes, between: Callable[[], None] = _nothing) -> Any:
    """``orjson.loads(raw)`` of an ``OnSessionOpenRequest``, in pieces when Go wrote it
    (``between()`` is called before each piece).

    One ``orjson.loads`` of a 34 MB snapshot holds the GIL for 0.2-0.4 s of CPU (more than
    a second of wall time on a loaded machine), and the event loop cannot answer
    ``onSessionOpen`` meanwhile.  Go writes ``{"Jobs":{…},"Nodes":{…},…}`` with each job
    opening ``{"UID":…,"PgUID":`` and each node ``{"Name":…,"Node":``, so the two maps
    are parsed in pieces
    cut before such members; every piece that parses alone is a run of whole members
    (a cut inside a string leaves an unterminated string), so the pieces together are the
    full parse (later duplicate keys win, as in a full parse).  Any other layout, or a
    piece that does not parse, is parsed whole.

    Raises
    ------
    orjson.JSONDecodeError
        When the body is not JSON.
    """
    nodes_at = raw.find(b',"Nodes":{', 9) if raw.startswith(b'{"Jobs":{') else -1
    rest_at = raw.find(b',"Queues":', nodes_at) if nodes_at > 0 else -1
    between()
    if rest_at < 0 or raw[nodes_at - 1:nodes_at] != b"}" or raw[rest_at - 1:rest_at] != b"}":
        return orjson.loads(raw)
    # a JobInfo opens {"UID":…,"PgUID": (its TaskInfos {"UID":…,"Job":), a NodeInfo
    # {"Name":…,"Node":
    jobs = _map_pieces(raw, 9, nodes_at - 1, b'":{"UID":', b'","PgUID":', between)
    nodes = (_map_pieces(raw, nodes_at + 10, rest_at - 1, b'":{"Name":', b'","Node":',
                         between) if jobs is not None else None)
    if jobs is None or nodes is None:
        return orjson.loads(raw)
    try:
        rest = orjson.loads(b"{" + raw[rest_at + 1:])
    except orjson.JSONDecodeError:
        return orjson.loads(raw)
    data: dict[str, Any] = {"Jobs": {}, "Nodes": {}}
    for piece in jobs:
        data["Jobs"].update(piece)
    for piece in nodes:
        data["Nodes"].update(piece)
    data.update(rest)
    return data


def _mapping(value: Any, where: str, errors: list[str], required: bool = True
             ) -> dict[str, Any]:
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        errors.append(f"{where}: expected an object, got "
                      f"{'null' if value is None else type(value).__name__}")
        return {}
    return value


def snapshot_objects(data: Any, max_nodes: int, max_tasks: int,
                     between: Callable[[], None] = _nothing, lean: bool = True
                     ) -> Iterator[tuple[dict[str, Any], str]]:
    """The Kubernetes objects of an ``OnSessionOpenRequest``: Nodes, Pods, PodGroups.

    Pods come from the jobs' ``Tasks`` and from the nodes' ``Tasks`` (pods of other
    schedulers use chips too); PodGroups are Volcano's ``PodGroup`` wrapper with its
    ``Version`` field dropped.  ``lean`` (the extender's path) leaves out what the
    importer never reads, as the cluster watch does (:mod:`models.kube.watch`): Pods that
    neither request a ``huawei.com/`` resource nor belong to a Volcano group (the node
    agents and services, most of a real cluster's pods), and ``managedFields``,
    ``kubectl``'s last-applied annotation and the unused subtrees of the others; the
    import is the same (``tests/solver/service/test_snapshot_lean.py``).

    Raises
    ------
    SnapshotError
        422 for a body that is not Volcano's shape, or holds more nodes or tasks than
        allowed; every message names the job, node or task and the field.
    """
    errors: list[str] = []
    if not isinstance(data, dict):
        raise SnapshotError(422, ["onSessionOpen body: expected Volcano's "
                                  "OnSessionOpenRequest object"])
    if "Jobs" not in data and "Nodes" not in data:
        raise SnapshotError(422, ["onSessionOpen body: neither 'Jobs' nor 'Nodes' (not "
                                  "Volcano's OnSessionOpenRequest shape: Go field names)"])
    jobs = _mapping(data.get("Jobs"), "Jobs", errors, required=False)
    nodes = _mapping(data.get("Nodes"), "Nodes", errors, required=False)
    if errors:
        raise SnapshotError(422, errors)
    if len(nodes) > max_nodes:
        raise SnapshotError(422, [f"Nodes: {len(nodes)} nodes; the extender takes at most "
                                  f"{max_nodes}"])
    tasks = 0
    out: list[tuple[dict[str, Any], str]] = []
    seen_pods: set[tuple[str, str]] = set()

    def pod_of(task: Any, where: str) -> None:
        nonlocal tasks
        info = _mapping(task, where, errors)
        pod = info.get("Pod")
        if not isinstance(pod, dict):
            errors.append(f"{where}.Pod: expected a v1.Pod object")
            return
        meta = pod.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            errors.append(f"{where}.Pod.metadata.name: missing or not a string")
            return
        key = (str(meta.get("namespace") or "default"), meta["name"])
        if key in seen_pods:
            return
        seen_pods.add(key)
        tasks += 1
        if tasks > max_tasks:
            raise SnapshotError(422, [f"more than {max_tasks} tasks in the snapshot"])
        obj = dict(pod, kind="Pod")
        if lean:
            if not wanted(obj):
                return
            obj = strip_object(obj, copy=True)
        out.append((obj, where))

    for name, info in nodes.items():
        between()
        where = f"Nodes[{escape_text(str(name), 80)}]"
        record = _mapping(info, where, errors)
        node = record.get("Node")
        if node is None and "Node" in record:
            continue  # a node Volcano knows by name only (being added or removed)
        if not isinstance(node, dict):
            errors.append(f"{where}.Node: expected a v1.Node object")
            continue
        node = dict(node, kind="Node")
        out.append((strip_object(node, copy=True) if lean else node, where))
        for uid, task in _mapping(record.get("Tasks"), f"{where}.Tasks", errors,
                                  required=False).items():
            pod_of(task, f"{where}.Tasks[{escape_text(str(uid), 80)}]")
        if len(errors) > 20:
            break
    for job_id, info in jobs.items():
        between()
        where = f"Jobs[{escape_text(str(job_id), 120)}]"
        record = _mapping(info, where, errors)
        group = record.get("PodGroup")
        if group is not None:
            if not isinstance(group, dict):
                errors.append(f"{where}.PodGroup: expected an object")
            else:
                pg = dict({k: v for k, v in group.items() if k != "Version"},
                          kind="PodGroup")
                out.append((strip_object(pg, copy=True) if lean else pg, where))
        for uid, task in _mapping(record.get("Tasks"), f"{where}.Tasks", errors,
                                  required=False).items():
            pod_of(task, f"{where}.Tasks[{escape_text(str(uid), 80)}]")
        if len(errors) > 20:
            break
    if errors:
        raise SnapshotError(422, errors[:20])
    return iter(out)


def task_identity(task: Any) -> tuple[str, int | None, str]:
    """``(job id, rank, task uid)`` of a Volcano ``TaskInfo`` (rank ``None`` when unknown).

    The job id is ``TaskInfo.Job`` (``<namespace>/<podgroup>``), else the pod's
    ``scheduling.k8s.io/group-name`` annotation; the rank is read as the importer reads it
    (``hccl/rankIndex``, the StatefulSet ordinal, ``VC_TASK_INDEX``).
    """
    if not isinstance(task, dict):
        return "", None, ""
    pod = task.get("Pod")
    raw_job = task.get("Job")
    job: str = raw_job if isinstance(raw_job, str) else ""
    uid = str(task.get("UID") or "")
    if not isinstance(pod, dict):
        return job, None, uid
    if not job:
        meta = pod.get("metadata") or {}
        annotations = meta.get("annotations") or {} if isinstance(meta, dict) else {}
        group = annotations.get(GROUP_ANNOTATION) if isinstance(annotations, dict) else None
        if group:
            job = f"{meta.get('namespace') or 'default'}/{group}"
    record = pod_record(pod, Diagnostics())
    return job, (record.rank if record is not None else None), uid
