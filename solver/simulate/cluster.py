"""The simulated cluster: nodes, jobs and their running ranks, the cache lifecycle, and
what each event does to them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from heuristics.lifecycle import CacheLifecycle
from heuristics.podlevel import deleted_ranks
from models.cache import AffinityCache
from models.compiled import expired_owners, scenario_now
from models.families import family_rules
from models.limits import MAX_TIMESTAMP, listing
from models.scenario import (
    AffinityCacheModel,
    CacheEntry,
    Family,
    Health,
    Job,
    Node,
    RunningJob,
    Scenario,
    VnpuJob,
)
from models.validation import InputError, check_running, derive_shape, running_spec
from solver.simulate.events import (
    AdvanceEvent,
    DeleteJobEvent,
    EventBase,
    EvictEvent,
    NodeEvent,
    RestartEvent,
    ScaleEvent,
    SubmitEvent,
    SubmitVnpuEvent,
)
from solver.simulate.report import duration_text, span_text
from solver.simulate.vnpu import RunningSlice, SimVnpuJob, node_with_slices


@dataclass
class SimJob:
    """A job of the simulated cluster: its spec, desired size and running ranks."""

    spec: Job  # the template (its ``tasks`` is not used; ``desired`` is the size)
    desired: int
    placed: dict[int, str]
    fault: set[int]
    # Sessions a pod-level repair has stayed pending (upstream ``PendingSessionNum``).
    pending_sessions: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def owner(self) -> str | None:
        return self.spec.owner_uid or None

    def pending_ranks(self) -> list[int]:
        return [r for r in range(self.desired) if r not in self.placed]

    @property
    def pod_level(self) -> bool:
        """Upstream's pod-level switches (``pod-rescheduling`` / ``process-recover``)."""
        return self.spec.pod_rescheduling or self.spec.process_recover


def job_with(spec: Job, **changes: Any) -> Job:
    data = spec.model_dump(by_alias=True, exclude_none=True)
    data.update(changes)
    return Job.model_validate(data)


