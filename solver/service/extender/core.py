"""The extender's sessions and verbs, independent of HTTP.

:class:`ExtenderCore` opens a session (the snapshot imported with the device state and
the cache lifecycle, or the stored cluster's scenario in own-view mode), plans it, and
answers ``prioritize``, ``predicate``, ``allocateFunc``, ``deallocateFunc`` and
``onSessionClose`` from the plan (:class:`JobPlan` per job, one :class:`Session` at a
time).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import orjson

from heuristics.lifecycle import CacheLifecycle, RunningPods, TaskStatus
from models.io import scenario_from_data
from models.joblist import job_count
from models.kube.build import ClusterImport
from models.kube.jobs import controller_uid
from models.kube.source import Diagnostics
from models.scenario import AffinityCacheModel, Family, Policy, Scenario, family_of
from models.validation import InputError
from solver.service.extender.config import ExtenderConfig
from solver.service.extender.devices import DeviceSource
from solver.service.extender.fastpath import go_layout
from solver.service.extender.protocol import (
    ABSTAIN,
    CODE_UNSCHEDULABLE,
    EMPTY,
    EVENT_OK,
    FITS,
    PLANNED_SCORE,
    STATUS_RELEASING,
    SnapshotError,
    check_values,
    gc_paused,
    parse_snapshot,
    snapshot_objects,
    task_identity,
)

log = logging.getLogger("npu_place.extender")

#: Families the Ascend plugin selects nodes for itself (1e10 scores, ``super-pod-rank``).
SELECTING_FAMILIES = frozenset({Family.SUPERPOD, Family.RACK, Family.MULTILEVEL})


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
    #: jobs the snapshot's import refused (job id -> reason): Volcano places them
    left_to_volcano: dict[str, str] = field(default_factory=dict)

    def count(self, key: str) -> None:
        """Add one to a counter of the session."""
        self.counts[key] = self.counts.get(key, 0) + 1


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
        self._devices_read: tuple[tuple[int, ...], list[Any], ClusterImport] | None = None

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
            with gc_paused():  # millions of new objects: no collection can free any of them
                check_values(body, self.config.max_values, "onSessionOpen body")
                try:
                    data = parse_snapshot(body)  # in pieces: the loop answers meanwhile
                except orjson.JSONDecodeError as exc:
                    raise SnapshotError(400, [f"onSessionOpen body: not JSON: {exc}"]) \
                        from None
                del body
                self._check_current(session)
                t1, c1 = time.perf_counter(), time.thread_time()
                if self.config.cluster is not None:  # a stored cluster's scenario
                    scenario = self._stored(session, data)
                else:
                    objects = snapshot_objects(data, self.config.max_nodes,
                                               self.config.max_tasks)
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
            # the session's parse and import left cycles the paused collector did not
            # free; left for later they hold their memory into the next session's parse
            # (which then cost 0.89-1.44 s of CPU instead of 0.20-0.33 s at 1,024 real-size
            # nodes): collected now, after the plan is ready
            gc.collect()
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
        # a refused object takes out only its own job (left to Volcano, named in /sessions)
        importer = ClusterImport(Diagnostics(), strict=False, job_images_only=True)
        importer.take_devices(self._device_records())
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
        session.left_to_volcano.update(result.refused)
        session.counts["jobs-refused"] = len(result.refused)
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

    def _device_records(self) -> ClusterImport:
        """The device source's objects as read by the importer, read again only when the
        source's objects change (the same objects: the same records)."""
        objects = self.devices.objects()
        key = tuple(id(obj) for obj, _ in objects)
        cached = self._devices_read
        if cached is None or cached[0] != key:
            reader = ClusterImport(Diagnostics(), strict=False)
            for obj, source in objects:
                reader.add(obj, source)
            # the objects are kept with their ids, so an id cannot be reused meanwhile
            cached = self._devices_read = (key, objects, reader)
        return cached[2]

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
        """``prioritize`` from the request's bytes.

        In Go's layout (``{"task":<TaskInfo>,"nodes":[<NodeInfo>,...]}``) only the task is
        built and the candidates' names are read by a validating parser that builds no
        objects (:func:`~solver.service.extender.fastpath.go_layout`), when that is
        provably what a full parse gives; any other body is parsed whole
        (:meth:`prioritize`), within :attr:`ExtenderConfig.max_verb_values`.

        Raises
        ------
        orjson.JSONDecodeError
            When the body is not JSON.
        SnapshotError
            413 when the body (or the task, in Go's layout) holds too many values.
        """
        fast = go_layout(raw, self.config.max_verb_values)
        if fast is not None:
            task, names = fast
            return self._prioritize(task, names.__contains__)
        check_values(raw, self.config.max_verb_values, "prioritize body")
        with gc_paused():
            data = orjson.loads(raw)
        if not isinstance(data, dict):
            return ABSTAIN
        return self.prioritize(data)

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
            return ABSTAIN
        plan = self._steered(session, job)
        with self._lock:
            node = plan.node_for(uid, rank, is_offered) if plan is not None else None
        if node is None:
            session.count("prioritize-abstained")
            return ABSTAIN
        if not is_offered(node):
            session.count("planned-node-not-offered")
            return ABSTAIN
        session.count("prioritize-steered")
        return orjson.dumps({"nodeScore": {node: PLANNED_SCORE}, "errorMessage": ""})

    def predicate(self, body: dict[str, Any]) -> bytes:
        """``predicate``: refuse a node outside the job's planned node set (job level)."""
        task = body.get("task")
        job = task.get("Job") if isinstance(task, dict) else None
        session = self._current(job if isinstance(job, str) else None)
        if session is None:
            return FITS
        node = body.get("node")
        name = node.get("Name") if isinstance(node, dict) else None
        if not isinstance(job, str) or not isinstance(name, str):
            return FITS
        plan = self._steered(session, job)
        if plan is None or name in plan.nodes:
            return FITS
        session.count("predicate-refused")
        return orjson.dumps({"status": f"npu-place: node {name} is not in the planned node "
                                       f"set of job {job}", "code": CODE_UNSCHEDULABLE})

    def allocate(self, body: dict[str, Any]) -> bytes:
        """``allocateFunc``: record the allocation (cache ``recorded``/``updated``)."""
        session = self.session
        task = body.get("task")
        if session is None or not isinstance(task, dict):
            return EVENT_OK
        job, rank, uid = task_identity(task)
        node = task.get("NodeName")
        if not isinstance(node, str) or not node or rank is None:
            return EVENT_OK
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
        return EVENT_OK

    def deallocate(self, body: dict[str, Any]) -> bytes:
        """``deallocateFunc``: a discard (Pending: undo) or an eviction (Releasing: keep)."""
        session = self.session
        task = body.get("task")
        if session is None or not isinstance(task, dict):
            return EVENT_OK
        job, rank, uid = task_identity(task)
        if rank is None:
            return EVENT_OK
        status = TaskStatus.RELEASING if task.get("Status") == STATUS_RELEASING \
            else TaskStatus.PENDING
        owner = session.owners.get(job)
        with self._lock:
            session.allocated.pop(uid, None)
            if owner:
                self.lifecycle.deallocate(owner, rank, status)
            session.count("evicted" if status is TaskStatus.RELEASING else "discarded")
        return EVENT_OK

    def close_session(self) -> bytes:
        """``onSessionClose``: the session ends; later verbs abstain."""
        with self._lock:
            if self.session is not None and not self.session.closed:
                self._finish(self.session)
        return EMPTY

    def _finish(self, session: Session) -> None:
        session.closed = True
        summary = {"session": session.number, "engine": session.engine,
                   "error": session.error, "timings": dict(session.timings),
                   "counts": dict(session.counts),
                   "left-to-volcano": dict(session.left_to_volcano)}
        self.history = [*self.history[-15:], summary]
