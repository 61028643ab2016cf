"""``npu-place simulate``: a multi-session what-if run of placements and the affinity cache.

A scenario gives the starting cluster (nodes, cache, pending jobs in ``jobs``, running jobs
in ``running``).  An EVENTS file is a YAML (or JSON) list of sessions; each session is a
mapping ``{name: ..., events: [...]}`` (or just the list of events).  Each event is a
mapping whose first key names its type:

``{evict: JOB}``
    Every running pod of JOB is released (preempt/reclaim): its chips are freed, its cache
    entries are kept, and the job is pending again.
``{evict: JOB, ranks: [r, ...]}``
    Only those pods are released and become pending; the other ranks keep running.  For
    super-pod, 950 and multilevel jobs the whole job is released (a block cannot be
    repaired rank by rank here).
``{evict: JOB, ranks: [r, ...], fault: true}``
    Those pods failed: the rescheduler deletes the whole job (job-level rescheduling,
    upstream's default) and the listed ranks become ``fault-ranks`` of the re-placement.
``{delete-job: JOB}`` (optional ``keep-cache: true``)
    The job and its pods are removed; its owner's cache entries are removed too (the RFC's
    "Job 删除时清理对应缓存") unless ``keep-cache`` (a PodGroup recreated by the same owner).
``{scale: JOB, tasks: N}``
    Scale to N ranks.  Down: ranks ``N..`` are released (cache kept).  Up: ordinary jobs get
    new pending ranks while the running ones stay; a running super-pod / 950 / multilevel
    gang is released and re-placed whole with N ranks.  ``tasks: 0`` parks the job.
``{submit: {name: ..., policy: ..., ...}}``
    A new pending job (the scenario's ``jobs`` fields).
``{node: NODE, health: healthy|subhealthy|unhealthy, free: N}``
    Set a node's health and/or its free chips (other tenants, a repair).  ``free`` counts
    the chips left after the simulated running jobs.  A node turning unhealthy reschedules
    every running job with a rank on it (job level; those ranks become fault ranks).
``{advance: SECONDS}``
    Move the clock (an integer, or ``"90s"``, ``"15m"``, ``"8h"``, ``"3d"``); drives the
    cache TTL.
``{restart: true}``
    The scheduler restarts: the in-memory cache is lost; the next session is a cold start.

After its events a session runs like Volcano's: the cache is initialised (cold start: rebuilt
from running pods; warm: owners present refreshed, then TTL eviction), the pending jobs are
placed with the chosen engine through :func:`solver.facade.solve`, and the answer is applied
to the cluster and to the cache (each placed job is one committed gang allocation).
Owners whose cache entries are already older than the TTL at the scenario's ``now`` are
evicted before the first session (reported as "TTL evicted" with an event line), exactly
the owners ``plan`` treats as expired, so both commands start from the same live cache.

Per session the report gives, over the pending jobs of that session:

``candidates``
    Ranks with a live previous node that are not fault ranks (placed or not).
``achievable``
    Of those, the ones whose previous node could take them now (``achievable_hits``).
``placed-candidates`` / ``hits``
    Candidates of the jobs that were placed, and those placed back on their node.
``hit-rate``
    ``hits / placed-candidates``: of the pods that were re-placed and had a previous node,
    how many went back (the RFC's "pod 回原节点命中率", target ≥ 80 %).
``pulls-avoided-gb``
    ``Σ hits × image-size-gb`` of the job (default 25 GB): image pulls the returning pods
    did not need.
``moved`` / ``new``
    Placed ranks that had a previous node but landed elsewhere (fault ranks included) /
    placed ranks without a previous node.
``pending``
    Jobs left pending, with the engine's reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from heuristics.lifecycle import CacheLifecycle, RunningPods
from models.cache import AffinityCache
from models.compiled import compile_scenario, expired_owners, scenario_now
from models.limits import (
    MAX_ADVANCE_SECONDS,
    MAX_EVENTS_PER_SESSION,
    MAX_SESSIONS,
    MAX_TASKS,
    MAX_TIMESTAMP,
    LimitError,
    Name,
    check_text,
    escape_text,
)
from models.objective import achievable_hits
from models.scenario import (
    MAX_NODE_NPUS,
    AffinityCacheModel,
    CacheEntry,
    Family,
    Health,
    Job,
    Node,
    RunningJob,
    Scenario,
)
from models.validation import InputError, check_running, derive_shape, running_spec
from solver.facade import solve

# --------------------------------------------------------------------------- events


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: ClassVar[str] = ""

    def describe(self) -> str:
        """A short human description."""
        return self.kind


class EvictEvent(_Event):
    """Release the pods of a running job (all, or some ranks)."""

    kind: ClassVar[str] = "evict"
    job: Name = Field(alias="evict", min_length=1)
    ranks: list[int] | None = Field(None, max_length=MAX_TASKS)
    fault: bool = False

    @field_validator("ranks")
    @classmethod
    def _ranks(cls, value: list[int] | None) -> list[int] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("ranks is empty: omit it to evict the whole job")
        bad = [r for r in value if r < 0]
        if bad:
            raise ValueError(f"ranks {bad} are negative")
        if len(set(value)) != len(value):
            raise ValueError("a rank is listed twice")
        return value

    def describe(self) -> str:
        what = f"ranks {self.ranks}" if self.ranks else "all ranks"
        return f"evict {self.job} ({what}{', fault' if self.fault else ''})"


class DeleteJobEvent(_Event):
    """Delete a job (and, unless ``keep-cache``, its owner's cache entries)."""

    kind: ClassVar[str] = "delete-job"
    job: Name = Field(alias="delete-job", min_length=1)
    keep_cache: bool = Field(False, alias="keep-cache")

    def describe(self) -> str:
        return f"delete-job {self.job}{' (cache kept)' if self.keep_cache else ''}"


class ScaleEvent(_Event):
    """Scale a job to ``tasks`` ranks."""

    kind: ClassVar[str] = "scale"
    job: Name = Field(alias="scale", min_length=1)
    tasks: int = Field(ge=0, le=MAX_TASKS)

    def describe(self) -> str:
        return f"scale {self.job} to {self.tasks}"


class SubmitEvent(_Event):
    """Submit a new pending job."""

    kind: ClassVar[str] = "submit"
    job: Job = Field(alias="submit")

    def describe(self) -> str:
        return f"submit {self.job.name} ({self.job.tasks} x {self.job.npu_per_task} NPUs)"


class NodeEvent(_Event):
    """Set a node's health and/or free chips."""

    kind: ClassVar[str] = "node"
    node: Name = Field(alias="node", min_length=1)
    health: Health | None = None
    free: int | None = Field(None, ge=0, le=MAX_NODE_NPUS)

    def describe(self) -> str:
        parts = []
        if self.health is not None:
            parts.append(f"health {self.health.value}")
        if self.free is not None:
            parts.append(f"free {self.free}")
        return f"node {self.node}: {', '.join(parts)}"


_DURATION = re.compile(r"^\s*(-?\d+)\s*([smhd]?)\s*$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class AdvanceEvent(_Event):
    """Move the clock forward."""

    kind: ClassVar[str] = "advance"
    seconds: int = Field(alias="advance", le=MAX_ADVANCE_SECONDS)

    @field_validator("seconds", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("expected a number of seconds")
        if isinstance(value, str):
            match = _DURATION.match(value)
            if match is None:
                raise ValueError(f"cannot read the duration '{value}' (use e.g. 90, '15m', "
                                 "'8h', '3d')")
            digits = match.group(1)
            if len(digits.lstrip("-")) > 15:  # far beyond MAX_ADVANCE_SECONDS
                raise ValueError(f"the duration '{escape_text(value, 40)}' is longer than "
                                 f"{MAX_ADVANCE_SECONDS} seconds (10 years)")
            value = int(digits) * _UNIT[match.group(2)]
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError(f"time must be whole seconds, got {value}")
            value = int(value)
        if isinstance(value, int) and value < 0:
            raise ValueError(f"negative time ({value} s): the clock only moves forward")
        return value

    def describe(self) -> str:
        return f"advance {self.seconds} s"


class RestartEvent(_Event):
    """The scheduler restarts: the cache is lost."""

    kind: ClassVar[str] = "restart"
    restart: bool = True

    def describe(self) -> str:
        return "scheduler restart (cache lost)"


Event = EvictEvent | DeleteJobEvent | ScaleEvent | SubmitEvent | NodeEvent | AdvanceEvent \
    | RestartEvent
EVENT_TYPES: dict[str, type[_Event]] = {
    cls.kind: cls
    for cls in (EvictEvent, DeleteJobEvent, ScaleEvent, SubmitEvent, NodeEvent, AdvanceEvent,
                RestartEvent)
}


@dataclass(frozen=True)
class SessionSpec:
    """One session of an events file."""

    index: int  # 1-based
    name: str | None
    events: tuple[Event, ...]

    @property
    def label(self) -> str:
        """``session N ('name')``."""
        return f"session {self.index}" + (f" ('{self.name}')" if self.name else "")


def _error_text(error: Any) -> tuple[str, str]:
    loc = ".".join(str(p) for p in error["loc"]) or "(the event)"
    text = str(error["msg"])
    if error["type"] == "extra_forbidden":
        text = "unknown field (check the spelling against the events format)"
    elif error["type"] == "value_error":
        text = text.removeprefix("Value error, ")
    elif "input" in error and error["type"] != "missing":
        shown = repr(error["input"])
        if len(shown) <= 60:
            text = f"{text} (got {shown})"
    return loc, text


def parse_events(data: Any, source: str, scenario: Scenario) -> list[SessionSpec]:
    """Parse and check an events document against ``scenario``.

    Checks the structure of every session and event, node names, job names as the
    sessions add and delete jobs, and submitted job specs.  Every problem found is
    reported at once.

    Raises
    ------
    InputError
        With one message per problem, naming the file, session, event and field.
    """
    messages: list[str] = []
    if data is None:
        data = []
    if not isinstance(data, list):
        raise InputError([f"{source}: expected a list of sessions at the top level, got "
                          f"{type(data).__name__}"])
    if len(data) > MAX_SESSIONS:
        raise InputError([f"{source}: {len(data)} sessions; the limit is {MAX_SESSIONS}"])
    node_names = {node.name for node in scenario.nodes}
    jobs: set[str] = {job.name for job in scenario.jobs} | {r.name for r in scenario.running}
    sessions: list[SessionSpec] = []
    for s, raw in enumerate(data, start=1):
        name: str | None = None
        raw_events: Any
        if isinstance(raw, list):
            raw_events = raw
        elif isinstance(raw, dict):
            extra = sorted(str(k) for k in raw if k not in ("name", "events"))
            raw_name = raw.get("name")
            name = None if raw_name is None else str(raw_name)
            where = f"{source}: session {s}" + (f" ('{escape_text(name, 60)}')" if name else "")
            if isinstance(raw_name, (dict, list)):
                messages.append(f"{where}: field 'name': expected a name, got "
                                f"{type(raw_name).__name__}")
                name = None
            elif name is not None:
                try:
                    check_text(name)
                except LimitError as exc:
                    messages.append(f"{where}: field 'name': the name {exc}")
                    name = None
            for key in extra:
                messages.append(f"{where}: field '{key}': unknown field (a session has "
                                "'name' and 'events')")
            raw_events = raw.get("events") or []
            if not isinstance(raw_events, list):
                messages.append(f"{where}: field 'events': expected a list of events")
                raw_events = []
        elif raw is None:
            raw_events = []
        else:
            messages.append(f"{source}: session {s}: expected a mapping with 'events' (or a "
                            f"list of events), got {type(raw).__name__}")
            continue
        label = f"session {s}" + (f" ('{name}')" if name else "")
        if len(raw_events) > MAX_EVENTS_PER_SESSION:
            messages.append(f"{source}: {label}: field 'events': {len(raw_events)} events; the "
                            f"limit is {MAX_EVENTS_PER_SESSION} per session")
            raw_events = []
        events: list[Event] = []
        for e, item in enumerate(raw_events, start=1):
            where = f"{source}: {label}: event {e}"
            if not isinstance(item, dict) or not item:
                messages.append(f"{where}: expected a mapping such as {{evict: JOB}}, got "
                                f"{type(item).__name__ if item is not None else 'nothing'}")
                continue
            kinds = [k for k in item if k in EVENT_TYPES]
            if len(kinds) != 1:
                found = "none" if not kinds else ", ".join(kinds)
                messages.append(f"{where}: field '(type)': exactly one event type key is "
                                f"needed ({', '.join(EVENT_TYPES)}); found {found}")
                continue
            kind = kinds[0]
            where = f"{where} ({kind})"
            try:
                event = EVENT_TYPES[kind].model_validate(item)
            except ValidationError as exc:
                for error in exc.errors():
                    loc, text = _error_text(error)
                    messages.append(f"{where}: field '{loc}': {text}")
                continue
            messages.extend(_check_event(event, where, node_names, jobs, scenario))
            events.append(event)  # type: ignore[arg-type]
        sessions.append(SessionSpec(s, name, tuple(events)))
    if messages:
        raise InputError(messages)
    return sessions


def _check_event(event: _Event, where: str, node_names: set[str], jobs: set[str],
                 scenario: Scenario) -> list[str]:
    """Static checks of one event; updates ``jobs`` as jobs are submitted and deleted."""
    out: list[str] = []

    def known(job: str, key: str) -> None:
        if job not in jobs:
            shown = ", ".join(sorted(jobs)) or "none"
            out.append(f"{where}: field '{key}': unknown job '{job}' (jobs known at this "
                       f"point: {shown})")

    if isinstance(event, EvictEvent):
        known(event.job, "evict")
        if event.fault and not event.ranks:
            out.append(f"{where}: field 'fault': a fault eviction needs the failed 'ranks'")
    elif isinstance(event, DeleteJobEvent):
        known(event.job, "delete-job")
        jobs.discard(event.job)
    elif isinstance(event, ScaleEvent):
        known(event.job, "scale")
    elif isinstance(event, SubmitEvent):
        if event.job.name in jobs:
            out.append(f"{where}: field 'submit.name': job '{event.job.name}' already exists")
        _, errors = derive_shape(event.job, scenario)
        out.extend(f"{where}: field 'submit.{f}': {text}" for f, text in errors)
        jobs.add(event.job.name)
    elif isinstance(event, NodeEvent):
        if event.node not in node_names:
            out.append(f"{where}: field 'node': unknown node '{event.node}'")
        if event.health is None and event.free is None:
            out.append(f"{where}: field 'node': give 'health' and/or 'free'")
    return out


# --------------------------------------------------------------------------- report


@dataclass
class JobSessionResult:
    """One pending job of one session."""

    name: str
    ranks: list[int]  # the job's ranks placed in this session (real rank numbers)
    placed: bool
    nodes: list[str] = field(default_factory=list)
    hits: int = 0
    candidates: int = 0
    achievable: int = 0
    moved: int = 0
    new: int = 0
    fault_returns: int = 0
    pulls_avoided_gb: float = 0.0
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data with the report's key names."""
        data: dict[str, Any] = {"name": self.name, "ranks": _span(self.ranks),
                                "placed": self.placed}
        if self.placed:
            data["nodes"] = {str(r): n for r, n in zip(self.ranks, self.nodes, strict=True)}
        data.update({"hits": self.hits, "candidates": self.candidates,
                     "achievable": self.achievable, "moved": self.moved, "new": self.new,
                     "fault-returns": self.fault_returns,
                     "pulls-avoided-gb": round(self.pulls_avoided_gb, 3)})
        if self.reason:
            data["reason"] = self.reason
        return data


@dataclass
class SessionReport:
    """The numbers of one session."""

    index: int
    name: str | None
    now: int
    elapsed: int  # seconds since the first session
    events: list[str]
    cache_start: str  # "cold" or "warm"
    cache_rebuilt: int
    cache_evicted: list[str]
    cache_entries: int
    cache_states: dict[str, int]
    engine: str
    status: str
    jobs: list[JobSessionResult]

    @property
    def placed(self) -> list[JobSessionResult]:
        """Jobs placed in this session."""
        return [j for j in self.jobs if j.placed]

    @property
    def pending(self) -> list[JobSessionResult]:
        """Jobs left pending."""
        return [j for j in self.jobs if not j.placed]

    def _sum(self, attr: str, placed_only: bool = False) -> int:
        return sum(getattr(j, attr) for j in self.jobs if j.placed or not placed_only)

    @property
    def hits(self) -> int:
        """Ranks placed back on their previous node."""
        return self._sum("hits")

    @property
    def candidates(self) -> int:
        """Non-fault ranks with a live previous node (all pending jobs)."""
        return self._sum("candidates")

    @property
    def placed_candidates(self) -> int:
        """Candidates of the placed jobs."""
        return self._sum("candidates", placed_only=True)

    @property
    def achievable(self) -> int:
        """Candidates whose previous node could take them at the session start."""
        return self._sum("achievable")

    @property
    def moved(self) -> int:
        """Placed ranks with a previous node that landed elsewhere."""
        return self._sum("moved")

    @property
    def new(self) -> int:
        """Placed ranks without a previous node."""
        return self._sum("new")

    @property
    def fault_returns(self) -> int:
        """Fault ranks placed back on their old node."""
        return self._sum("fault_returns")

    @property
    def pulls_avoided_gb(self) -> float:
        """Image gigabytes not pulled thanks to returning pods."""
        return float(sum(j.pulls_avoided_gb for j in self.jobs))

    @property
    def hit_rate(self) -> float | None:
        """``hits / placed_candidates`` or ``None`` when nothing had a previous node."""
        return self.hits / self.placed_candidates if self.placed_candidates else None

    def to_dict(self) -> dict[str, Any]:
        """Plain data with the report's key names."""
        rate = self.hit_rate
        return {
            "session": self.index,
            "name": self.name,
            "now": self.now,
            "elapsed-seconds": self.elapsed,
            "events": list(self.events),
            "engine": self.engine,
            "status": self.status,
            "placed-jobs": len(self.placed),
            "pending-jobs": len(self.pending),
            "hits": self.hits,
            "placed-candidates": self.placed_candidates,
            "achievable": self.achievable,
            "candidates": self.candidates,
            "hit-rate": None if rate is None else round(rate, 6),
            "pulls-avoided": self.hits,
            "pulls-avoided-gb": round(self.pulls_avoided_gb, 3),
            "moved": self.moved,
            "new": self.new,
            "fault-returns": self.fault_returns,
            "pending": [{"name": j.name, "reason": j.reason} for j in self.pending],
            "cache": {"start": self.cache_start, "rebuilt": self.cache_rebuilt,
                      "evicted-owners": list(self.cache_evicted),
                      "entries": self.cache_entries, "states": dict(self.cache_states)},
            "jobs": [j.to_dict() for j in self.jobs],
        }


@dataclass
class SimulationReport:
    """Every session of a simulation and the state after the last one."""

    scenario_source: str
    events_source: str
    engine: str
    sessions: list[SessionReport]
    final_state: Scenario

    @property
    def hits(self) -> int:
        """Hits over all sessions."""
        return sum(s.hits for s in self.sessions)

    @property
    def placed_candidates(self) -> int:
        """Placed candidates over all sessions."""
        return sum(s.placed_candidates for s in self.sessions)

    @property
    def hit_rate(self) -> float | None:
        """Overall ``hits / placed_candidates``."""
        return self.hits / self.placed_candidates if self.placed_candidates else None

    def totals(self) -> dict[str, Any]:
        """Sums over all sessions."""
        rate = self.hit_rate
        return {
            "sessions": len(self.sessions),
            "hits": self.hits,
            "placed-candidates": self.placed_candidates,
            "achievable": sum(s.achievable for s in self.sessions),
            "candidates": sum(s.candidates for s in self.sessions),
            "hit-rate": None if rate is None else round(rate, 6),
            "pulls-avoided": self.hits,
            "pulls-avoided-gb": round(sum(s.pulls_avoided_gb for s in self.sessions), 3),
            "moved": sum(s.moved for s in self.sessions),
            "new": sum(s.new for s in self.sessions),
            "fault-returns": sum(s.fault_returns for s in self.sessions),
            "pending-after-last": len(self.sessions[-1].pending) if self.sessions else 0,
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--format json|yaml``."""
        return {
            "scenario": self.scenario_source,
            "events": self.events_source,
            "engine": self.engine,
            "sessions": [s.to_dict() for s in self.sessions],
            "totals": self.totals(),
        }

    def render_table(self) -> str:
        """A readable report: one row per session, totals, then each session's details."""
        header = ["#", "session", "+time", "placed", "pending", "hits", "placed-cand",
                  "achievable", "cand", "hit-rate", "moved", "new", "avoided-GB"]
        rows = []
        for s in self.sessions:
            rows.append([str(s.index), s.name or "", _duration(s.elapsed), str(len(s.placed)),
                         str(len(s.pending)), str(s.hits), str(s.placed_candidates),
                         str(s.achievable), str(s.candidates), _rate(s.hit_rate),
                         str(s.moved), str(s.new), f"{s.pulls_avoided_gb:g}"])
        t = self.totals()
        rows.append(["", "total", "", "", "", str(t["hits"]), str(t["placed-candidates"]),
                     str(t["achievable"]), str(t["candidates"]), _rate(self.hit_rate),
                     str(t["moved"]), str(t["new"]), f"{t['pulls-avoided-gb']:g}"])
        lines = [f"simulate: {self.scenario_source} + {self.events_source} "
                 f"(engine {self.engine})", "", _table(rows, header), ""]
        for s in self.sessions:
            lines.append(f"{s.index}. {s.name or 'session'}  [{s.engine}, {s.status}; cache "
                         f"{s.cache_start}"
                         + (f", rebuilt {s.cache_rebuilt} entries" if s.cache_rebuilt else "")
                         + (f", TTL evicted {', '.join(s.cache_evicted)}"
                            if s.cache_evicted else "")
                         + f"; {s.cache_entries} entries after]")
            for text in s.events:
                lines.append(f"   event: {text}")
            for job in s.jobs:
                if job.placed:
                    lines.append(
                        f"   placed {job.name}[{_span(job.ranks)}]: {job.hits}/{job.candidates}"
                        f" back, {job.moved} moved, {job.new} new -> "
                        f"{_compress(job.nodes)}")
                else:
                    lines.append(f"   pending {job.name}[{_span(job.ranks)}]: {job.reason}")
        return "\n".join(lines) + "\n"


def _rate(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.1f} %"


def _duration(seconds: int) -> str:
    if seconds % 86400 == 0 and seconds:
        return f"+{seconds // 86400}d"
    if seconds % 3600 == 0 and seconds:
        return f"+{seconds // 3600}h"
    if seconds % 60 == 0 and seconds:
        return f"+{seconds // 60}m"
    return f"+{seconds}s"


def _span(ranks: Sequence[int]) -> str:
    """``0..5`` for a contiguous run, else the list."""
    if not ranks:
        return ""
    if list(ranks) == list(range(ranks[0], ranks[0] + len(ranks))):
        return f"{ranks[0]}..{ranks[-1]}" if len(ranks) > 1 else str(ranks[0])
    return ",".join(str(r) for r in ranks)


def _compress(nodes: list[str], limit: int = 8) -> str:
    if len(nodes) <= limit:
        return ", ".join(nodes)
    return ", ".join(nodes[:limit]) + f", ... (+{len(nodes) - limit})"


def _table(rows: list[list[str]], header: list[str]) -> str:
    data = [header, *rows]
    widths = [max(len(r[i]) for r in data) for i in range(len(header))]
    lines = []
    for k, row in enumerate(data):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


# --------------------------------------------------------------------------- simulation


@dataclass
class _SimJob:
    """A job of the simulated cluster: its spec, desired size and running ranks."""

    spec: Job  # the template (its ``tasks`` is not used; ``desired`` is the size)
    desired: int
    placed: dict[int, str]
    fault: set[int]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def owner(self) -> str | None:
        return self.spec.owner_uid or None

    def pending_ranks(self) -> list[int]:
        return [r for r in range(self.desired) if r not in self.placed]


def _job_with(spec: Job, **changes: Any) -> Job:
    data = spec.model_dump(by_alias=True, exclude_none=True)
    data.update(changes)
    return Job.model_validate(data)


class _Simulation:
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
        self.jobs: dict[str, _SimJob] = {}
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
            self.jobs[job.name] = _SimJob(job, job.tasks, {}, set(job.fault_ranks))
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

    def _from_running(self, running: RunningJob) -> tuple[_SimJob | None, list[tuple[str, str]]]:
        # The rules are validation's (validate and plan apply the same ones).
        _, errors = check_running(running, self.base)
        if errors:
            return None, errors
        spec, desired = running_spec(running)
        return _SimJob(spec, desired, dict(running.ranks), set()), []

    # ------------------------------------------------------------------ helpers
    def _family(self, sim: _SimJob) -> Family:
        shape, _ = derive_shape(sim.spec, self.base)
        return shape.family if shape is not None else Family.ORDINARY

    def _release(self, sim: _SimJob, ranks: list[int]) -> int:
        """Release running ranks (status Releasing: cache kept).  Returns the count."""
        for rank in ranks:
            node = sim.placed.pop(rank)
            self.free[node] += sim.spec.npu_per_task
            self.lifecycle.release(sim.owner, rank)
        return len(ranks)

    def _check_size(self, sim: _SimJob, tasks: int, where: str) -> None:
        if tasks <= 0:
            return
        _, errors = derive_shape(_job_with(sim.spec, tasks=tasks, **{"fault-ranks": []}),
                                 self.base)
        if errors:
            raise InputError([f"{where}: field 'tasks': {text}" for _, text in errors])

    # ------------------------------------------------------------------ events
    def apply(self, event: _Event, where: str) -> str:
        """Apply one event; returns what happened, for the report."""
        if isinstance(event, EvictEvent):
            return self._evict(event, where)
        if isinstance(event, DeleteJobEvent):
            sim = self._job(event.job, where, "delete-job")
            released = self._release(sim, sorted(sim.placed))
            del self.jobs[sim.name]
            if not event.keep_cache:
                self.lifecycle.delete_owner(sim.owner)
            return (f"delete-job {sim.name}: {released} pods removed, cache "
                    f"{'kept' if event.keep_cache else 'entries removed'}")
        if isinstance(event, ScaleEvent):
            return self._scale(event, where)
        if isinstance(event, SubmitEvent):
            job = event.job
            if job.name in self.jobs:
                raise InputError([f"{where}: field 'submit.name': job '{job.name}' already "
                                  "exists"])
            self.jobs[job.name] = _SimJob(job, job.tasks, {}, set(job.fault_ranks))
            return event.describe()
        if isinstance(event, NodeEvent):
            return self._node(event, where)
        if isinstance(event, AdvanceEvent):
            if self.now + event.seconds > MAX_TIMESTAMP:
                raise InputError([f"{where}: field 'advance': the clock would pass "
                                  f"{MAX_TIMESTAMP} s (now {self.now}, advance {event.seconds})"])
            self.now += event.seconds
            return f"advance {_duration(event.seconds)} (now {self.now})"
        if isinstance(event, RestartEvent):
            self.lifecycle.restart()
            return event.describe()
        raise AssertionError(f"unhandled event {event!r}")  # pragma: no cover

    def _job(self, name: str, where: str, key: str) -> _SimJob:
        sim = self.jobs.get(name)
        if sim is None:
            raise InputError([f"{where}: field '{key}': unknown job '{name}'"])
        return sim

    def _evict(self, event: EvictEvent, where: str) -> str:
        sim = self._job(event.job, where, "evict")
        if event.ranks:
            missing = [r for r in event.ranks if r >= sim.desired]
            if missing:
                raise InputError([f"{where}: field 'ranks': ranks {missing} of job "
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
                    return (f"evict {sim.name}: ranks {idle} are not running in this run; "
                            "nothing to evict")
        if event.fault:
            assert event.ranks
            released = self._release(sim, sorted(sim.placed))
            sim.fault = set(event.ranks)
            return (f"evict {sim.name}: ranks {event.ranks} failed; the job is rescheduled "
                    f"(job level: {released} pods released, cache kept)")
        if event.ranks and self._family(sim) is Family.ORDINARY:
            released = self._release(sim, sorted(event.ranks))
            return f"evict {sim.name}: ranks {_span(sorted(event.ranks))} released, cache kept"
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
        ordinary = self._family(sim) is Family.ORDINARY
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
                for sim in self.jobs.values():
                    hit = sorted(r for r, n in sim.placed.items() if n == event.node)
                    if hit:
                        released = self._release(sim, sorted(sim.placed))
                        sim.fault = set(hit)
                        parts.append(f"{sim.name} rescheduled (fault ranks {hit}, {released} "
                                     "pods released)")
        return f"node {event.node}: " + "; ".join(parts)

    # ------------------------------------------------------------------ sessions
    def scenario_now(self, jobs: list[Job], entries: list[CacheEntry],
                     running: list[RunningJob] | None = None) -> Scenario:
        nodes = [node.model_copy(update={"free": self.free[name], "health": self.health[name]})
                 for name, node in self.nodes.items()]
        return Scenario(
            now=self.now,
            config=self.base.config,
            nodes=nodes,
            affinity_cache=AffinityCacheModel(ttl_seconds=self.lifecycle.ttl_seconds,
                                              entries=entries),
            jobs=jobs,
            running=running or [],
        )

    def run_session(self, spec: SessionSpec, engine: str, time_limit: float, workers: int,
                    seed: int, deterministic_time: float | None = None) -> SessionReport:
        applied = []
        expired, self.expired_at_start = self.expired_at_start, []
        if expired:
            shown = ", ".join(expired[:10]) + (f", ... ({len(expired) - 10} more)"
                                               if len(expired) > 10 else "")
            applied.append(f"cache: {len(expired)} owner(s) older than the TTL at the "
                           f"scenario's now evicted before the first session ({shown}); as "
                           "in plan, their entries are not candidates")
        for e, event in enumerate(spec.events, start=1):
            where = f"{self.events_source}: {spec.label}: event {e} ({event.kind})"
            applied.append(self.apply(event, where))
        present = [sim.owner for sim in self.jobs.values() if sim.owner and sim.desired > 0]
        running = [RunningPods(sim.owner, dict(sim.placed)) for sim in self.jobs.values()
                   if sim.placed]
        start = self.lifecycle.start_session(self.now, present, running)
        cache_model = self.lifecycle.to_model()
        entries = list(cache_model.entries)
        session_jobs: list[Job] = []
        real_ranks: list[tuple[_SimJob, list[int]]] = []
        for sim in self.jobs.values():  # insertion order: the scenario's, then submissions
            pending = sim.pending_ranks()
            if not pending:
                continue
            owner = sim.owner
            if not sim.placed:
                job = _job_with(sim.spec, tasks=sim.desired,
                                **{"fault-ranks": sorted(r for r in sim.fault
                                                         if r < sim.desired)})
            else:
                # Some ranks run: the pending ones form a job of their own whose cache view
                # is the owner's entries of those ranks, renumbered from 0.
                view = None
                if owner:
                    view = f"{owner}#{_span(pending)}"
                    updated = self.lifecycle.cache.updated(owner) if self.lifecycle.cache \
                        else None
                    for local, rank in enumerate(pending):
                        node = self.lifecycle.node(owner, rank)
                        if node:
                            entries.append(CacheEntry(owner_uid=view, rank=local, node=node,
                                                      updated=updated or self.now))
                job = _job_with(sim.spec, tasks=len(pending), **{"owner-uid": view,
                                                                 "fault-ranks": []})
            if owner:
                for rank in pending:
                    self.lifecycle.lookup(owner, rank)
            session_jobs.append(job)
            real_ranks.append((sim, pending))
        scenario = self.scenario_now(session_jobs, entries)
        where = f"{self.events_source}: {spec.label}"
        problem = compile_scenario(scenario, where)
        results: list[JobSessionResult] = []
        engine_used = "none"
        status = "-"
        if session_jobs:
            result = solve(problem, engine=engine, time_limit=time_limit, workers=workers,
                           seed=seed, deterministic_time=deterministic_time)
            engine_used, status = result.engine, result.status.value
            for j, (sim, ranks) in enumerate(real_ranks):
                view_job = problem.jobs[j]
                nodes = result.plan.nodes[j]
                res = JobSessionResult(
                    name=sim.name, ranks=ranks, placed=nodes is not None,
                    candidates=int(((view_job.origin >= 0) & ~view_job.fault).sum()),
                    achievable=achievable_hits(problem, view_job))
                if nodes is None:
                    res.reason = result.plan.reasons[j] or "not placed"
                    results.append(res)
                    continue
                gang = self.lifecycle.begin(sim.owner, self.now)
                for local, n in enumerate(nodes.tolist()):
                    rank = ranks[local]
                    name = problem.node_names[n]
                    origin = int(view_job.origin[local])
                    if origin < 0:
                        res.new += 1
                    elif origin != n:
                        res.moved += 1
                    elif view_job.fault[local]:
                        res.fault_returns += 1
                    else:
                        res.hits += 1
                    res.nodes.append(name)
                    sim.placed[rank] = name
                    self.free[name] -= sim.spec.npu_per_task
                    gang.allocate(rank, name)
                gang.commit()
                sim.fault = set()
                res.pulls_avoided_gb = res.hits * sim.spec.image_size_gb
                results.append(res)
        cache = self.lifecycle.cache
        return SessionReport(
            index=spec.index, name=spec.name, now=self.now, elapsed=self.now - self.start,
            events=applied, cache_start="cold" if start.cold else "warm",
            cache_rebuilt=start.rebuilt, cache_evicted=sorted({*start.evicted, *expired}),
            cache_entries=sum(len(cache.get_map(o) or {}) for o in cache.owners())
            if cache is not None else 0,
            cache_states=self.lifecycle.counts(), engine=engine_used, status=status,
            jobs=results)

    def final_state(self) -> Scenario:
        """The cluster after the last session, as a scenario (``--save-state``)."""
        pending: list[Job] = []
        running: list[RunningJob] = []
        for sim in self.jobs.values():
            if sim.desired > 0 and not sim.placed:
                pending.append(_job_with(sim.spec, tasks=sim.desired,
                                         **{"fault-ranks": sorted(sim.fault)}))
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
                    "ub-memory": spec.ub_memory,
                }.items() if v is not None}))
        return self.scenario_now(pending, list(self.lifecycle.to_model().entries), running)


def simulate(
    scenario: Scenario,
    events: Any,
    engine: str = "greedy",
    time_limit: float = 10.0,
    workers: int = 1,
    seed: int = 0,
    *,
    scenario_source: str = "<scenario>",
    events_source: str = "<events>",
    progress: Callable[[SessionReport], None] | None = None,
) -> SimulationReport:
    """Run a multi-session simulation.

    Parameters
    ----------
    scenario
        The starting cluster (validated scenario).
    events
        The events document (plain data: a list of sessions) or parsed sessions.
    engine
        ``greedy``, ``cpsat`` or ``auto`` (passed to :func:`solver.facade.solve`).
    time_limit, workers, seed
        Per-session solver settings.
    scenario_source, events_source
        File names used in messages and in the report.
    progress
        Called with each session's report as it completes.

    Returns
    -------
    SimulationReport
        Per-session numbers and the final state.

    Raises
    ------
    InputError
        When the events are malformed or do not fit the cluster (file, session, event and
        field named in each message).
    """
    if isinstance(events, list) and all(isinstance(s, SessionSpec) for s in events) and events:
        sessions: list[SessionSpec] = list(events)
    else:
        sessions = parse_events(events, events_source, scenario)
    sim = _Simulation(scenario, scenario_source, events_source)
    reports = []
    for spec in sessions:
        report = sim.run_session(spec, engine, time_limit, workers, seed)
        reports.append(report)
        if progress is not None:
            progress(report)
    return SimulationReport(scenario_source, events_source, engine, reports, sim.final_state())


# --------------------------------------------------------------------------- plot / CLI


def plot_report(report: SimulationReport, path: str | Path) -> None:
    """Write a PNG: hit rate (line, left axis) and pending jobs (bars, right axis) per session.

    Raises
    ------
    ImportError
        When matplotlib is not installed.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(6.0, 0.7 * len(report.sessions) + 3.0), 4.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    xs = [s.index for s in report.sessions]
    rates = [math.nan if s.hit_rate is None else 100.0 * s.hit_rate for s in report.sessions]
    pending = [len(s.pending) for s in report.sessions]
    ax2 = ax.twinx()
    ax2.bar(xs, pending, width=0.5, color="tab:red", alpha=0.3, label="pending jobs")
    ax2.set_ylabel("pending jobs")
    ax2.set_ylim(0, max([*pending, 1]) * 1.5)
    ax.plot(xs, rates, marker="o", color="tab:blue", label="origin hit rate (%)")
    ax.axhline(80.0, color="tab:green", linestyle="--", linewidth=1, label="RFC target 80 %")
    ax.set_ylim(0, 105)
    ax.set_xlabel("session")
    ax.set_ylabel("hit rate (%) of re-placed pods with a previous node")
    ax.set_xticks(xs)
    ax.set_xticklabels([str(x) for x in xs])
    ax.set_zorder(ax2.get_zorder() + 1)
    ax.patch.set_visible(False)
    lines, labels = ax.get_legend_handles_labels()
    lines2, labels2 = ax2.get_legend_handles_labels()
    ax.legend(lines + lines2, labels + labels2, loc="lower left", fontsize="small")
    overall = _rate(report.hit_rate)
    ax.set_title(f"simulate ({report.engine}): overall hit rate {overall}")
    fig.tight_layout()
    fig.savefig(str(path), dpi=100)
