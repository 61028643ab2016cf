"""The events file of ``simulate``: event types, their bounds, and parsing into sessions."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from models.limits import (
    MAX_ADVANCE_SECONDS,
    MAX_EVENTS_PER_SESSION,
    MAX_SESSIONS,
    MAX_TASKS,
    LimitError,
    Name,
    check_text,
    escape_text,
    listing,
)
from models.scenario import MAX_NODE_NPUS, Health, Job, Scenario, VnpuJob
from models.validation import InputError, derive_shape
from models.vnpu_rules import validate_vnpu


class EventBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: ClassVar[str] = ""

    def describe(self) -> str:
        """A short human description."""
        return self.kind


class EvictEvent(EventBase):
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
            raise ValueError(f"ranks {listing(bad)} are negative")
        if len(set(value)) != len(value):
            raise ValueError("a rank is listed twice")
        return value

    def describe(self) -> str:
        what = f"ranks {listing(self.ranks)}" if self.ranks else "all ranks"
        return f"evict {self.job} ({what}{'; fault' if self.fault else ''})"


class DeleteJobEvent(EventBase):
    """Delete a job (and, unless ``keep-cache``, its owner's cache entries)."""

    kind: ClassVar[str] = "delete-job"
    job: Name = Field(alias="delete-job", min_length=1)
    keep_cache: bool = Field(False, alias="keep-cache")

    def describe(self) -> str:
        return f"delete-job {self.job}{' (cache kept)' if self.keep_cache else ''}"


class ScaleEvent(EventBase):
    """Scale a job to ``tasks`` ranks."""

    kind: ClassVar[str] = "scale"
    job: Name = Field(alias="scale", min_length=1)
    tasks: int = Field(ge=0, le=MAX_TASKS)

    def describe(self) -> str:
        return f"scale {self.job} to {self.tasks}"


class SubmitEvent(EventBase):
    """Submit a new pending job."""

    kind: ClassVar[str] = "submit"
    job: Job = Field(alias="submit")

    def describe(self) -> str:
        return f"submit {self.job.name} ({self.job.tasks} x {self.job.npu_per_task} NPUs)"


class SubmitVnpuEvent(EventBase):
    """Submit a new pending dynamic-vNPU job (an entry of ``vnpu-jobs``)."""

    kind: ClassVar[str] = "submit-vnpu"
    job: VnpuJob = Field(alias="submit-vnpu")

    def describe(self) -> str:
        what = (f"{self.job.ai_cores} AI cores" if self.job.ai_cores is not None
                else f"template {self.job.template}")
        return f"submit-vnpu {self.job.name} ({self.job.tasks} x {what})"


class NodeEvent(EventBase):
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


_DURATION = re.compile(r"\s*(-?[0-9]+)\s*([smhd]?)\s*")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class AdvanceEvent(EventBase):
    """Move the clock forward."""

    kind: ClassVar[str] = "advance"
    seconds: int = Field(alias="advance", le=MAX_ADVANCE_SECONDS)

    @field_validator("seconds", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("expected a number of seconds")
        if isinstance(value, str):
            match = _DURATION.fullmatch(value)
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


class RestartEvent(EventBase):
    """The scheduler restarts: the cache is lost."""

    kind: ClassVar[str] = "restart"
    restart: bool = True

    def describe(self) -> str:
        return "scheduler restart (cache lost)"


Event = EvictEvent | DeleteJobEvent | ScaleEvent | SubmitEvent | SubmitVnpuEvent \
    | NodeEvent | AdvanceEvent | RestartEvent
EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (EvictEvent, DeleteJobEvent, ScaleEvent, SubmitEvent, SubmitVnpuEvent,
                NodeEvent, AdvanceEvent, RestartEvent)
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
    jobs: set[str] = ({job.name for job in scenario.jobs} | {r.name for r in scenario.running}
                      | {v.name for v in scenario.vnpu_jobs})
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
            events.append(event)
        sessions.append(SessionSpec(s, name, tuple(events)))
    if messages:
        raise InputError(messages)
    return sessions


def _check_event(event: EventBase, where: str, node_names: set[str], jobs: set[str],
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
    elif isinstance(event, SubmitVnpuEvent):
        if event.job.name in jobs:
            out.append(f"{where}: field 'submit-vnpu.name': job '{event.job.name}' already "
                       "exists")
        probe = scenario.model_copy(update={"jobs": [], "running": [],
                                            "vnpu_jobs": [event.job]})
        out.extend(f"{where}: field 'submit-vnpu{_vnpu_field(m)}': {_vnpu_text(m)}"
                   for m in validate_vnpu(probe, "", set()) if "vnpu job '" in m)
        jobs.add(event.job.name)
    elif isinstance(event, NodeEvent):
        if event.node not in node_names:
            out.append(f"{where}: field 'node': unknown node '{event.node}'")
        if event.health is None and event.free is None:
            out.append(f"{where}: field 'node': give 'health' and/or 'free'")
    return out


def _vnpu_field(message: str) -> str:
    """``.ai-cores`` from a :func:`models.vnpu_rules.validate_vnpu` line."""
    return "." + message.split("field '", 1)[1].partition("': ")[0] \
        if "field '" in message else ""


def _vnpu_text(message: str) -> str:
    """The text of a :func:`models.vnpu_rules.validate_vnpu` line."""
    return message.split("field '", 1)[1].partition("': ")[2] if "field '" in message \
        else message
