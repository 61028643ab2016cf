"""Volcano's allocate/deallocate events, bounded before anything of them is kept.

The extender keeps what ``allocateFunc`` says across sessions (the previous-node cache of
:class:`heuristics.lifecycle.CacheLifecycle`, or the stored cluster's cache in own-view
mode); every later session writes that cache back as a scenario section, whose models
refuse a rank of 65,536 or a node name with a NUL.  So an event's values go through the
importer's bounds here, before they are used: a rank in ``[0, MAX_TASKS)``, node, job and
task names of at most :data:`~models.limits.MAX_NAME_CHARS` printable characters.  An
event outside them is dropped with the reason (:func:`read_event`), never stored.

:func:`invalid_entry` is the same check for an entry already in the cache: the session
open drops such an entry (logged) rather than failing on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from models.limits import MAX_NAME_CHARS, MAX_TASKS, LimitError, check_text, escape_text
from solver.service.extender.protocol import STATUS_RELEASING, task_identity


@dataclass(frozen=True)
class TaskEvent:
    """The bounded values of one allocate or deallocate event.

    Attributes
    ----------
    job
        Volcano's job id (``<namespace>/<podgroup>``).
    rank
        The task's rank, ``None`` when the pod carries none (the event then concerns no
        cache entry).
    uid
        The task's UID (may be empty).
    node
        ``TaskInfo.NodeName`` (``allocateFunc``; ``None`` when not given).
    status
        ``TaskInfo.Status`` when it is an integer, else ``None``.
    """

    job: str
    rank: int | None
    uid: str
    node: str | None
    status: int | None


class EventRefused(ValueError):
    """An event whose values are outside the bounds: ``field`` names the value."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _name(value: Any, field: str, required: bool) -> str:
    if value is None or value == "":
        if required:
            raise EventRefused(field, "missing or empty")
        return ""
    if not isinstance(value, str):
        raise EventRefused(field, f"expected a string, got {type(value).__name__}")
    try:
        return check_text(value, MAX_NAME_CHARS)
    except LimitError as exc:
        raise EventRefused(field, str(exc)) from None


def read_event(body: Any, *, allocate: bool) -> TaskEvent:
    """The values of an ``allocateFunc`` (``allocate``) or ``deallocateFunc`` body.

    Raises
    ------
    EventRefused
        A body without a task object; a job id, task UID or (``allocate``) node name that
        is not a string of at most :data:`~models.limits.MAX_NAME_CHARS` printable
        characters; a rank outside ``[0, MAX_TASKS)``.
    """
    task = body.get("task") if isinstance(body, dict) else None
    if not isinstance(task, dict):
        raise EventRefused("task", "missing or not an object")
    raw_job = task.get("Job")
    if raw_job not in (None, "") and not isinstance(raw_job, str):
        raise EventRefused("task.Job", f"expected a string, got {type(raw_job).__name__}")
    uid = _name(task.get("UID"), "task.UID", required=False)
    job, rank, _ = task_identity(task)
    job = _name(job, "task.Job", required=False)
    if rank is not None and not 0 <= rank < MAX_TASKS:
        raise EventRefused("task.Pod rank", f"rank {rank} is outside 0 .. {MAX_TASKS - 1} "
                           "(the importer's bound on ranks)")
    node = _name(task.get("NodeName"), "task.NodeName", required=False) if allocate else None
    status = task.get("Status")
    return TaskEvent(job, rank, uid, node or None,
                     status if isinstance(status, int) and not isinstance(status, bool)
                     else None)


def invalid_entry(owner: str, rank: int, node: str, previous: str | None) -> str | None:
    """Why a cache entry is outside the bounds of a scenario's ``affinity-cache``
    (``None`` when it is within them)."""
    if not 0 <= rank < MAX_TASKS:
        return f"rank {rank} is outside 0 .. {MAX_TASKS - 1}"
    for field, value in (("owner", owner), ("node", node), ("previous node", previous)):
        if value is None or (field == "previous node" and value == ""):
            continue
        if not isinstance(value, str) or not value:
            return f"{field} is empty or not a string"
        try:
            check_text(value, MAX_NAME_CHARS)
        except LimitError as exc:
            return f"{field} {exc}"
    return None


def describe_event(body: Any) -> str:
    """A short, printable description of an event for a log line."""
    task = body.get("task") if isinstance(body, dict) else None
    if not isinstance(task, dict):
        return "(no task)"
    parts = [f"{key}={escape_text(str(task.get(key)), 80)}" for key in ("Job", "UID", "Name")
             if task.get(key) is not None]
    return " ".join(parts) or "(task without Job, UID or Name)"


def own_view_event(owners: dict[str, str], body: dict[str, Any], status: int | None
                   ) -> dict[str, Any] | None:
    """The stored cluster's cache event of an allocate (``status`` ``None``) or deallocate
    event (own-view mode), ``owners`` the session's job -> owner uid; ``None`` when it
    concerns no cached job (or the event is refused: dropped and counted by the verb)."""
    try:
        event = read_event(body, allocate=status is None)
    except EventRefused:
        return None
    owner = owners.get(event.job)
    rank, node = event.rank, event.node
    if owner is None or rank is None:
        return None
    if status is None:
        if node is None:
            return None
        return {"event": "bind", "owner-uid": owner, "rank": rank, "node": node}
    kind = "evict" if status == STATUS_RELEASING else "discard"
    return {"event": kind, "owner-uid": owner, "rank": rank}
