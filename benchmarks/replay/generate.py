"""A seeded day of a cluster from a :class:`~benchmarks.replay.spec.WorkloadSpec`.

The day is a starting scenario (the pools' nodes, all free and healthy, an empty cache)
and one session every ``session-minutes`` with the events of the simulator
(:mod:`solver.simulate`).  The events do not depend on any engine; the replay adds the
ones that do (a training gang finishing after it has *run* its duration; inference
reclaiming training gangs when it cannot grow) per engine, as the engine's own
placements allow.

The workload model (the RFC's story, seed 000 §1.2, and public traces):

* **Inference services** (``chip8-node8`` pods, any node with room): replicas follow a
  diurnal curve, ``min + (max - min) * w(h)`` at hour ``h`` with ``w(h)`` the largest of
  ``(1 + cos(2π (h - p) / 24)) / 2`` over the peak hours ``p`` (two peaks give a midday
  dip), times ``1 + jitter · N(0, 1)`` per session (an autoscaler following noisy
  demand), rounded and kept within ``[min, max]``.  A scale-down releases the highest
  ranks and keeps their cache entries; a scale-up brings those ranks back, and they
  should return to their nodes.
* **vNPU inference services** (``ai-cores`` given; pods are dynamic-vNPU slices,
  ``huawei.com/npu-core``, on the ``vnpu`` pools' chips): the same curve; the service is
  a ``vnpu-jobs`` entry of the starting scenario (``tasks``: its replicas at hour 0, at
  least 1, scaled to 0 in the first session when the curve says 0) and scales like the
  others.  vNPU nodes (``nodes[].vnpu``: ``chips`` chips of ``chip-kind``, all free) serve
  vNPU jobs only; upstream refuses preempt/reclaim for vNPU jobs, so a vNPU service
  never reclaims (nor is a vNPU training gang reclaimed).  A training class on a ``vnpu``
  pool submits vNPU gangs (``submit-vnpu``) whose ranks are whole-card requests of
  ``chips-per-rank`` chips (default: all of a node's), competing with the slices for
  untouched chips; they get no pod faults (vNPU jobs have no fault ranks).
* **Training gangs**: Poisson arrivals per class (``arrivals-per-hour``), gang sizes in
  nodes from a histogram (default: :data:`~benchmarks.replay.spec.DEFAULT_GANG_NODES`,
  shaped like the ``node_num`` columns of the SenseTime Helios trace (SC'21; 4 clusters,
  3.36 M jobs) and the Shanghai AI Lab Acme trace (NSDI'24; 880 k jobs), both CC BY 4.0:
  small gangs are the most frequent), and log-normal run times (heavy-tailed, as in the
  Microsoft Philly trace, ATC'19, 117,325 jobs, CC BY 4.0).  No trace file is read or
  shipped; the histogram and the log-normal are parameters of the spec, not fits.
* **Faults**: each node turns unhealthy (repaired after ``repair-minutes``) or sub-healthy
  (for ``subhealth-minutes``) at the spec's rates per node-day; a running training rank
  fails at ``pod-fault-rate`` per pod-day (job-level rescheduling, that rank a fault
  rank).  The rates are the spec's: none of the public traces above records NPU node or
  pod fault rates, so the bundled days use round, stated values.

Same spec and seed: the same day, event for event.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks.generators import cluster_nodes
from benchmarks.replay.images import GcPolicy
from benchmarks.replay.spec import Pool, Training, WorkloadSpec, default_pod_nodes
from models.scenario import Scenario
from models.vnpu_rules import CHIP_GEOMETRY
from solver.simulate.events import (
    AdvanceEvent,
    EvictEvent,
    NodeEvent,
    ScaleEvent,
    SessionSpec,
    SubmitEvent,
    SubmitVnpuEvent,
)

#: Start of every generated day: 2025-11-29 00:00 UTC (hour 0 of the diurnal curve).
DAY_START = 1_764_374_400
#: The RFC's cache TTL is 72 h: a day never expires an entry by age.
POLICY_OF = {"a3": "chip2-node16-sp", "850": "chip8-node8-sp", "950": "chip8-node8-ra64-sp",
             "multilevel": "multilevel", "ordinary": "chip8-node8"}


@dataclass(frozen=True)
class JobInfo:
    """What the replay needs to know about a job besides its scheduling spec."""

    name: str
    kind: str  # "service", "vnpu-service", "training" or "vnpu-training"
    image: str
    image_size_gb: float
    priority: int
    duration_seconds: int = 0  # training: run time to completion
    submitted: int = 0  # unix seconds


@dataclass(frozen=True)
class DaySettings:
    """What the replay and its report need besides the sessions (from a spec or a series)."""

    name: str
    description: str
    cluster: str  # the node pools, in words
    image_disk_gb: float
    gc: GcPolicy
    pull_gb_per_minute: float
    reclaim: bool
    cadence: str  # how often sessions run, in words

    @classmethod
    def from_spec(cls, spec: WorkloadSpec) -> DaySettings:
        """The settings of a workload spec."""
        return cls(spec.name, spec.description.strip(),
                   ", ".join(f"{p.name}: {p.nodes} x {p.family}" for p in spec.cluster.pools),
                   spec.cluster.image_disk_gb, spec.cluster.gc.policy(),
                   spec.cluster.pull_gb_per_minute, spec.reclaim,
                   f"one every {spec.session_minutes} minutes ({spec.hours:g} h)")


@dataclass
class Day:
    """A day to replay: the starting cluster, the sessions and the jobs' images.

    ``elapsed`` gives each session's time in seconds since the first one;
    ``initial_images`` the images each node holds at the start (name, GB).
    """

    settings: DaySettings
    seed: int
    scenario: Scenario
    sessions: list[SessionSpec]
    jobs: dict[str, JobInfo]
    elapsed: list[int]
    initial_images: dict[str, list[tuple[str, float]]] = field(default_factory=dict)

    def scenario_with(self, prefer_previous_node: bool, image_locality: bool = True
                      ) -> Scenario:
        """The starting scenario with the previous-node preference and image locality
        (config ``image-locality``) on or off."""
        config = self.scenario.config.model_copy(
            update={"prefer_previous_node": prefer_previous_node,
                    "image_locality": image_locality})
        return self.scenario.model_copy(update={"config": config})

    def event_lines(self) -> list[str]:
        """Every session's events as text (for determinism checks and ``report.md``)."""
        return [f"{s.index}\t{event.describe()}" for s in self.sessions for event in s.events]


