"""Volcano's own extender protocol: npu-place plans inside a stock Volcano scheduler.

Volcano's ``extender`` plugin (``pkg/scheduler/plugins/extender``) calls an outside service
from every scheduling session with ``POST <urlPrefix>/<verb>`` and one timeout for every
verb (``extender.httpTimeout``, default 1 s).  This module answers those verbs under a path
prefix of ``npu-place serve`` (default ``/volcano``), with the verb names of Volcano's
documentation as route names:

``onSessionOpen``
    Body: the session snapshot, ``{"Jobs": {jobID: JobInfo}, "Nodes": {name: NodeInfo},
    ...}`` with Go field names (Volcano's ``JobInfo``/``TaskInfo``/``NodeInfo`` carry no
    JSON tags) and the Kubernetes ``Pod``/``Node``/``PodGroup`` objects inside.  The
    objects go through the importer of ``npu-place import`` (:mod:`models.kube`) together
    with the device state Volcano does not send (the device-info, NodeD and switch
    ConfigMaps, the scheduler ConfigMap, PriorityClasses; :class:`DeviceSource`); the
    previous-node cache is kept across sessions by :class:`heuristics.lifecycle.
    CacheLifecycle` from what each snapshot shows; the session is planned by the facade
    (:func:`solver.facade.solve`) within :attr:`ExtenderConfig.plan_seconds`.  The answer
    is sent by :attr:`ExtenderConfig.answer_seconds` after receipt, whether the plan is
    ready or not (a plan that is not ready makes the session abstain, never answer late).
``prioritize``
    ``{"task": TaskInfo, "nodes": [NodeInfo]}`` → ``{"nodeScore": {planned node:
    PLANNED_SCORE}, "errorMessage": ""}``; an empty ``nodeScore`` map abstains.  Only the
    task is parsed (:meth:`ExtenderCore.prioritize_raw`).
``predicate`` (optional)
    Job level only: a node outside the job's planned node set is refused (code 2,
    Unschedulable).  Never per rank: Volcano caches a refusal per job and task role.
``allocateFunc`` / ``deallocateFunc``
    What Volcano allocated, discarded (task status Pending) or evicted (Releasing) in the
    session: recorded in the cache lifecycle.
``onSessionClose``
    Ends the session: later verbs abstain until the next ``onSessionOpen``.

The service's own view (:attr:`ExtenderConfig.cluster`): the session is planned from a
stored cluster of the service instead; Volcano's snapshot is read and dropped unparsed, and
its allocate/deallocate events become the stored cluster's cache events.

Safety: an unknown task or job abstains; every answer is a 200 with an abstaining body
except a snapshot that is too large (413), malformed or of an unknown shape (400/422);
Volcano must be configured with ``extender.ignorable: true`` so that any failure leaves its
stock behaviour (docs/extender.md).

Which jobs are steered (docs/extender.md, "Which jobs it steers"): every job whose
family the Ascend plugin does not select nodes for by itself (ordinary policies, vNPU) is
steered rank by rank.  Super-pod (A3/850), 950 and multilevel jobs are steered only while
the plan agrees with the plugin's own selection, which the greedy port reproduces: the
plugin adds up to 1e10 to the nodes it selected and writes ``super-pod-rank`` from that
selection, so a plan that places such a job elsewhere would end with an empty annotation.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from heuristics.lifecycle import CacheLifecycle, RunningPods, TaskStatus
from models.io import scenario_from_data
from models.joblist import job_count
from models.kube.build import ClusterImport
from models.kube.jobs import GROUP_ANNOTATION, controller_uid, pod_record
from models.kube.source import Diagnostics, read_dumps
from models.limits import escape_text
from models.scenario import AffinityCacheModel, Family, Policy, Scenario, family_of
from models.validation import InputError
from solver.service.auth import PATH_AUTHORIZED
from solver.service.parsing import BadRequest, refuse_declared_length

log = logging.getLogger("npu_place.extender")

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
#: Families the Ascend plugin selects nodes for itself (1e10 scores, ``super-pod-rank``).
SELECTING_FAMILIES = frozenset({Family.SUPERPOD, Family.RACK, Family.MULTILEVEL})

_ABSTAIN = b'{"nodeScore":{},"errorMessage":""}'
_FITS = b'{"status":"","code":0}'
_EVENT_OK = b'{"errorMessage":""}'
_EMPTY = b"{}"


def _remember_jobs(session: Session, scenario: Scenario) -> None:
    """Note every pending job's owner (both kinds: ``jobs`` and ``vnpu-jobs``) and the
    session's node and job counts."""
    owners = [(j.name, j.owner_uid) for j in scenario.jobs]
    owners += [(v.name, v.owner_uid) for v in scenario.vnpu_jobs]
    for name, owner in owners:
        if owner:
            session.owners[name] = owner
    session.counts["nodes"] = len(scenario.nodes)
    session.counts["pending-jobs"] = job_count(scenario)


class _Superseded(Exception):
    """A newer session opened while this one was being read or imported."""


