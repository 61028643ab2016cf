"""The messages between the serving process (:mod:`solver.service.pool`) and its worker
processes (:mod:`solver.service.worker`): one frozen dataclass per request and answer kind.

They cross a pipe pickled; each is sent whole, so a request's fields and an answer's
values are named where they are read (no positional tuples).

The serving process sends a :class:`Call` (a request id and one request); the worker
answers with messages that carry the same id:

* :class:`PlanRequest` → :class:`Parsed` (the scenario compiled, or the stored cluster's
  snapshot taken), then :class:`FallbackAnswer` (each time the facade publishes a better
  fallback plan: greedy's, then origin-first's or the kept answer's), then one
  :class:`FinalAnswer`.
* :class:`ValidateRequest`, :class:`PutCluster`, :class:`PatchCluster`,
  :class:`DumpCluster`, :class:`ExportCluster`, :class:`DeleteCluster` → one :class:`Reply`
  whose ``value`` is the request's answer kind (:class:`PutAnswer`, :class:`PatchAnswer`,
  :class:`DumpAnswer`, :class:`ExportAnswer`, :class:`DeleteAnswer`, or the validation
  document for :class:`ValidateRequest`).
* Any request may end with a :class:`Failure` instead.
* :class:`Exit` asks the worker to end (no answer).

A started worker sends :class:`Ready` once.  :class:`FinalAnswer`, :class:`Reply` and
:class:`Failure` are terminal: exactly one of them ends every request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

# --------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class PlanRequest:
    """Plan a scenario body, or a stored cluster (``body`` ``None``), by ``deadline``
    (a ``time.monotonic()`` value: system-wide on Linux)."""

    kind: ClassVar[str] = "plan"

    body: bytes | None
    cluster: str | None
    engine: str
    deadline: float
    seed: int
    deterministic_time: float | None

    @property
    def full_solve(self) -> bool:
        """Whether the plan runs the full solve (not greedy alone)."""
        return self.engine != "greedy"


@dataclass(frozen=True)
class ValidateRequest:
    """Check a ``{"scenario": ..., "placement": ...}`` body."""

    kind: ClassVar[str] = "validate"

    body: bytes


@dataclass(frozen=True)
class PutCluster:
    """Store (or replace) cluster ``name`` from a full scenario body.

    ``version`` is set by the serving process when the worker starts the request (every
    earlier request for the name has answered by then); ``states`` are the cache
    lifecycle's states of a compacted cluster being replayed.
    """

    kind: ClassVar[str] = "put"

    name: str
    body: bytes
    version: int = 0
    states: bytes | None = None


@dataclass(frozen=True)
class PatchCluster:
    """Apply a delta body to cluster ``name``; a replay passes the ``stamp`` its cache
    events were first stamped with."""

    kind: ClassVar[str] = "patch"

    name: str
    body: bytes
    stamp: int | None = None


@dataclass(frozen=True)
class DumpCluster:
    """The stored cluster as a full scenario (``GET .../scenario``)."""

    kind: ClassVar[str] = "dump"

    name: str


@dataclass(frozen=True)
class ExportCluster:
    """The stored cluster's scenario, version and cache states (log compaction)."""

    kind: ClassVar[str] = "export"

    name: str


@dataclass(frozen=True)
class DeleteCluster:
    """Forget cluster ``name``."""

    kind: ClassVar[str] = "delete"

    name: str


@dataclass(frozen=True)
class Exit:
    """The worker ends (retired by the serving process)."""

    kind: ClassVar[str] = "exit"


#: Every request the serving process sends.
Request = (PlanRequest | ValidateRequest | PutCluster | PatchCluster | DumpCluster
           | ExportCluster | DeleteCluster | Exit)


@dataclass(frozen=True)
class Call:
    """One request and its id, as sent over the pipe."""

    rid: int
    request: Request


def cluster_of(request: Request) -> str | None:
    """The stored cluster a request concerns (``None``: none)."""
    if isinstance(request, PlanRequest):
        return request.cluster
    name = getattr(request, "name", None)
    return name if isinstance(name, str) else None


# --------------------------------------------------------------------------- answers


@dataclass(frozen=True)
class Ready:
    """The worker has started; ``seconds`` is its warm-up solve's time (``None``: no
    warm-up), admission's first measured solve time."""

    seconds: float | None


@dataclass(frozen=True)
class Parsed:
    """The plan's scenario is compiled: its pending job names (the empty answer), and the
    stored cluster's version it was taken from (``None``: a body), which every later
    answer of the plan is valid for."""

    rid: int
    jobs: list[str]
    version: int | None


@dataclass(frozen=True)
class FallbackAnswer:
    """A fallback plan the facade published before its final answer (greedy's, then a
    better one: origin-first's or the kept answer's; ``placement["engine"]`` names it)."""

    rid: int
    placement: dict[str, Any]
    objective: int | None


@dataclass(frozen=True)
class FinalAnswer:
    """The plan's last answer.

    ``placement`` ``None``: the last fallback answer stands (a greedy-only plan, or the
    deadline had passed); with ``error`` the full solve failed after a fallback answer.
    ``models`` counts the CP-SAT models of the solve (``carried``, ``within``, ``built``:
    :class:`solver.model.reuse.ModelCounts`) when it ran CP-SAT.
    """

    rid: int
    placement: dict[str, Any] | None = None
    objective: int | None = None
    greedy_objective: int | None = None
    models: dict[str, int] | None = None
    error: str | None = None

    @property
    def fallback_stands(self) -> bool:
        """The plan ended normally with no answer of its own: the fallback is final."""
        return self.placement is None and self.error is None


@dataclass(frozen=True)
class PutAnswer:
    """A stored cluster: its summary (``ClusterInfo`` as JSON data) and whether it is new."""

    info: dict[str, Any]
    created: bool


@dataclass(frozen=True)
class PatchAnswer:
    """An applied delta: the new summary, the delta in compact JSON for the replay log
    and the time its cache events were stamped with."""

    info: dict[str, Any]
    log: bytes
    stamp: int | None


@dataclass(frozen=True)
class DumpAnswer:
    """The stored cluster as scenario JSON and its version."""

    scenario: bytes
    version: int


@dataclass(frozen=True)
class ExportAnswer:
    """The stored cluster's compact scenario JSON, version and cache states JSON."""

    scenario: bytes
    version: int
    states: bytes


@dataclass(frozen=True)
class DeleteAnswer:
    """Whether the worker held the cluster, and its last version."""

    deleted: bool
    version: int | None


@dataclass(frozen=True)
class Reply:
    """The answer of a request other than a plan."""

    rid: int
    value: Any


@dataclass(frozen=True)
class Failure:
    """The request failed: an HTTP status, a short error and one message per problem."""

    rid: int
    status: int
    error: str
    messages: list[str] = field(default_factory=list)


#: Every answer a worker sends.
Answer = Ready | Parsed | FallbackAnswer | FinalAnswer | Reply | Failure
#: The answers that end a request.
TERMINAL = (FinalAnswer, Reply, Failure)