def replicas_at(minimum: int, maximum: int, peak_hours: Sequence[float], hour: float,
                noise: float = 0.0) -> int:
    """The diurnal replica curve at ``hour`` of the day (``noise``: relative deviation)."""
    wave = max((1.0 + math.cos(2.0 * math.pi * (hour - p) / 24.0)) / 2.0 for p in peak_hours)
    value = (minimum + (maximum - minimum) * wave) * (1.0 + noise)
    return int(min(maximum, max(minimum, round(value))))


def _training_job(train: Training, pool: Pool, npus: int, nodes: int, name: str,
                  image: str, image_size: float) -> dict[str, Any]:
    family = pool.family
    job: dict[str, Any] = {"name": name, "owner-uid": f"pt-{name}", "policy": POLICY_OF[family],
                           "tasks": nodes, "npu-per-task": npus, "priority": train.priority,
                           "image-size-gb": image_size,
                           "image": {"name": image, "size-gb": image_size}}
    if family in ("a3", "850"):
        job["sp-block"] = nodes * npus
    elif family == "950":
        tp = min(nodes, 8)
        job["sp-block"] = nodes * npus
        job["ra-block"] = tp * 8
    elif family == "multilevel":
        job["affinity-config"] = f"level1={nodes}" if nodes <= 4 else f"level1=4,level2={nodes}"
    return job