class SimulatedCluster:
    """The mutable cluster a simulation works on."""

    def __init__(self, scenario: Scenario, scenario_source: str, events_source: str) -> None:
        self.base = scenario
        self.scenario_source = scenario_source
        self.events_source = events_source
        self.now = scenario_now(scenario)
        self.start = self.now
        self.nodes: dict[str, Node] = {node.name: node for node in scenario.nodes}
        self.free: dict[str, int] = {node.name: node.free for node in scenario.nodes}
        self.health: dict[str, Health] = {node.name: node.health for node in scenario.nodes}
        self.jobs: dict[str, SimJob] = {}
        # image locality: the images each node holds, written into every
        # session's scenario (``nodes[].images``); the replay sets them from its image
        # stores before each session.  A node not listed keeps its scenario's images.
        self.node_images: dict[str, dict[str, float]] = {}
        # Owners older than the TTL at the scenario's ``now`` are evicted before the first
        # session: ``plan`` treats them as expired too (``live_cache``), so both commands
        # agree on the first session's candidates.  Later sessions follow upstream's
        # refresh-then-evict (an owner present in a session is refreshed).
        self.expired_at_start = expired_owners(scenario, self.now)
        if self.expired_at_start:
            gone = set(self.expired_at_start)
            model = scenario.affinity_cache.model_copy(update={"entries": [
                e for e in scenario.affinity_cache.entries if e.owner_uid not in gone]})
            self.lifecycle = CacheLifecycle(AffinityCache.from_model(model))
        else:
            self.lifecycle = CacheLifecycle.from_model(scenario.affinity_cache,
                                                       cold_if_empty=True)
        messages: list[str] = []
        for job in scenario.jobs:
            # a partly running job's running ranks run in the simulated cluster
            spec = job_with(job, **{"running-ranks": {}, "pending-sessions": 0}) \
                if job.running_ranks else job
            self.jobs[job.name] = SimJob(spec, job.tasks, dict(job.running_ranks),
                                         set(job.fault_ranks), job.pending_sessions)
        # dynamic vNPU jobs (solver.simulate.vnpu); the first session sees the scenario's
        # unfinished slices, later ones do not
        self.vjobs: dict[str, SimVnpuJob] = {job.name: SimVnpuJob(job, job.tasks)
                                             for job in scenario.vnpu_jobs}
        self.sessions_run = 0
        used: dict[str, int] = {}
        for running in scenario.running:
            where = f"{scenario_source}: running job '{running.name}'"
            sim, errors = self._from_running(running)
            messages.extend(f"{where}: field '{f}': {text}" for f, text in errors)
            if sim is None:
                continue
            self.jobs[running.name] = sim
            for host in sim.placed.values():
                used[host] = used.get(host, 0) + running.npu_per_task
        for name, chips in used.items():
            npus = self.nodes[name].npus
            if self.free[name] + chips > npus:
                messages.append(
                    f"{scenario_source}: node '{name}': field 'free': free {self.free[name]} "
                    f"plus the {chips} NPUs of running jobs exceeds npus {npus} (free "
                    "must exclude the chips running jobs use)")
        if messages:
            raise InputError(messages)

    def _from_running(self, running: RunningJob) -> tuple[SimJob | None, list[tuple[str, str]]]:
        # The rules are validation's (validate and plan apply the same ones).
        _, errors = check_running(running, self.base)
        if errors:
            return None, errors
        spec, desired = running_spec(running)
        return SimJob(spec, desired, dict(running.ranks), set()), []

    # ------------------------------------------------------------------ helpers
    def _family(self, sim: SimJob) -> Family:
        shape, _ = derive_shape(sim.spec, self.base)
        return shape.family if shape is not None else Family.ORDINARY

    def _release(self, sim: SimJob, ranks: list[int]) -> int:
        """Release running ranks (status Releasing: cache kept).  Returns the count."""
        for rank in ranks:
            node = sim.placed.pop(rank)
            self.free[node] += sim.spec.npu_per_task
            self.lifecycle.release(sim.owner, rank)
        return len(ranks)

    def _check_size(self, sim: SimJob, tasks: int, where: str) -> None:
        if tasks <= 0:
            return
        _, errors = derive_shape(job_with(sim.spec, tasks=tasks, **{"fault-ranks": []}),
                                 self.base)
        if errors:
            raise InputError([f"{where}: field 'tasks': {text}" for _, text in errors])

    # ------------------------------------------------------------------ events
    def _release_vnpu(self, sim: SimVnpuJob, ranks: list[int]) -> int:
        """Release running vNPU ranks (cache kept).  Returns the count."""
        for rank in ranks:
            sim.placed.pop(rank)
            self.lifecycle.release(sim.owner, rank)
        return len(ranks)

    def _apply_vnpu(self, event: EventBase, where: str) -> str | None:
        """Evict, scale and delete-job for a vNPU job (None: the event is not one)."""
        name = getattr(event, "job", None)
        sim = self.vjobs.get(name) if isinstance(name, str) else None
        if sim is None:
            return None
        if isinstance(event, DeleteJobEvent):
            released = self._release_vnpu(sim, sorted(sim.placed))
            del self.vjobs[sim.name]
            return self._deleted(sim.name, sim.owner, released, event.keep_cache)
        if isinstance(event, ScaleEvent):
            old, target = sim.desired, event.tasks
            if target == old:
                return f"scale {sim.name}: already {old} ranks"
            released = self._release_vnpu(sim, sorted(r for r in sim.placed if r >= target))
            sim.desired = target
            text = f"scale {sim.name} {old} -> {target}"
            if target < old:
                return text + (f": {released} pods released, cache kept" if released else "")
            return text + f": {target - old} ranks pending"
        if isinstance(event, EvictEvent):
            missing = [r for r in event.ranks or [] if r >= sim.desired]
            if missing:
                raise InputError([f"{where}: field 'ranks': ranks {listing(missing)} of job "
                                  f"'{sim.name}' do not exist (the job has {sim.desired} "
                                  "ranks)"])
            ranks = sorted(r for r in (event.ranks or sim.placed) if r in sim.placed)
            released = self._release_vnpu(sim, ranks)
            return f"evict {sim.name}: {released} pods released, cache kept"
        return None

    def _deleted(self, name: str, owner: str | None, released: int, keep_cache: bool) -> str:
        """After a job's removal (ordinary or vNPU): drop its owner's cache entries unless
        ``keep-cache``; the report line."""
        if not keep_cache:
            self.lifecycle.delete_owner(owner)
        return (f"delete-job {name}: {released} pods removed, cache "
                f"{'kept' if keep_cache else 'entries removed'}")

    def apply(self, event: EventBase, where: str) -> str:
        """Apply one event; returns what happened, for the report."""
        done = self._apply_vnpu(event, where)
        if done is not None:
            return done
        if isinstance(event, EvictEvent):
            return self._evict(event, where)
        if isinstance(event, DeleteJobEvent):
            sim = self._job(event.job, where, "delete-job")
            released = self._release(sim, sorted(sim.placed))
            del self.jobs[sim.name]
            return self._deleted(sim.name, sim.owner, released, event.keep_cache)
        if isinstance(event, ScaleEvent):
            return self._scale(event, where)
        if isinstance(event, SubmitVnpuEvent):
            vjob = event.job
            if vjob.name in self.jobs or vjob.name in self.vjobs:
                raise InputError([f"{where}: field 'submit-vnpu.name': job '{vjob.name}' "
                                  "already exists"])
            self.vjobs[vjob.name] = SimVnpuJob(vjob, vjob.tasks)
            return event.describe()
        if isinstance(event, SubmitEvent):
            job = event.job
            if job.name in self.jobs or job.name in self.vjobs:
                raise InputError([f"{where}: field 'submit.name': job '{job.name}' already "
                                  "exists"])
            self.jobs[job.name] = SimJob(job, job.tasks, {}, set(job.fault_ranks))
            return event.describe()
        if isinstance(event, NodeEvent):
            return self._node(event, where)
        if isinstance(event, AdvanceEvent):
            if self.now + event.seconds > MAX_TIMESTAMP:
                raise InputError([f"{where}: field 'advance': the clock would pass "
                                  f"{MAX_TIMESTAMP} s (now {self.now}, advance {event.seconds})"])
            self.now += event.seconds
            return f"advance {duration_text(event.seconds)} (now {self.now})"
        if isinstance(event, RestartEvent):
            self.lifecycle.restart()
            return event.describe()
        raise AssertionError(f"unhandled event {event!r}")  # pragma: no cover

    def _job(self, name: str, where: str, key: str) -> SimJob:
        sim = self.jobs.get(name)
        if sim is None:
            raise InputError([f"{where}: field '{key}': unknown job '{name}'"])
        return sim

    def _evict(self, event: EvictEvent, where: str) -> str:
        sim = self._job(event.job, where, "evict")
        if event.ranks:
            missing = [r for r in event.ranks if r >= sim.desired]
            if missing:
                raise InputError([f"{where}: field 'ranks': ranks {listing(missing)} of job "
                                  f"'{sim.name}' do not exist (the job has {sim.desired} "
                                  "ranks)"])
        if not sim.placed:
            # Which jobs run depends on the engine's earlier answers: an event file written
            # against one engine's run must still replay with another.
            return f"evict {sim.name}: nothing to evict, the job is pending in this run"
        if event.ranks:
            idle = [r for r in event.ranks if r not in sim.placed]
            if idle:
                event = event.model_copy(update={"ranks": [r for r in event.ranks
                                                           if r in sim.placed]})
                if not event.ranks:
                    return (f"evict {sim.name}: ranks {listing(idle)} are not running in this run; "
                            "nothing to evict")
        if event.fault and sim.pod_level:
            assert event.ranks
            self._release(sim, sorted(event.ranks))
            sim.fault |= set(event.ranks)
            sim.pending_sessions = 0
            return (f"evict {sim.name}: ranks {listing(event.ranks)} failed; pod-level "
                    f"rescheduling: only they are deleted, {len(sim.placed)} pods keep running")
        if event.fault:
            assert event.ranks
            released = self._release(sim, sorted(sim.placed))
            sim.fault = set(event.ranks)
            return (f"evict {sim.name}: ranks {listing(event.ranks)} failed; the job is "
                    f"rescheduled (job level: {released} pods released, cache kept)")
        if event.ranks and not family_rules(self._family(sim)).grouped:
            released = self._release(sim, sorted(event.ranks))
            return f"evict {sim.name}: ranks {span_text(sorted(event.ranks))} released, cache kept"
        released = self._release(sim, sorted(sim.placed))
        return f"evict {sim.name}: {released} pods released, cache kept; the job is pending"

    def _scale(self, event: ScaleEvent, where: str) -> str:
        sim = self._job(event.job, where, "scale")
        old = sim.desired
        target = event.tasks
        self._check_size(sim, target, where)
        if target == old:
            return f"scale {sim.name}: already {old} ranks"
        text = f"scale {sim.name} {old} -> {target}"
        if target < old:
            released = self._release(sim, sorted(r for r in sim.placed if r >= target))
            sim.fault = {r for r in sim.fault if r < target}
            sim.desired = target
            return text + (f": {released} pods released, cache kept" if released else "")
        ordinary = not family_rules(self._family(sim)).grouped
        if sim.placed and not ordinary:
            released = self._release(sim, sorted(sim.placed))
            sim.desired = target
            return text + f": the gang is re-placed whole ({released} pods released)"
        sim.desired = target
        return text + f": {target - old} ranks pending"

    def _node(self, event: NodeEvent, where: str) -> str:
        if event.node not in self.nodes:
            raise InputError([f"{where}: field 'node': unknown node '{event.node}'"])
        node = self.nodes[event.node]
        parts = []
        if event.free is not None:
            ours = sum(sim.spec.npu_per_task for sim in self.jobs.values()
                       for n in sim.placed.values() if n == event.node)
            if event.free + ours > node.npus:
                raise InputError([f"{where}: field 'free': free {event.free} plus the {ours} "
                                  f"NPUs of simulated running jobs exceeds npus {node.npus} "
                                  f"of node '{event.node}'"])
            parts.append(f"free {self.free[event.node]} -> {event.free}")
            self.free[event.node] = event.free
        if event.health is not None:
            parts.append(f"health {self.health[event.node].value} -> {event.health.value}")
            self.health[event.node] = event.health
            if event.health is Health.UNHEALTHY:
                for vsim in self.vjobs.values():
                    if any(s.node == event.node for s in vsim.placed.values()):
                        released = self._release_vnpu(vsim, sorted(vsim.placed))
                        parts.append(f"{vsim.name} rescheduled ({released} pods released)")
                for sim in self.jobs.values():
                    hit = sorted(r for r, n in sim.placed.items() if n == event.node)
                    if hit and sim.pod_level:
                        self._release(sim, hit)
                        sim.fault |= set(hit)
                        sim.pending_sessions = 0
                        parts.append(f"{sim.name}: pod-level rescheduling of fault ranks "
                                     f"{listing(hit)}")
                    elif hit:
                        released = self._release(sim, sorted(sim.placed))
                        sim.fault = set(hit)
                        parts.append(f"{sim.name} rescheduled (fault ranks {listing(hit)}; "
                                     f"{released} pods released)")
        return f"node {event.node}: " + "; ".join(parts)

    def escalate(self, sim: SimJob) -> list[int]:
        """A pod-level repair stayed pending one more session: count it and delete the
        running pods upstream's rescheduler adds at the new count (released, cache kept).
        Returns the ranks deleted now."""
        if not sim.pod_level or not sim.placed:
            return []
        sim.pending_sessions += 1
        shape, _ = derive_shape(job_with(sim.spec, tasks=sim.desired,
                                         **{"fault-ranks": []}), self.base)
        if shape is None:
            return []
        wider = deleted_ranks(shape, sim.desired, set(sim.pending_ranks()),
                              sim.pending_sessions, sim.spec.pod_rescheduling,
                              sim.spec.process_recover)
        now = sorted(r for r in wider if r in sim.placed)
        self._release(sim, now)
        return now

    def session_job(self, sim: SimJob) -> Job | None:
        """The pending job of a partly running pod-level or gang job: every rank, the
        running ones as ``running-ranks`` (``None``: not such a job)."""
        if not sim.placed or not sim.pending_ranks():
            return None
        if not sim.pod_level and not family_rules(self._family(sim)).grouped:
            return None
        return job_with(sim.spec, tasks=sim.desired, **{
            "fault-ranks": sorted(r for r in sim.fault if r < sim.desired
                                  and r not in sim.placed),
            "running-ranks": {str(r): n for r, n in sorted(sim.placed.items())},
            "pending-sessions": sim.pending_sessions})

    # ------------------------------------------------------------------ sessions
    def scenario_now(self, jobs: list[Job], entries: list[CacheEntry],
                     running: list[RunningJob] | None = None,
                     vnpu_jobs: list[VnpuJob] | None = None) -> Scenario:
        slices: dict[str, list[RunningSlice]] = {}
        for vsim in self.vjobs.values():
            for running_slice in vsim.placed.values():
                slices.setdefault(running_slice.node, []).append(running_slice)
        nodes = [node_with_slices(node.model_copy(update={"free": self.free[name],
                                                          "health": self.health[name]}
                                                  | ({"images": self.node_images[name]}
                                                     if name in self.node_images else {})),
                                  slices.get(name, []), self.sessions_run == 0)
                 for name, node in self.nodes.items()]
        return Scenario(
            now=self.now,
            config=self.base.config,
            nodes=nodes,
            affinity_cache=AffinityCacheModel(ttl_seconds=self.lifecycle.ttl_seconds,
                                              entries=entries),
            jobs=jobs,
            running=running or [],
            vnpu_jobs=vnpu_jobs or [],
        )

    def final_state(self) -> Scenario:
        """The cluster after the last session, as a scenario (``--save-state``)."""
        pending: list[Job] = []
        running: list[RunningJob] = []
        for sim in self.jobs.values():
            if sim.desired > 0 and not sim.placed:
                pending.append(job_with(sim.spec, tasks=sim.desired,
                                         **{"fault-ranks": sorted(sim.fault)}))
                continue
            partly = self.session_job(sim)
            if partly is not None:  # a partly running gang: pending with running ranks
                pending.append(partly)
                continue
            spec = sim.spec
            running.append(RunningJob.model_validate({
                k: v for k, v in {
                    "name": spec.name, "owner-uid": spec.owner_uid, "policy": spec.policy,
                    "npu-per-task": spec.npu_per_task,
                    "ranks": dict(sorted(sim.placed.items())), "tasks": sim.desired,
                    "priority": spec.priority, "image-size-gb": spec.image_size_gb,
                    "sp-block": spec.sp_block, "ra-block": spec.ra_block,
                    "affinity-config": spec.affinity_config,
                    "super-pod-affinity": spec.super_pod_affinity.value,
                    "ub-memory": spec.ub_memory, "inferserviceid": spec.inferserviceid,
                    "labels": spec.labels, "pod-rescheduling": spec.pod_rescheduling,
                    "process-recover": spec.process_recover,
                    "image": spec.image.model_dump(by_alias=True, exclude_none=True)
                    if spec.image is not None else None,
                }.items() if v is not None}))
        # the pending ranks of a partly running vNPU job lose the cache key (their rank
        # numbers would point at the running ranks' entries)
        vnpu_pending = [vsim.spec.model_copy(update={
            "tasks": len(vsim.pending_ranks()),
            "owner_uid": vsim.spec.owner_uid if not vsim.placed else None})
            for vsim in self.vjobs.values() if vsim.pending_ranks()]
        return self.scenario_now(pending, list(self.lifecycle.to_model().entries), running,
                                 vnpu_pending)