class SnapshotError(Exception):
    """A session snapshot the extender refuses: HTTP status and one message per problem."""

    def __init__(self, status: int, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.status = status
        self.messages = messages


@dataclass(frozen=True)
class ExtenderConfig:
    """Settings of the extender door (``npu-place serve --extender ...``).

    Attributes
    ----------
    prefix
        Route prefix; Volcano's ``extender.urlPrefix`` is ``<scheme>://<host>:<port><prefix>``.
    http_timeout
        Volcano's ``extender.httpTimeout`` in seconds (one timeout for every verb).
    answer_share
        ``onSessionOpen`` answers by this share of ``http_timeout`` after receipt.
    plan_share
        The plan's own time limit is at most this share of ``http_timeout`` (the rest of
        the answer time is left to reading, importing and answering).
    engine
        Facade engine: ``auto``, ``greedy`` or ``cpsat``.
    seed, deterministic_time
        CP-SAT's seed and deterministic time limit (reproducible plans).
    max_snapshot_mb
        Largest ``onSessionOpen`` body (413 above it, refused before reading when the
        ``Content-Length`` says so).
    max_verb_mb
        Largest body of the other verbs.
    max_nodes, max_tasks
        Most nodes and tasks in a snapshot (422 above them).
    max_values
        Most JSON values (counted as the body's ``,`` and ``:`` before parsing, 413 above
        it): what bounds the parse's memory, about 85 bytes a value, whatever the body is
        made of (a Kubernetes snapshot has one value per 11 bytes, a hostile ``[{},{},…]``
        one per 3).
    configmaps
        Dump files or directories (``kubectl get -o json``) holding the device-info,
        NodeD, switch and scheduler ConfigMaps and the PriorityClasses: read at start and
        again whenever a file changes (:class:`DeviceSource`).
    live, kubeconfig, in_cluster, refresh_seconds
        Read those objects from the cluster instead (``import --kubeconfig/--in-cluster``
        list calls), re-listed in a background thread every ``refresh_seconds``, never per
        session.
    path_token
        When set, the verbs are served only under ``<prefix>/<token>/<verb>`` (Volcano
        sends no headers of its own; the token rides in ``urlPrefix``).
    cluster
        The service's own view: plan this stored cluster (``PUT``/``PATCH
        /v1/clusters/{name}``, kept current by whoever watches the cluster) instead of
        Volcano's snapshot, whose body is then read and dropped unparsed; Volcano's
        allocate/deallocate events become the cluster's cache events.
    """

    prefix: str = DEFAULT_PREFIX
    http_timeout: float = 1.0
    answer_share: float = 0.8
    plan_share: float = 0.5
    engine: str = "auto"
    seed: int = 0
    deterministic_time: float | None = None
    max_snapshot_mb: float = 256.0
    max_verb_mb: float = 64.0
    max_nodes: int = 65536
    max_tasks: int = 1_000_000
    max_values: int = 16_000_000
    configmaps: tuple[str, ...] = ()
    live: bool = False
    kubeconfig: str | None = None
    in_cluster: bool = False
    refresh_seconds: float = 30.0
    path_token: str | None = field(default=None, repr=False)
    cluster: str | None = None

    @property
    def answer_seconds(self) -> float:
        """Seconds from receipt by which ``onSessionOpen`` answers."""
        return self.answer_share * self.http_timeout

    @property
    def plan_seconds(self) -> float:
        """The plan's time limit at most."""
        return self.plan_share * self.http_timeout


# --------------------------------------------------------------------------- device state


class DeviceSource:
    """The objects Volcano's snapshot lacks: device-info / NodeD / switch ConfigMaps, the
    scheduler ConfigMap and PriorityClasses.

    From dump files (re-read when one changes; checked at most once a second), or from the
    cluster through the list calls of ``import --kubeconfig/--in-cluster``, re-listed in a
    background thread every ``refresh_seconds`` (not per session).
    """

    KINDS = frozenset({"ConfigMap", "PriorityClass"})

    def __init__(self, config: ExtenderConfig) -> None:
        self.config = config
        self._objects: list[tuple[dict[str, Any], str]] = []
        self._stamp: tuple[tuple[str, float, int], ...] = ()
        self._checked = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        if config.configmaps:
            self._reload_files(force=True)

    def _file_stamp(self) -> tuple[tuple[str, float, int], ...]:
        out = []
        for root in self.config.configmaps:
            path = Path(root)
            files = sorted(path.rglob("*")) if path.is_dir() else [path]
            for item in files:
                try:
                    stat = item.stat()
                except OSError:
                    continue
                if item.is_file():
                    out.append((str(item), stat.st_mtime, stat.st_size))
        return tuple(out)

    def _reload_files(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._checked < 1.0:
            return
        self._checked = now
        stamp = self._file_stamp()
        if not force and stamp == self._stamp:
            return
        objects: list[tuple[dict[str, Any], str]] = []
        diag = Diagnostics()

        def keep(obj: dict[str, Any], source: str) -> None:
            if obj.get("kind") in self.KINDS:
                objects.append((obj, source))

        try:
            read_dumps(list(self.config.configmaps), keep, diag)
        except InputError as exc:
            self.error = "; ".join(exc.messages[:3])
            log.warning("extender device source: %s", self.error)
            return
        with self._lock:
            self._objects, self._stamp, self.error = objects, stamp, None

    def start(self) -> None:
        """Start the background re-listing (live mode)."""
        if not self.config.live or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._relist_loop, name="extender-devices",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background re-listing."""
        self._stop.set()

    def _relist_loop(self) -> None:
        from models.kube.live import read_live

        while not self._stop.is_set():
            objects: list[tuple[dict[str, Any], str]] = []
            try:
                read_live(functools.partial(self._keep, objects), Diagnostics(),
                          kubeconfig=self.config.kubeconfig, in_cluster=self.config.in_cluster,
                          kinds=self.KINDS)
            except InputError as exc:
                self.error = "; ".join(exc.messages[:3])
                log.warning("extender device source: %s", self.error)
            else:
                with self._lock:
                    self._objects, self.error = objects, None
            self._stop.wait(self.config.refresh_seconds)

    def _keep(self, into: list[tuple[dict[str, Any], str]], obj: dict[str, Any],
              source: str) -> None:
        if obj.get("kind") in self.KINDS:
            into.append((obj, source))

    def objects(self) -> list[tuple[dict[str, Any], str]]:
        """The current objects with their sources."""
        if self.config.configmaps:
            self._reload_files()
        with self._lock:
            return list(self._objects)


# --------------------------------------------------------------------------- snapshot


def _mapping(value: Any, where: str, errors: list[str], required: bool = True
             ) -> dict[str, Any]:
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        errors.append(f"{where}: expected an object, got "
                      f"{'null' if value is None else type(value).__name__}")
        return {}
    return value


def snapshot_objects(data: Any, max_nodes: int, max_tasks: int
                     ) -> Iterator[tuple[dict[str, Any], str]]:
    """The Kubernetes objects of an ``OnSessionOpenRequest``: Nodes, Pods, PodGroups.

    Pods come from the jobs' ``Tasks`` and from the nodes' ``Tasks`` (pods of other
    schedulers use chips too); PodGroups are Volcano's ``PodGroup`` wrapper with its
    ``Version`` field dropped.

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
        out.append((dict(pod, kind="Pod"), where))

    for name, info in nodes.items():
        where = f"Nodes[{escape_text(str(name), 80)}]"
        record = _mapping(info, where, errors)
        node = record.get("Node")
        if node is None and "Node" in record:
            continue  # a node Volcano knows by name only (being added or removed)
        if not isinstance(node, dict):
            errors.append(f"{where}.Node: expected a v1.Node object")
            continue
        out.append((dict(node, kind="Node"), where))
        for uid, task in _mapping(record.get("Tasks"), f"{where}.Tasks", errors,
                                  required=False).items():
            pod_of(task, f"{where}.Tasks[{escape_text(str(uid), 80)}]")
        if len(errors) > 20:
            break
    for job_id, info in jobs.items():
        where = f"Jobs[{escape_text(str(job_id), 120)}]"
        record = _mapping(info, where, errors)
        group = record.get("PodGroup")
        if group is not None:
            if not isinstance(group, dict):
                errors.append(f"{where}.PodGroup: expected an object")
            else:
                pg = {k: v for k, v in group.items() if k != "Version"}
                out.append((dict(pg, kind="PodGroup"), where))
        for uid, task in _mapping(record.get("Tasks"), f"{where}.Tasks", errors,
                                  required=False).items():
            pod_of(task, f"{where}.Tasks[{escape_text(str(uid), 80)}]")
        if len(errors) > 20:
            break
    if errors:
        raise SnapshotError(422, errors[:20])
    return iter(out)


# --------------------------------------------------------------------------- session


@dataclass
class JobPlan:
    """What the session's plan says about one job."""

    family: Family
    owner: str | None
    ranks: dict[int, str]
    nodes: frozenset[str]
    steer: bool
    reason: str = ""
    #: the tasks are interchangeable replicas (vNPU jobs): a task takes the next planned
    #: node not yet given to another task, whatever its rank
    replicas: bool = False
    slots: dict[str, str] = field(default_factory=dict)  # task uid -> planned node

    def node_for(self, uid: str, rank: int | None,
                 is_offered: Callable[[str], bool]) -> str | None:
        """The planned node of a task (``None``: the plan has none for it); a replica
        prefers a planned node among the candidates."""
        if not self.replicas:
            return self.ranks.get(rank) if rank is not None else None
        if uid in self.slots:
            return self.slots[uid]
        left = list(self.ranks.values())
        for taken in self.slots.values():
            left.remove(taken)
        if not left:
            return None
        node = next((n for n in left if is_offered(n)), left[0])
        self.slots[uid] = node
        return node


@dataclass
class Session:
    """One Volcano scheduling session as the extender sees it."""

    number: int
    opened: float
    now: int
    ready: threading.Event = field(default_factory=threading.Event)
    jobs: dict[str, JobPlan] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)  # job id -> owner uid
    decided: dict[str, bool] = field(default_factory=dict)  # job id -> steered
    allocated: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    closed: bool = False
    error: str | None = None
    engine: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, key: str) -> None:
        """Add one to a counter of the session."""
        self.counts[key] = self.counts.get(key, 0) + 1


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