def generate_day(spec: WorkloadSpec, seed: int) -> Day:
    """The day of ``spec`` drawn with ``seed`` (a pure function of both)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(spec.name.encode())]))
    nodes: list[dict[str, Any]] = []
    config: dict[str, Any] = {"prefer-previous-node": True}
    pool_npus: dict[str, int] = {}
    for pool in spec.cluster.pools:
        if pool.family == "vnpu":
            nodes.extend({"name": f"{pool.name}-node-{i}", "npus": pool.vnpu_chips,
                          "free": pool.vnpu_chips, "vnpu": {"chip-kind": pool.vnpu_kind}}
                         for i in range(pool.nodes))
            continue
        pod = default_pod_nodes(pool) if pool.family in ("a3", "850", "950") else None
        data, pool_config = cluster_nodes(pool.family, pool.nodes, pod, pool.depth)
        for node in data:
            node["name"] = f"{pool.name}-{node['name']}"
        nodes.extend(data)
        config.update(pool_config)
        pool_npus[pool.name] = int(data[0]["npus"])
    sizes = {image.name: image.size_gb for image in spec.images}
    vnpu_jobs = [service.vnpu_job(
        f"infer-{service.name}", max(1, replicas_at(service.min_replicas, service.max_replicas,
                                                    service.peak_hours, 0.0)),
        sizes[service.image], service.image).model_dump(by_alias=True, mode="json",
                                                        exclude_none=True)
        for service in spec.services if service.is_vnpu]
    scenario = Scenario.model_validate({"now": DAY_START, "config": config, "nodes": nodes,
                                        "vnpu-jobs": vnpu_jobs})
    pools = {pool.name: pool for pool in spec.cluster.pools}
    step = spec.session_minutes * 60
    jobs: dict[str, JobInfo] = {}
    sessions: list[SessionSpec] = []
    replicas = {s.name: replicas_at(s.min_replicas, s.max_replicas, s.peak_hours, 0.0)
                for s in spec.services}
    health = ["healthy"] * len(nodes)
    until = [0] * len(nodes)  # when the node's fault or sub-health ends
    counters = {t.name: 0 for t in spec.training}
    alive: list[tuple[str, int, int]] = []  # training (name, tasks, nominal end)

    def submit_training(train: Training, now: int) -> SubmitEvent | SubmitVnpuEvent:
        counters[train.name] += 1
        name = f"train-{train.name}-{counters[train.name]}"
        sizes_nodes = sorted(train.gang_nodes)
        weights = np.array([train.gang_nodes[s] for s in sizes_nodes], dtype=float)
        gang = int(sizes_nodes[int(rng.choice(len(sizes_nodes), p=weights / weights.sum()))])
        image = train.images[int(rng.integers(len(train.images)))]
        d = train.duration_minutes
        minutes = float(np.clip(d.median * math.exp(d.sigma * rng.standard_normal()),
                                d.min, d.max))
        seconds = max(step, round(minutes * 60))
        pool = pools[train.pool]
        if pool.family == "vnpu":
            # whole chips per rank (a whole-card vNPU request); vNPU jobs have no fault
            # ranks, so no pod fault is drawn for them
            cores = CHIP_GEOMETRY[pool.vnpu_kind][0][0]
            chips = train.chips_per_rank or pool.vnpu_chips
            jobs[name] = JobInfo(name, "vnpu-training", image, sizes[image], train.priority,
                                 seconds, now)
            return SubmitVnpuEvent.model_validate({"submit-vnpu": {
                "name": name, "owner-uid": f"pt-{name}", "tasks": gang,
                "ai-cores": chips * cores, "priority": train.priority,
                "image-size-gb": sizes[image],
                "image": {"name": image, "size-gb": sizes[image]}}})
        data = _training_job(train, pool, pool_npus[pool.name], gang, name, image,
                             sizes[image])
        jobs[name] = JobInfo(name, "training", image, sizes[image], train.priority, seconds, now)
        alive.append((name, gang, now + seconds))
        return SubmitEvent.model_validate({"submit": data})

    for k in range(spec.sessions):
        now = DAY_START + k * step
        hour = k * step / 3600.0
        events: list[Any] = []
        if k == 0:
            for service in spec.services:
                name = f"infer-{service.name}"
                count = replicas[service.name]
                if service.is_vnpu:  # in the starting scenario's vnpu-jobs
                    jobs[name] = JobInfo(name, "vnpu-service", service.image,
                                         sizes[service.image], service.priority, 0, now)
                    if count == 0:
                        events.append(ScaleEvent.model_validate({"scale": name, "tasks": 0}))
                    continue
                events.append(SubmitEvent.model_validate({"submit": {
                    "name": name, "owner-uid": f"rs-{service.name}", "policy": "chip8-node8",
                    "tasks": max(1, count), "npu-per-task": service.npu_per_pod,
                    "priority": service.priority,
                    "image-size-gb": sizes[service.image],
                    "image": {"name": service.image, "size-gb": sizes[service.image]}}}))
                jobs[name] = JobInfo(name, "service", service.image, sizes[service.image],
                                     service.priority, 0, now)
                if count == 0:
                    events.append(ScaleEvent.model_validate({"scale": name, "tasks": 0}))
            for train in spec.training:
                for _ in range(train.initial):
                    events.append(submit_training(train, now))
        else:
            events.append(AdvanceEvent.model_validate({"advance": step}))
            for service in spec.services:
                noise = service.jitter * float(rng.standard_normal()) if service.jitter else 0.0
                count = replicas_at(service.min_replicas, service.max_replicas,
                                    service.peak_hours, hour, noise)
                if count != replicas[service.name]:
                    replicas[service.name] = count
                    events.append(ScaleEvent.model_validate({"scale": f"infer-{service.name}",
                                                             "tasks": count}))
            for train in spec.training:
                for _ in range(int(rng.poisson(train.arrivals_per_hour * step / 3600.0))):
                    events.append(submit_training(train, now))
            # nodes: repairs due, then new faults and sub-health (one draw per node)
            faults = spec.faults
            p_fault = faults.node_fault_rate * step / 86400.0
            p_sub = faults.subhealth_rate * step / 86400.0
            draws = rng.random(len(nodes))
            for n, node in enumerate(nodes):
                if health[n] != "healthy":
                    if now >= until[n]:
                        health[n] = "healthy"
                        events.append(NodeEvent.model_validate({"node": node["name"],
                                                                "health": "healthy"}))
                    continue
                if draws[n] < p_fault:
                    health[n] = "unhealthy"
                    until[n] = now + int(faults.repair_minutes * 60)
                elif draws[n] < p_fault + p_sub:
                    health[n] = "subhealthy"
                    until[n] = now + int(faults.subhealth_minutes * 60)
                else:
                    continue
                events.append(NodeEvent.model_validate({"node": node["name"],
                                                        "health": health[n]}))
            alive[:] = [a for a in alive if a[2] > now]
            p_pod = faults.pod_fault_rate * step / 86400.0
            if p_pod > 0:
                for name, tasks, _ in alive:
                    if rng.random() < p_pod * tasks:
                        rank = int(rng.integers(tasks))
                        events.append(EvictEvent.model_validate(
                            {"evict": name, "ranks": [rank], "fault": True}))
        label = f"{int(hour):02d}:{round(hour * 60) % 60:02d}"
        sessions.append(SessionSpec(k + 1, label, tuple(events)))
    return Day(DaySettings.from_spec(spec), seed, scenario, sessions, jobs,
               [k * step for k in range(len(sessions))])
