"""The extender's sessions and verbs, independent of HTTP.

:class:`ExtenderCore` opens a session (the snapshot imported with the device state and
the cache lifecycle, or the stored cluster's scenario in own-view mode), plans it, and
answers ``prioritize``, ``predicate``, ``allocateFunc``, ``deallocateFunc`` and
``onSessionClose`` from the plan (:class:`JobPlan` per job, one :class:`Session` at a
time).

Why this file is long: the session open, its plan and the per-task verbs read and write
one session state under one lock (which jobs are decided, which task holds which rank,
the cache); what needs none of it lives beside it (``answer``, ``confine``, ``events``,
``session``, ``steering``).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

from heuristics.lifecycle import CacheLifecycle, RunningPods, TaskStatus
from models.documents import paused_gc
from models.io import scenario_from_data
from models.kube.build import ClusterImport
from models.kube.jobs import controller_uid
from models.kube.source import Diagnostics
from models.limits import escape_text
from models.scenario import (
    AffinityCacheModel,
    Family,
    Job,
    LevelConfig,
    Node,
    Scenario,
)
from models.validation import InputError
from solver.service.extender.answer import AnswerGate, VerbTicket, free_parsed, open_gate
from solver.service.extender.config import ExtenderConfig
from solver.service.extender.confine import confine_plan
from solver.service.extender.devices import DeviceSource
from solver.service.extender.events import (
    EventRefused,
    describe_event,
    invalid_entry,
    own_view_event,
    read_event,
)
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
    parse_snapshot,
    snapshot_objects,
    task_identity,
)
from solver.service.extender.session import (
    SELECTING_FAMILIES,
    SUPERSEDED,
    JobPlan,
    Session,
    pending_tasks_of,
    placement_ranks,
    plan_greedy_equal,
    policy_family,
    rank_conflict,
    remember_jobs,
    task_key,
)

log = logging.getLogger("npu_place.extender")

#: Dropped events and cache entries logged one by one per session (the rest are counted).
MAX_DROPS_LOGGED = 20
#: Jobs named with their reason in a session's summary (``/sessions``) at most.
MAX_UNSTEERED_SHOWN = 50

class _Superseded(Exception):
    """A newer session opened while this one was being read or imported."""



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
        #: called with (verb, field) for every event dropped for a value outside the
        #: bounds (the service counts them in its metrics)
        self.on_event_dropped: Callable[[str, str], None] = lambda verb, field: None
        #: owner uid -> rank -> node where the job's ranks were last allocated: the Ascend
        #: plugin's cached selection (``job.SuperPods``) of a super-pod / 950 / multilevel job
        self.selections: dict[str, dict[int, str]] = {}
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
                self._finish(self.session, replaced=True)
            self.sessions += 1
            self.session = Session(self.sessions, time.monotonic(), int(self.clock()))
            return self.session

    def open_session(self, session: Session, body: bytes | Sequence[bytes], deadline: float,
                     gate: AnswerGate | None = None) -> Session:
        """Read the snapshot, build the scenario, refresh the cache, plan (in a thread).

        ``body`` is the snapshot's bytes, or its chunks as they arrived (joined here, off
        the event loop).  ``deadline`` (``time.monotonic``) bounds the plan: its time limit
        is what is left before it, at most :attr:`ExtenderConfig.plan_seconds`.  ``gate``
        is the ``onSessionOpen`` answer's (:class:`~solver.service.extender.answer.
        AnswerGate`): between the GIL-holding stretches of reading, parsing, importing and
        (after the plan) freeing the parsed snapshot, the thread makes way for this answer
        and for every other pending answer of the process when it is due; ``None``: nobody
        waits for this session's answer.

        Raises
        ------
        SnapshotError
            A malformed or unknown-shaped snapshot (400/422); the session then abstains.
        """
        gate = gate or open_gate()
        between = gate.make_way
        started = time.thread_time()
        t0 = time.perf_counter()
        kept: list[Any] = []  # the parsed snapshot, freed in slices once the plan is made
        try:
            with paused_gc():  # millions of new objects: no collection can free any of them
                if not isinstance(body, bytes):
                    between()
                    body = b"".join(body)
                check_values(body, self.config.max_values, "onSessionOpen body", between)
                try:
                    data = parse_snapshot(body, between)  # in pieces: the loop answers
                except orjson.JSONDecodeError as exc:
                    raise SnapshotError(400, [f"onSessionOpen body: not JSON: {exc}"]) \
                        from None
                del body
                self._check_current(session)
                t1, c1 = time.perf_counter(), time.thread_time()
                if self.config.cluster is not None:  # a stored cluster's scenario
                    between()
                    scenario = self._stored(session, data)
                else:
                    objects = snapshot_objects(data, self.config.max_nodes,
                                               self.config.max_tasks, between)
                    scenario = self._import(session, objects, between)
                    del objects
                kept.append(data)
                del data
                # kept until the plan is made, frozen: the first collection after the pause
                # would scan its millions of objects holding the GIL (0.26-0.32 s at 1,024
                # real-size nodes), and one ``del`` of it holds the GIL for 80-110 ms
                gc.freeze()
            t2, c2 = time.perf_counter(), time.thread_time()
            session.timings.update(parse=t1 - t0, import_=t2 - t1, parse_cpu=c1 - started,
                                   import_cpu=c2 - c1)
            self._check_current(session)
            between()
            self._plan(session, scenario, deadline)
            self._gate_ranks(session)
            session.timings["plan"] = time.perf_counter() - t2
            session.timings["plan_cpu"] = time.thread_time() - c2
        except SnapshotError as exc:
            session.error = "; ".join(exc.messages[:3])
            raise
        except _Superseded:
            session.error = SUPERSEDED
        except Exception as exc:  # every failure leaves Volcano's stock behaviour
            log.exception("extender session %d: planning failed", session.number)
            session.error = f"{type(exc).__name__}: {exc}"
        finally:
            session.ready.set()
            if kept:  # one node's or job's tree at a time, making way for every answer
                freed = time.perf_counter()
                free_parsed(kept)
                session.timings["free"] = time.perf_counter() - freed
            session.timings["cpu"] = time.thread_time() - started  # this thread's CPU
            if gate.waits:
                session.counts["made-way-for-answer"] = gate.waits
        return session

    def _cache_model(self, session: Session) -> AffinityCacheModel:
        """The cache as a scenario section (under the lock).  An entry outside the
        section's bounds (which no event may store, :mod:`~solver.service.extender.
        events`) is dropped with a log line instead of failing the session."""
        try:
            return self.lifecycle.to_model()
        except ValueError:  # pydantic's ValidationError: an entry outside the bounds
            dropped = self.lifecycle.drop_entries(invalid_entry)
            session.counts["cache-entries-dropped"] = len(dropped)
            for owner, rank, why in dropped[:MAX_DROPS_LOGGED]:
                log.warning("extender session %d: cache entry of owner %s rank %d dropped: "
                            "%s", session.number, escape_text(owner, 80), rank, why)
            return self.lifecycle.to_model()

    def _gate_ranks(self, session: Session) -> None:
        """Leave a job to Volcano unless its pending tasks carry distinct ranks of the
        plan: the score goes to a rank's planned node, so two tasks of one rank (Volcano
        numbers each task role from 0) would both be sent there."""
        if session.pending_tasks is None:
            return  # own-view mode: the one-task-per-rank check of prioritize holds
        for job, plan in session.jobs.items():
            if plan.replicas or not plan.steer:
                continue
            reason = rank_conflict(plan, session.pending_tasks.get(job, []))
            if reason:
                plan.steer, plan.reason = False, reason
                session.count("jobs-rank-conflict")
        session.counts["steered-jobs"] = sum(1 for j in session.jobs.values() if j.steer)

    def _drop_event(self, session: Session | None, verb: str, exc: EventRefused,
                    body: Any) -> None:
        """Count and log (the first ones of a session) an event outside the bounds."""
        self.on_event_dropped(verb, exc.field)
        if session is None:
            log.warning("extender %s dropped: %s (%s)", verb, exc, describe_event(body))
            return
        session.count("events-dropped")
        with self._lock:
            session.drops_logged += 1
            shown = session.drops_logged <= MAX_DROPS_LOGGED
        if shown:
            log.warning("extender session %d: %s dropped: %s (%s)", session.number, verb,
                        escape_text(str(exc), 300), describe_event(body))

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
        remember_jobs(session, scenario)
        return scenario

    def cache_event(self, body: dict[str, Any], status: int | None) -> dict[str, Any] | None:
        """The stored cluster's cache event of an allocate (``status`` ``None``) or
        deallocate event (own-view mode): :func:`~solver.service.extender.events.
        own_view_event` with the session's owners."""
        session = self.session
        return own_view_event(session.owners, body, status) if session is not None else None

    def _import(self, session: Session, objects: Iterable[tuple[dict[str, Any], str]],
                between: Callable[[], None] = lambda: None) -> Scenario:
        # a refused object takes out only its own job (left to Volcano, named in /sessions)
        importer = ClusterImport(Diagnostics(), strict=False, job_images_only=True)
        importer.take_devices(self._device_records())
        seen_owners: set[str] = set()  # every job's owner in the snapshot, imported or not
        for obj, source in objects:
            between()
            if obj.get("kind") in ("PodGroup", "Pod"):
                try:
                    owner = controller_uid(obj.get("metadata") or {})
                except ValueError:
                    owner = None  # the importer reports it
                if owner:
                    seen_owners.add(owner)
            importer.add(obj, f"snapshot {source}")
        with self._lock:
            cache_model = (self._cache_model(session) if self.lifecycle.cache is not None
                           else AffinityCacheModel())
        between()  # the scenario's validation holds the GIL for tens of ms
        try:
            result = importer.build(now=session.now,
                                    previous=Scenario.model_construct(affinity_cache=cache_model))
        except InputError as exc:
            raise SnapshotError(422, [f"session snapshot: {m}" for m in exc.messages[:20]]) \
                from None
        scenario = result.scenario
        session.pending_tasks = pending_tasks_of(importer)
        session.fault_scheduling = {job: pg.labels["fault-scheduling"]
                                    for job, pg in importer.podgroups.items()
                                    if "fault-scheduling" in pg.labels}
        session.left_to_volcano.update(result.refused)
        session.counts["jobs-refused"] = len(result.refused)
        session.nodes_changed = result.nodes_changed
        session.counts["nodes-changed"] = len(result.nodes_changed)
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
                self.selections.pop(owner, None)
            for pods in running:  # running pods show where the plugin's pins put them
                if pods.owner:  # (the only source before Volcano v1.13's allocateFunc)
                    self.selections.setdefault(pods.owner, {}).update(pods.ranks)
            session.counts["owners-deleted"] = len(gone)
            for pods in running:  # what the snapshot shows bound, recorded where new
                for rank, node in pods.ranks.items():
                    if pods.owner and self.lifecycle.node(pods.owner, rank) != node:
                        self.lifecycle.allocate(pods.owner, rank, node, session.now)
            model = self._cache_model(session)
        kept = {(e.owner_uid, e.rank) for e in model.entries}
        entries = [e for e in model.entries if e.node in nodes]
        # the importer's own cold-start entries (reschedule records) the lifecycle lacks
        entries += [e for e in scenario.affinity_cache.entries
                    if (e.owner_uid, e.rank) not in kept and e.node in nodes]
        cache = model.model_copy(update={"entries": entries})
        remember_jobs(session, scenario)
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
        selecting = any(policy_family(j.policy) in SELECTING_FAMILIES for j in scenario.jobs)
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
        planned = placement_ranks(result.placement)
        stock_ranks = placement_ranks(stock.placement) if stock is not None else {}
        if self.config.predicate_verb:
            self._plan_confined(session, scenario, planned, stock_ranks)
        else:
            plan_greedy_equal(session, scenario, planned, stock_ranks, stock is not None)
        for vjob in scenario.vnpu_jobs:
            ranks = planned.get(vjob.name)
            if ranks is not None:
                session.jobs[vjob.name] = JobPlan(Family.ORDINARY, vjob.owner_uid, ranks,
                                                  frozenset(ranks.values()), True,
                                                  replicas=True)
        session.counts["planned-jobs"] = len(session.jobs)
        session.counts["steered-jobs"] = sum(1 for j in session.jobs.values() if j.steer)

    def _plan_confined(self, session: Session, scenario: Scenario,
                       planned: dict[str, dict[int, str]],
                       stock_ranks: dict[str, dict[int, str]]) -> None:
        """Which jobs to steer with the job-level predicate (``predicateVerb`` set).

        The predicate confines the candidates of every task of a steered job to its
        planned nodes, so the Ascend plugin selects a super-pod / 950 / multilevel job
        inside that set (:func:`plugin_pins`).  Such a job is steered when the plugin's
        ranks inside the set equal the plan's; when they differ it is steered on the
        plugin's mapping (adopted) if that keeps every origin hit of the plan; when the
        plugin selects afresh (its rank order inside a physical super pod is Go's map
        order) it is confined only (``mode`` ``confine``: the plugin orders the ranks, its
        ``super-pod-rank`` follows its own selection) if the plan has no origin hit to
        keep and every rank is pending; otherwise it is left to the plugin with the
        reason.  A job whose planned nodes an earlier job left to the plugin may take
        (the greedy port's placement of it) is left to the plugin too.
        """
        origins = {(e.owner_uid, e.rank): e.node for e in scenario.affinity_cache.entries}
        prefer = scenario.config.prefer_previous_node
        claimed: dict[str, str] = {}  # node -> job left to the plugin that may take it
        nodes = {node.name: node for node in scenario.nodes}
        for job in scenario.jobs:
            family = policy_family(job.policy)
            ranks = planned.get(job.name)
            if ranks is None:
                for node in stock_ranks.get(job.name, {}).values():
                    claimed.setdefault(node, job.name)
                continue
            plan = JobPlan(family, job.owner_uid, ranks, frozenset(ranks.values()), True)
            taken = sorted(n for n in plan.nodes if n in claimed)
            if family in SELECTING_FAMILIES and taken:
                plan.steer, plan.reason = False, (
                    f"job {claimed[taken[0]]}, left to the Ascend plugin earlier in the "
                    f"session, may take planned node {taken[0]}")
            elif family in SELECTING_FAMILIES:
                self._confine(plan, job, origins, prefer, nodes,
                              session.fault_scheduling.get(job.name),
                              scenario.config.resource_level_config)
            session.jobs[job.name] = plan
            if not plan.steer:
                for node in stock_ranks.get(job.name, {}).values():
                    claimed.setdefault(node, job.name)

    def _confine(self, plan: JobPlan, job: Job, origins: dict[tuple[str, int], str],
                 prefer: bool, nodes: dict[str, Node] | None = None,
                 fault_scheduling: str | None = None,
                 levels: dict[str, dict[str, LevelConfig]] | None = None) -> None:
        """Steer a super-pod / 950 / multilevel job inside its planned set, adopt the
        plugin's mapping, or leave it to the plugin (:func:`confine_plan`, with the
        plugin's cached selection of the job's owner)."""
        with self._lock:
            cached = self.selections.get(job.owner_uid or "")
            cached = dict(cached) if cached is not None else None
        confine_plan(plan, job, origins, prefer, cached, nodes, fault_scheduling, levels)

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

    def _hold_rank(self, session: Session, job: str, plan: JobPlan, rank: int | None,
                   who: str, node: str) -> str | None:
        """``node`` when the task ``who`` may take rank ``rank``'s planned node: the first
        task asked about a rank holds it for the session.  A second task of the same rank
        (a snapshot the session open could not check, own-view mode) leaves the whole job
        to Volcano from then on (under the lock)."""
        if rank is None or not who:
            return None
        holder = session.rank_holders.setdefault((job, rank), who)
        if holder == who:
            return node
        session.decided[job] = False
        plan.steer = False
        plan.reason = (f"tasks {holder} and {who} both carry rank {rank}: the job was left "
                       "to Volcano from then on")
        session.count("jobs-rank-conflict")
        return None

    def prioritize_raw(self, raw: bytes, ticket: VerbTicket | None = None) -> bytes:
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
            return self._prioritize(task, names.__contains__, ticket)
        check_values(raw, self.config.max_verb_values, "prioritize body")
        with paused_gc():
            data = orjson.loads(raw)
        if not isinstance(data, dict):
            return ABSTAIN
        return self.prioritize(data, ticket)

    def prioritize(self, body: dict[str, Any], ticket: VerbTicket | None = None) -> bytes:
        """``prioritize``: the planned node of the task gets :data:`PLANNED_SCORE`
        (``ticket``: the call's, :meth:`late_answer`)."""
        nodes = body.get("nodes")
        offered = {str(n.get("Name")) for n in nodes if isinstance(n, dict)} \
            if isinstance(nodes, list) else set()
        return self._prioritize(body.get("task"), offered.__contains__, ticket)

    def late_answer(self, verb: str, ticket: VerbTicket) -> None:
        """The answer of a ``prioritize`` or ``predicate`` call went out neutral because it
        was late: its job (when the call had got that far) is left to Volcano for the rest
        of the session, and a score or refusal computed after that is not given."""
        session = self.session
        with self._lock:
            ticket.late = True
            if session is not None:
                session.count(f"{verb}-late")
                if ticket.job is not None:
                    self._leave(session, ticket.job, verb)

    def _too_late(self, session: Session, job: str, ticket: VerbTicket | None,
                  verb: str) -> bool:
        """(Under the lock) whether the call's neutral answer went out already (then the
        job is left to Volcano); otherwise the call now concerns ``job``."""
        if ticket is not None and ticket.late:
            self._leave(session, job, verb)
            return True
        if ticket is not None:
            ticket.job = job
        return False

    def _leave(self, session: Session, job: str, verb: str) -> None:
        """Leave ``job`` to Volcano for the rest of the session (under the lock)."""
        session.decided[job] = False
        plan = session.jobs.get(job)
        if plan is not None and plan.steer:
            plan.steer, plan.reason = False, (f"a {verb} answer was late (sent neutral): the "
                                              "job was left to Volcano from then on")

    def _prioritize(self, task: Any, is_offered: Callable[[str], bool],
                    ticket: VerbTicket | None = None) -> bytes:
        job, rank, uid = task_identity(task)
        session = self._current(job)
        if session is None:
            return ABSTAIN
        plan = self._steered(session, job)
        if plan is not None and (plan.mode == "confine" or rank in plan.loose):
            session.count("prioritize-left-to-plugin")  # the predicate confines the plugin
            return ABSTAIN
        who = task_key(task, uid)  # a replica without a UID must not share another's slot
        with self._lock:
            if plan is not None and self._too_late(session, job, ticket, "prioritize"):
                return ABSTAIN
            node = plan.node_for(who, rank, is_offered) if plan is not None and who else None
            if node is not None and plan is not None and not plan.replicas:
                node = self._hold_rank(session, job, plan, rank, who, node)
        if node is None:
            session.count("prioritize-abstained")
            return ABSTAIN
        if not is_offered(node):
            session.count("planned-node-not-offered")
            return ABSTAIN
        session.count("prioritize-steered")
        return orjson.dumps({"nodeScore": {node: PLANNED_SCORE}, "errorMessage": ""})

    def predicate(self, body: dict[str, Any], ticket: VerbTicket | None = None) -> bytes:
        """``predicate``: refuse a node outside the job's planned node set (job level;
        ``ticket``: the call's, :meth:`late_answer`)."""
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
        with self._lock:
            if plan is not None and self._too_late(session, job, ticket, "predicate"):
                return FITS
        if plan is None or name in plan.nodes:
            return FITS
        session.count("predicate-refused")
        return orjson.dumps({"status": f"npu-place: node {name} is not in the planned node "
                                       f"set of job {job}", "code": CODE_UNSCHEDULABLE})

    def allocate(self, body: dict[str, Any]) -> bytes:
        """``allocateFunc``: record the allocation (cache ``recorded``/``updated``)."""
        session = self.session
        try:
            event = read_event(body, allocate=True)
        except EventRefused as exc:
            self._drop_event(session, "allocateFunc", exc, body)
            return EVENT_OK
        if session is None:
            return EVENT_OK
        job, rank, uid, node = event.job, event.rank, event.uid, event.node
        if node is None or rank is None:
            return EVENT_OK
        owner = session.owners.get(job)
        with self._lock:
            if uid in session.allocated or len(session.allocated) < self.config.max_tasks:
                session.allocated[uid] = (job, rank, node)
            if owner and self.lifecycle.cache is not None:
                self.lifecycle.allocate(owner, rank, node, session.now)
            if owner:  # where the Ascend plugin's pins put the rank: its job.SuperPods
                self.selections.setdefault(owner, {})[rank] = node
            plan = session.jobs.get(job)
            if plan is not None and session.decided.get(job):
                if plan.mode == "confine" or rank in plan.loose:
                    session.count("allocated-in-planned-set" if node in plan.nodes
                                  else "allocated-off-plan")
                else:
                    wanted = (plan.slots.get(task_key(body["task"], uid)) if plan.replicas
                              else plan.ranks.get(rank))
                    session.count("allocated-as-planned" if wanted == node
                                  else "allocated-off-plan")
        return EVENT_OK

    def deallocate(self, body: dict[str, Any]) -> bytes:
        """``deallocateFunc``: a discard (Pending: undo) or an eviction (Releasing: keep)."""
        session = self.session
        try:
            event = read_event(body, allocate=False)
        except EventRefused as exc:
            self._drop_event(session, "deallocateFunc", exc, body)
            return EVENT_OK
        if session is None:
            return EVENT_OK
        job, rank, uid = event.job, event.rank, event.uid
        if rank is None:
            return EVENT_OK
        status = TaskStatus.RELEASING if event.status == STATUS_RELEASING \
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

    def _finish(self, session: Session, replaced: bool = False) -> None:
        """Close ``session`` and list it in :attr:`history` with its state: ``closed``
        (``onSessionClose``), ``replaced`` (a newer session opened after its plan was
        ready) or ``superseded`` (a newer one opened before it was planned: its reason is
        its error, and its counts are what it had counted)."""
        session.closed = True
        state = "closed"
        if replaced:
            state = "replaced" if session.ready.is_set() else "superseded"
            if state == "superseded" and session.error is None:
                session.error = SUPERSEDED
        summary = {"session": session.number, "state": state, "engine": session.engine,
                   "error": session.error, "timings": dict(session.timings),
                   "counts": dict(session.counts),
                   "steered": sorted(job for job, yes in session.decided.items() if yes),
                   "plugin-orders-ranks": sorted(name for name, plan in session.jobs.items()
                                                 if plan.steer and (plan.adopted
                                                                    or plan.loose))}
        unsteered = {job: plan.reason for job, plan in session.jobs.items()
                     if not plan.steer}
        unsteered.update(session.left_to_volcano)  # refused by the import: never planned
        # every planned job left to the plugin (Volcano's stock behaviour), and why
        summary["left-to-plugin"] = dict(sorted(unsteered.items())[:MAX_UNSTEERED_SHOWN])
        # nodes a node-level rule left out or moved out of their super pod, and why
        summary["nodes-changed"] = dict(sorted(session.nodes_changed.items())[
            :MAX_UNSTEERED_SHOWN])
        self.history = [*self.history[-15:], summary]