def _family(policy: str) -> Family:
    try:
        return family_of(Policy(policy))
    except ValueError:  # not a policy the contract knows: never a selecting family
        return Family.ORDINARY


def _placement_ranks(placement: Any) -> dict[str, dict[int, str]]:
    out: dict[str, dict[int, str]] = {}
    for job in placement.jobs:
        if job.placed:
            out[job.name] = {int(rank): node for rank, node in job.ranks.items()}
    return out


class ExtenderCore:
    """The extender's state and verbs, independent of HTTP (the routes call these).

    Parameters
    ----------
    config
        Extender settings.
    clock
        Unix seconds of a session (the cache's time); default :func:`time.time`.
    """

    def __init__(self, config: ExtenderConfig | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config or ExtenderConfig()
        self.clock = clock
        self.devices = DeviceSource(self.config)
        self.lifecycle = CacheLifecycle(None)
        self.session: Session | None = None
        self.sessions = 0
        self._lock = threading.RLock()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="extender-plan")
        self.history: list[dict[str, Any]] = []  # last sessions' summaries

    def start(self) -> None:
        """Start background work: the device source's re-listing, and the engines' imports
        (in the plan thread, so that the first session's plan is not slowed by them)."""
        from solver.facade import preload

        self.devices.start()
        self.executor.submit(preload, self.config.engine)

    def close(self) -> None:
        """Stop background work."""
        self.devices.stop()
        self.executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ session open
    def begin(self) -> Session:
        """A new session (the previous one ends)."""
        with self._lock:
            if self.session is not None and not self.session.closed:
                self._finish(self.session)
            self.sessions += 1
            self.session = Session(self.sessions, time.monotonic(), int(self.clock()))
            return self.session

    def open_session(self, session: Session, body: bytes, deadline: float) -> Session:
        """Read the snapshot, build the scenario, refresh the cache, plan (in a thread).

        ``deadline`` (``time.monotonic``) bounds the plan: its time limit is what is left
        before it, at most :attr:`ExtenderConfig.plan_seconds`.

        Raises
        ------
        SnapshotError
            A malformed or unknown-shaped snapshot (400/422); the session then abstains.
        """
        started = time.thread_time()
        t0 = time.perf_counter()
        try:
            values = body.count(b",") + body.count(b":")
            if values > self.config.max_values:
                raise SnapshotError(413, [
                    f"onSessionOpen body: about {values} JSON values; the extender parses at "
                    f"most {self.config.max_values} (ExtenderConfig.max_values: about "
                    f"{self.config.max_values * 85 >> 20} MB once parsed)"])
            try:
                data = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise SnapshotError(400, [f"onSessionOpen body: not JSON: {exc}"]) from None
            del body
            self._check_current(session)
            t1, c1 = time.perf_counter(), time.thread_time()
            if self.config.cluster is not None:  # a stored cluster's scenario
                scenario = self._stored(session, data)
            else:
                objects = snapshot_objects(data, self.config.max_nodes, self.config.max_tasks)
                del data
                scenario = self._import(session, objects)
            t2, c2 = time.perf_counter(), time.thread_time()
            session.timings.update(parse=t1 - t0, import_=t2 - t1, parse_cpu=c1 - started,
                                   import_cpu=c2 - c1)
            self._check_current(session)
            self._plan(session, scenario, deadline)
            session.timings["plan"] = time.perf_counter() - t2
            session.timings["plan_cpu"] = time.thread_time() - c2
        except SnapshotError as exc:
            session.error = "; ".join(exc.messages[:3])
            raise
        except _Superseded:
            session.error = "superseded: a newer session opened before this one was planned"
        except Exception as exc:  # every failure leaves Volcano's stock behaviour
            log.exception("extender session %d: planning failed", session.number)
            session.error = f"{type(exc).__name__}: {exc}"
        finally:
            session.timings["cpu"] = time.thread_time() - started  # this thread's CPU
            session.ready.set()
        return session

    def _check_current(self, session: Session) -> None:
        """Stop working on a session a newer one replaced (a late plan must not delay
        the next session's)."""
        if self.session is not session:
            raise _Superseded

    def _stored(self, session: Session, data: Any) -> Scenario:
        """The stored cluster's scenario (own-view mode); its cache is the cluster's."""
        try:
            scenario = scenario_from_data(data, f"stored cluster {self.config.cluster}")
        except InputError as exc:
            raise SnapshotError(422, exc.messages[:20]) from None
        _remember_jobs(session, scenario)
        return scenario

    def cache_event(self, body: dict[str, Any], status: int | None) -> dict[str, Any] | None:
        """The stored cluster's cache event of an allocate (``status`` ``None``) or
        deallocate event (own-view mode); ``None`` when it concerns no cached job."""
        session = self.session
        task = body.get("task")
        if session is None or not isinstance(task, dict):
            return None
        job, rank, _ = task_identity(task)
        owner = session.owners.get(job)
        node = task.get("NodeName")
        if owner is None or rank is None:
            return None
        if status is None:
            if not isinstance(node, str) or not node:
                return None
            return {"event": "bind", "owner-uid": owner, "rank": rank, "node": node}
        kind = "evict" if status == STATUS_RELEASING else "discard"
        return {"event": kind, "owner-uid": owner, "rank": rank}

    def _import(self, session: Session, objects: Iterable[tuple[dict[str, Any], str]]
                ) -> Scenario:
        importer = ClusterImport(Diagnostics())
        for obj, source in self.devices.objects():
            importer.add(obj, source)
        seen_owners: set[str] = set()  # every job's owner in the snapshot, imported or not
        for obj, source in objects:
            if obj.get("kind") in ("PodGroup", "Pod"):
                try:
                    owner = controller_uid(obj.get("metadata") or {})
                except ValueError:
                    owner = None  # the importer reports it
                if owner:
                    seen_owners.add(owner)
            importer.add(obj, f"snapshot {source}")
        with self._lock:
            cache_model = (self.lifecycle.to_model() if self.lifecycle.cache is not None
                           else AffinityCacheModel())
        try:
            result = importer.build(now=session.now,
                                    previous=Scenario.model_construct(affinity_cache=cache_model))
        except InputError as exc:
            raise SnapshotError(422, [f"session snapshot: {m}" for m in exc.messages[:20]]) \
                from None
        scenario = result.scenario
        running: list[RunningPods] = [RunningPods(r.owner_uid, dict(r.ranks))
                                      for r in scenario.running]
        running += [RunningPods(j.owner_uid, dict(j.running_ranks)) for j in scenario.jobs
                    if j.running_ranks]
        owners = [j.owner_uid for j in scenario.jobs if j.owner_uid]
        owners += [r.owner_uid for r in scenario.running if r.owner_uid]
        owners += [v.owner_uid for v in scenario.vnpu_jobs if v.owner_uid]
        nodes = {n.name for n in scenario.nodes}
        with self._lock:
            self.lifecycle.start_session(session.now, owners, running)
            # the RFC's "job deleted: its entries cleared": an owner whose PodGroup and
            # pods are all gone from the snapshot (an evicted job keeps its PodGroup)
            gone = [o for o in (self.lifecycle.cache.owners() if self.lifecycle.cache
                                else []) if o not in seen_owners]
            for owner in gone:
                self.lifecycle.delete_owner(owner)
            session.counts["owners-deleted"] = len(gone)
            for pods in running:  # what the snapshot shows bound, recorded where new
                for rank, node in pods.ranks.items():
                    if pods.owner and self.lifecycle.node(pods.owner, rank) != node:
                        self.lifecycle.allocate(pods.owner, rank, node, session.now)
            model = self.lifecycle.to_model()
        kept = {(e.owner_uid, e.rank) for e in model.entries}
        entries = [e for e in model.entries if e.node in nodes]
        # the importer's own cold-start entries (reschedule records) the lifecycle lacks
        entries += [e for e in scenario.affinity_cache.entries
                    if (e.owner_uid, e.rank) not in kept and e.node in nodes]
        cache = model.model_copy(update={"entries": entries})
        _remember_jobs(session, scenario)
        return scenario.model_copy(update={"affinity_cache": cache})

    def _plan(self, session: Session, scenario: Scenario, deadline: float) -> None:
        from solver.facade import solve

        left = deadline - time.monotonic()
        limit = min(self.config.plan_seconds, left)
        selecting = any(_family(j.policy) in SELECTING_FAMILIES for j in scenario.jobs)
        engine = self.config.engine if limit > 0.05 else "greedy"
        stock = None
        if selecting:  # the plugin's own choice for super-pod / 950 / multilevel jobs
            stock = solve(scenario, engine="greedy", time_limit=max(limit, 0.05))
            if engine == "greedy":
                result = stock
            else:
                limit = min(self.config.plan_seconds, deadline - time.monotonic())
                result = (solve(scenario, engine=engine, time_limit=limit,
                                seed=self.config.seed,
                                deterministic_time=self.config.deterministic_time)
                          if limit > 0.05 else stock)
        else:
            result = solve(scenario, engine=engine, time_limit=max(limit, 0.05),
                           seed=self.config.seed,
                           deterministic_time=self.config.deterministic_time)
        session.engine = result.engine
        planned = _placement_ranks(result.placement)
        stock_ranks = _placement_ranks(stock.placement) if stock is not None else {}
        # The Ascend plugin selects the nodes of a super-pod / 950 / multilevel job itself
        # (the greedy port reproduces it), on the state the earlier jobs leave.  A job of
        # those families is steered when its plan equals that selection and every earlier
        # job ends where greedy put it: such jobs that are not steered get the plugin's
        # own (greedy's) placement, so only a steered job of another family whose plan
        # differs from greedy's moves the later selections away from greedy's.
        consistent = True
        for job in scenario.jobs:
            family = _family(job.policy)
            ranks = planned.get(job.name)
            if ranks is None:
                continue  # abstains: the plugin places it as greedy does
            greedy_nodes = sorted(stock_ranks.get(job.name, {}).values())
            steer, reason = True, ""
            if family in SELECTING_FAMILIES:
                if not consistent:
                    steer, reason = False, ("an earlier steered job leaves other free nodes "
                                            "than the Ascend plugin's selection assumes")
                elif sorted(ranks.values()) != greedy_nodes:
                    steer, reason = False, ("the plan differs from the Ascend plugin's own "
                                            "selection")
            elif stock is not None and sorted(ranks.values()) != greedy_nodes:
                consistent = False
            session.jobs[job.name] = JobPlan(family, job.owner_uid, ranks,
                                             frozenset(ranks.values()), steer, reason)
        for vjob in scenario.vnpu_jobs:
            ranks = planned.get(vjob.name)
            if ranks is not None:
                session.jobs[vjob.name] = JobPlan(Family.ORDINARY, vjob.owner_uid, ranks,
                                                  frozenset(ranks.values()), True,
                                                  replicas=True)
        session.counts["planned-jobs"] = len(session.jobs)
        session.counts["steered-jobs"] = sum(1 for j in session.jobs.values() if j.steer)

    # ------------------------------------------------------------------ per-task verbs
    def _current(self, job: str | None = None) -> Session | None:
        """The open session whose plan is ready, else ``None`` (abstain).  A job asked
        about before the plan was ready abstains for the whole session: its gang is not
        steered half-way."""
        session = self.session
        if session is None or session.closed:
            return None
        if not session.ready.is_set():
            if job:
                with self._lock:
                    session.decided.setdefault(job, False)
            session.count("asked-before-plan")
            return None
        return session

    def _steered(self, session: Session, job: str) -> JobPlan | None:
        """The job's plan when the session steers it (decided once per session)."""
        plan = session.jobs.get(job)
        with self._lock:
            steered = session.decided.get(job)
            if steered is None:
                steered = plan is not None and plan.steer and session.error is None
                session.decided[job] = steered
        return plan if steered else None

    def prioritize_raw(self, raw: bytes) -> bytes:
        """``prioritize`` from the request's bytes, parsing only the task.

        Go's encoder writes ``{"task":<TaskInfo>,"nodes":[<NodeInfo>,...]}`` in this order,
        and every ``NodeInfo`` opens with ``{"Name":<name>,"Node":``; so the task is the
        bytes before ``,"nodes":[`` and a node is a candidate when that opening is in the
        rest.  Any other layout is parsed whole (:meth:`prioritize`).

        Raises
        ------
        orjson.JSONDecodeError
            When the body is not JSON.
        """
        cut = raw.find(b',"nodes":[')
        if not raw.startswith(b'{"task":') or cut < 0:
            data = orjson.loads(raw)
            if not isinstance(data, dict):
                return _ABSTAIN
            return self.prioritize(data)
        try:
            task = orjson.loads(raw[8:cut])
        except orjson.JSONDecodeError:
            return self.prioritize(orjson.loads(raw))
        return self._prioritize(task, lambda name: raw.find(
            b'{"Name":' + orjson.dumps(name) + b',"Node":', cut) >= 0)

    def prioritize(self, body: dict[str, Any]) -> bytes:
        """``prioritize``: the planned node of the task gets :data:`PLANNED_SCORE`."""
        nodes = body.get("nodes")
        offered = {str(n.get("Name")) for n in nodes if isinstance(n, dict)} \
            if isinstance(nodes, list) else set()
        return self._prioritize(body.get("task"), offered.__contains__)

    def _prioritize(self, task: Any, is_offered: Callable[[str], bool]) -> bytes:
        job, rank, uid = task_identity(task)
        session = self._current(job)
        if session is None:
            return _ABSTAIN
        plan = self._steered(session, job)
        with self._lock:
            node = plan.node_for(uid, rank, is_offered) if plan is not None else None
        if node is None:
            session.count("prioritize-abstained")
            return _ABSTAIN
        if not is_offered(node):
            session.count("planned-node-not-offered")
            return _ABSTAIN
        session.count("prioritize-steered")
        return orjson.dumps({"nodeScore": {node: PLANNED_SCORE}, "errorMessage": ""})

    def predicate(self, body: dict[str, Any]) -> bytes:
        """``predicate``: refuse a node outside the job's planned node set (job level)."""
        task = body.get("task")
        job = task.get("Job") if isinstance(task, dict) else None
        session = self._current(job if isinstance(job, str) else None)
        if session is None:
            return _FITS
        node = body.get("node")
        name = node.get("Name") if isinstance(node, dict) else None
        if not isinstance(job, str) or not isinstance(name, str):
            return _FITS
        plan = self._steered(session, job)
        if plan is None or name in plan.nodes:
            return _FITS
        session.count("predicate-refused")
        return orjson.dumps({"status": f"npu-place: node {name} is not in the planned node "
                                       f"set of job {job}", "code": CODE_UNSCHEDULABLE})

    def allocate(self, body: dict[str, Any]) -> bytes:
        """``allocateFunc``: record the allocation (cache ``recorded``/``updated``)."""
        session = self.session
        task = body.get("task")
        if session is None or not isinstance(task, dict):
            return _EVENT_OK
        job, rank, uid = task_identity(task)
        node = task.get("NodeName")
        if not isinstance(node, str) or not node or rank is None:
            return _EVENT_OK
        owner = session.owners.get(job)
        with self._lock:
            session.allocated[uid] = (job, rank, node)
            if owner and self.lifecycle.cache is not None:
                self.lifecycle.allocate(owner, rank, node, session.now)
            plan = session.jobs.get(job)
            if plan is not None and session.decided.get(job):
                wanted = plan.slots.get(uid) if plan.replicas else plan.ranks.get(rank)
                session.count("allocated-as-planned" if wanted == node
                              else "allocated-off-plan")
        return _EVENT_OK

    def deallocate(self, body: dict[str, Any]) -> bytes:
        """``deallocateFunc``: a discard (Pending: undo) or an eviction (Releasing: keep)."""
        session = self.session
        task = body.get("task")
        if session is None or not isinstance(task, dict):
            return _EVENT_OK
        job, rank, uid = task_identity(task)
        if rank is None:
            return _EVENT_OK
        status = TaskStatus.RELEASING if task.get("Status") == STATUS_RELEASING \
            else TaskStatus.PENDING
        owner = session.owners.get(job)
        with self._lock:
            session.allocated.pop(uid, None)
            if owner:
                self.lifecycle.deallocate(owner, rank, status)
            session.count("evicted" if status is TaskStatus.RELEASING else "discarded")
        return _EVENT_OK

    def close_session(self) -> bytes:
        """``onSessionClose``: the session ends; later verbs abstain."""
        with self._lock:
            if self.session is not None and not self.session.closed:
                self._finish(self.session)
        return _EMPTY

    def _finish(self, session: Session) -> None:
        session.closed = True
        summary = {"session": session.number, "engine": session.engine,
                   "error": session.error, "timings": dict(session.timings),
                   "counts": dict(session.counts)}
        self.history = [*self.history[-15:], summary]


# --------------------------------------------------------------------------- HTTP


class PathToken:
    """Pure ASGI middleware: the extender's verbs under ``<prefix>/<token>/<verb>``.

    Volcano's extender sends no credentials of its own; a token in ``urlPrefix`` is the
    one secret it can carry.  A request under the prefix with the right token has it
    removed from the path and is marked authorized (the bearer check lets it pass);
    any other request under the prefix gets 404, so the routes' names are not revealed.
    """

    def __init__(self, app: ASGIApp, prefix: str, token: str) -> None:
        self.app = app
        self.prefix = prefix.rstrip("/") + "/"
        self._token = token.encode()

    def __repr__(self) -> str:
        return "PathToken(token=<hidden>)"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path.startswith(self.prefix):
            given, _, rest = path[len(self.prefix):].partition("/")
            if not rest or not hmac.compare_digest(given.encode(), self._token):
                await send({"type": "http.response.start", "status": 404,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", b"21")]})
                await send({"type": "http.response.body", "body": b'{"error":"not found"}'})
                return
            scope = dict(scope, path=self.prefix + rest,
                         raw_path=(self.prefix + rest).encode())
            scope[PATH_AUTHORIZED] = True
        await self.app(scope, receive, send)


def _json(content: bytes, status: int = 200) -> Response:
    return Response(content, status_code=status, media_type="application/json")


async def _read(request: Request, limit_mb: float, timeout: float) -> bytes:
    """The body, 413 above ``limit_mb`` (before reading when Content-Length says so), 408
    when it has not arrived within ``timeout`` seconds."""
    limit = int(limit_mb * 1024 * 1024)
    refuse_declared_length(request.headers.get("content-length"), limit,
                           f"the extender takes at most {limit} bytes", {"Connection": "close"})
    chunks: list[bytes] = []
    await _stream(request, limit, timeout, chunks)
    return b"".join(chunks)


async def _drain(request: Request, limit_mb: float, timeout: float) -> int:
    """Read the body and drop it (own-view mode): memory of one chunk; 413/408 as
    :func:`_read`.  Returns its size."""
    return await _stream(request, int(limit_mb * 1024 * 1024), timeout, None)


async def _stream(request: Request, limit: int, timeout: float,
                  chunks: list[bytes] | None) -> int:
    """Read the body chunk by chunk (into ``chunks`` when given): its size; 413 past
    ``limit`` bytes, 408 when it has not all arrived within ``timeout`` seconds."""
    size = 0
    try:
        async with asyncio.timeout(max(0.0, timeout)):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise BadRequest(413, "body too large", [
                        f"request body: more than {limit} bytes (the extender's limit)"],
                        {"Connection": "close"})
                if chunks is not None:
                    chunks.append(chunk)
    except TimeoutError:
        raise BadRequest(408, "body too slow", [
            f"request body: {size} bytes had arrived when the verb's time ran out"],
            {"Connection": "close"}) from None
    return size


def extender_router(core: ExtenderCore, pool: Any = None) -> APIRouter:
    """The verbs as routes under ``core.config.prefix``.

    ``pool`` is the service's :class:`~solver.service.pool.WorkerPool`, which holds the
    stored clusters (own-view mode, :attr:`ExtenderConfig.cluster`).
    """
    config = core.config
    router = APIRouter(prefix=config.prefix.rstrip("/"), tags=["volcano extender"])
    forwarding: set[asyncio.Task[Any]] = set()

    async def stored_scenario(deadline: float) -> bytes:
        name = config.cluster
        record = pool.clusters.get(name) if pool is not None else None
        if record is None:
            raise SnapshotError(422, [f"stored cluster '{name}' does not exist (PUT "
                                      f"/v1/clusters/{name} first)"])
        try:
            reply = await pool.call("dump", (name,), home=record.home, deadline=deadline)
        except BadRequest as exc:
            raise SnapshotError(exc.status, exc.messages) from None
        return bytes(reply["scenario"])

    def forward(event: dict[str, Any] | None) -> None:
        """Send a cache event to the stored cluster (in order, without waiting)."""
        name = config.cluster
        record = pool.clusters.get(name) if pool is not None and name else None
        if event is None or record is None:
            return
        body = orjson.dumps({"cache-events": [event]})

        async def send() -> None:
            try:
                await pool.call("patch", (name, body), home=record.home,
                                on_reply=lambda r: pool.record_patch(name, r))
            except BadRequest as exc:
                log.warning("extender: cache event %s not applied: %s", event, exc.messages)

        task = asyncio.ensure_future(send())
        forwarding.add(task)
        task.add_done_callback(forwarding.discard)

    async def small_body(request: Request) -> dict[str, Any]:
        body = await _read(request, config.max_verb_mb, config.http_timeout)
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(400, "malformed JSON", [f"request body: not JSON: {exc}"]) \
                from None
        if not isinstance(data, dict):
            raise BadRequest(422, "invalid request", ["request body: expected an object"])
        return data

    @router.post("/onSessionOpen", summary="Volcano session open: snapshot in, plan made")
    async def on_session_open(request: Request) -> Response:
        received = request.scope.get("state", {}).get("received", time.monotonic())
        answer_by = received + config.answer_seconds
        session = core.begin()
        try:
            if config.cluster is None:
                body = await _read(request, config.max_snapshot_mb,
                                   answer_by - time.monotonic())
            else:  # the service's own view: Volcano's snapshot is not parsed
                session.counts["snapshot-bytes-dropped"] = await _drain(
                    request, config.max_snapshot_mb, answer_by - time.monotonic())
                body = await stored_scenario(answer_by)
        except BadRequest as exc:
            session.error = exc.error
            session.ready.set()
            raise
        except SnapshotError as exc:
            session.error = "; ".join(exc.messages[:3])
            session.ready.set()
            raise BadRequest(exc.status, "no stored cluster", exc.messages) from None
        future: Future[Session] = core.executor.submit(core.open_session, session, body,
                                                        answer_by - 0.02)
        del body
        future.add_done_callback(lambda f: f.exception())  # a late refusal is only logged
        wrapped = asyncio.wrap_future(future)
        try:
            await asyncio.wait_for(asyncio.shield(wrapped),
                                   max(0.0, answer_by - time.monotonic()))
        except TimeoutError:
            session.count("answered-before-plan")
            return _json(_EMPTY)  # the plan is late: this session abstains until it is ready
        except SnapshotError as exc:
            raise BadRequest(exc.status, "snapshot refused", exc.messages) from None
        finally:
            session.timings["answered"] = time.monotonic() - received
        return _json(_EMPTY)

    @router.post("/onSessionClose", summary="Volcano session close")
    async def on_session_close(request: Request) -> Response:
        await _read(request, config.max_verb_mb, config.http_timeout)
        return _json(core.close_session())

    def guarded(verb: str, answer: Callable[[], bytes], abstain: bytes) -> Response:
        """The verb's answer; a failure of the service's own code abstains (logged)."""
        try:
            return _json(answer())
        except (BadRequest, orjson.JSONDecodeError):
            raise
        except Exception:
            log.exception("extender %s failed: abstaining", verb)
            return _json(abstain)

    @router.post("/prioritize", summary="Scores: the planned node wins")
    async def prioritize(request: Request) -> Response:
        raw = await _read(request, config.max_verb_mb, config.http_timeout)
        try:
            return guarded("prioritize", lambda: core.prioritize_raw(raw), _ABSTAIN)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(400, "malformed JSON", [f"request body: not JSON: {exc}"]) \
                from None

    @router.post("/predicate", summary="Job-level filter: nodes outside the planned set")
    async def predicate(request: Request) -> Response:
        body = await small_body(request)
        return guarded("predicate", lambda: core.predicate(body), _FITS)

    @router.post("/allocateFunc", summary="Volcano allocated a task")
    async def allocate(request: Request) -> Response:
        body = await small_body(request)
        if config.cluster is not None:
            forward(core.cache_event(body, None))
        return guarded("allocateFunc", lambda: core.allocate(body), _EVENT_OK)

    @router.post("/deallocateFunc", summary="Volcano discarded or evicted a task")
    async def deallocate(request: Request) -> Response:
        body = await small_body(request)
        if config.cluster is not None:
            task = body.get("task")
            forward(core.cache_event(body, task.get("Status") if isinstance(task, dict)
                                     else None) if isinstance(task, dict) else None)
        return guarded("deallocateFunc", lambda: core.deallocate(body), _EVENT_OK)

    @router.get("/sessions", summary="The last sessions: timings, counts, errors")
    async def sessions() -> Response:
        return _json(orjson.dumps(core.history))

    return router


__all__ = ["PLANNED_SCORE", "VERBS", "DeviceSource", "ExtenderConfig", "ExtenderCore",
           "PathToken", "SnapshotError", "extender_router", "snapshot_objects",
           "task_identity"]
