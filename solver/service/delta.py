"""The documents of a stored cluster's routes: the delta a ``PATCH`` sends
(:class:`ClusterDelta`: node updates, jobs, cache events) and the summary every cluster
route answers (:class:`ClusterInfo`); how a delta is applied is :mod:`solver.service.state`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from models.limits import (
    MAX_CACHE_ENTRIES,
    MAX_JOBS,
    MAX_LABELS,
    MAX_NODES,
    MAX_TASKS,
    MAX_TIMESTAMP,
    Name,
    Text,
    escape_text,
)
from models.scenario import (
    MAX_ID,
    MAX_NODE_IMAGES,
    MAX_NODE_NPUS,
    AffinityCacheModel,
    CacheEntry,
    Config,
    Health,
    ImageSizeGb,
    Job,
    Node,
    RunningJob,
    VnpuChip,
    VnpuJob,
)


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)


class NodeUpdate(_Model):
    """A change to one existing node; fields left out keep their value.

    ``super-pod-id`` / ``rack-id`` set to a negative number take the node out of its super
    pod / rack (the contract's "in none"); ``labels`` replaces the whole label map.  The
    updated node is checked by the rules of :class:`~models.scenario.Node` itself (bounds,
    label text), then the scenario's cross-field rules, as a full body would be.
    """

    name: Name = Field(min_length=1)
    free: int | None = None
    health: Health | None = None
    npus: int | None = Field(None, gt=0, le=MAX_NODE_NPUS)
    super_pod_id: int | None = Field(None, alias="super-pod-id", le=MAX_ID)
    rack_id: int | None = Field(None, alias="rack-id", le=MAX_ID)
    labels: dict[str, Any] | None = Field(
        None, max_length=MAX_LABELS,
        description="the node's new label map, checked as a node's labels")
    vnpu_chips: list[VnpuChip] | None = Field(
        None, alias="vnpu-chips", max_length=MAX_NODE_NPUS,
        description="a vNPU node's new chip list (nodes[].vnpu.chips: each chip's free AI "
                    "cores and CPUs, segmented, DVPP state, unstable), replacing the old one")
    unfinished_templates: list[Text] | None = Field(
        None, alias="unfinished-templates", max_length=64,
        description="a vNPU node's new unfinished-templates (nodes[].vnpu)")
    images: dict[Text, ImageSizeGb] | None = Field(
        None, max_length=MAX_NODE_IMAGES,
        description="the images the node holds now, name -> GB (nodes[].images, image "
                    "locality), replacing the old map; {} for none")


class CacheEventKind(StrEnum):
    """Previous-node cache events (the RFC's lifecycle)."""

    BIND = "bind"  # NPUAllocateFunc: record (owner, rank) -> node
    EVICT = "evict"  # NPUDeallocateFunc, Releasing: keep the entry
    DISCARD = "discard"  # NPUDeallocateFunc, Pending: roll the last record back
    DELETE_OWNER = "delete-owner"  # the job was deleted: forget its entries
    REFRESH = "refresh"  # the owner is present in this session: its time becomes now


class CacheEvent(_Model):
    """One cache event; ``rank`` is needed by bind/evict/discard, ``node`` by bind.

    Owner, rank and node have the bounds of an ``affinity-cache`` entry.
    """

    event: CacheEventKind
    owner_uid: Name = Field(alias="owner-uid", min_length=1)
    rank: int | None = Field(None, ge=0, lt=MAX_TASKS)
    node: Name | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _needs(self) -> CacheEvent:
        needs_rank = (CacheEventKind.BIND, CacheEventKind.EVICT, CacheEventKind.DISCARD)
        if self.event in needs_rank and self.rank is None:
            raise ValueError(f"a '{self.event.value}' event needs 'rank'")
        if self.event is CacheEventKind.BIND and self.node is None:
            raise ValueError("a 'bind' event needs 'node'")
        return self


class CacheOwner(_Model):
    """One owner's ``affinity-cache`` entries as they are now (``affinity-cache-owners``).

    ``entries`` are entries of the scenario's ``affinity-cache`` section, each of this
    ``owner-uid`` and with its own time; ``[]`` means the owner has no entry any more.
    """

    owner_uid: Name = Field(alias="owner-uid", min_length=1)
    entries: list[CacheEntry] = Field(
        default_factory=list, max_length=MAX_TASKS,
        description="the owner's affinity-cache entries, replacing its stored ones")


class ClusterDelta(_Model):
    """Changes to a stored cluster since the last call.

    Applied in this order: ``now``, ``nodes-removed``, ``nodes-added``, ``node-updates``,
    ``jobs-removed``, ``jobs-submitted``, ``vnpu-jobs-removed``, ``vnpu-jobs-submitted``,
    ``running-removed``, ``running-submitted``, ``jobs-order``, ``running-order``,
    ``config``, ``affinity-cache`` or ``affinity-cache-owners``, ``cache-events``.
    Submitted jobs and running jobs go last unless ``jobs-order`` / ``running-order`` name
    every item of their section in the new order (so that a changed job keeps its place
    without every job after it being sent again).  Removing and submitting a vNPU job (or
    a running job, or a node) of the same name in one delta replaces it.  ``config`` and
    ``affinity-cache`` replace the whole section; ``affinity-cache-owners`` replaces the
    named owners' entries only (the section stays ordered by owner): what a watcher of
    the cluster sends when the importer's answer changed there (``npu-place watch``,
    docs/watch.md).  A delta is applied whole or not at all: it is applied to a copy, the
    result must pass every rule a full scenario body passes, and only then does it
    replace the stored cluster.
    """

    now: int | None = Field(None, ge=0, le=MAX_TIMESTAMP,
                            description="the session time (unix seconds)")
    expect_version: int | None = Field(
        None, alias="expect-version",
        description="refuse the delta (409) unless the cluster is at this version")
    node_updates: list[NodeUpdate] = Field(default_factory=list, alias="node-updates",
                                           max_length=MAX_NODES)
    nodes_added: list[Node] = Field(default_factory=list, alias="nodes-added",
                                    max_length=MAX_NODES)
    nodes_removed: list[Name] = Field(default_factory=list, alias="nodes-removed",
                                      max_length=MAX_NODES)
    jobs_submitted: list[Job] = Field(default_factory=list, alias="jobs-submitted",
                                      max_length=MAX_JOBS)
    jobs_removed: list[Name] = Field(default_factory=list, alias="jobs-removed",
                                     max_length=MAX_JOBS)
    vnpu_jobs_submitted: list[VnpuJob] = Field(
        default_factory=list, alias="vnpu-jobs-submitted", max_length=MAX_JOBS,
        description="new pending dynamic-vNPU jobs (entries of vnpu-jobs)")
    vnpu_jobs_removed: list[Name] = Field(
        default_factory=list, alias="vnpu-jobs-removed", max_length=MAX_JOBS,
        description="names of pending vNPU jobs to remove (placed, deleted or replaced)")
    running_submitted: list[RunningJob] = Field(
        default_factory=list, alias="running-submitted", max_length=MAX_JOBS,
        description="running jobs added (or replaced, with running-removed)")
    running_removed: list[Name] = Field(
        default_factory=list, alias="running-removed", max_length=MAX_JOBS,
        description="names of running jobs to remove (finished, evicted or replaced)")
    jobs_order: list[Name] | None = Field(
        None, alias="jobs-order", max_length=MAX_JOBS,
        description="the pending jobs' names in their new order, once each (after "
                    "jobs-removed and jobs-submitted; without it, submitted jobs go last)")
    running_order: list[Name] | None = Field(
        None, alias="running-order", max_length=MAX_JOBS,
        description="the running jobs' names in their new order, once each (after "
                    "running-removed and running-submitted)")
    config: Config | None = Field(
        None, description="the scheduler configuration replacing the stored one")
    affinity_cache: AffinityCacheModel | None = Field(
        None, alias="affinity-cache",
        description="the whole affinity-cache section replacing the stored one (the "
                    "entries' lifecycle states become 'kept'); cache-events apply after it")
    affinity_cache_owners: list[CacheOwner] = Field(
        default_factory=list, alias="affinity-cache-owners", max_length=MAX_CACHE_ENTRIES,
        description="owners whose affinity-cache entries are replaced by the ones given, "
                    "each named once (entries: [] forgets the owner); the other owners' "
                    "entries and states stay; the section stays ordered by owner uid, each "
                    "owner's entries in the order given; not with affinity-cache; "
                    "cache-events apply after it")
    cache_events: list[CacheEvent] = Field(default_factory=list, alias="cache-events",
                                           max_length=MAX_CACHE_ENTRIES)

    @field_validator("affinity_cache_owners")
    @classmethod
    def _owners_bounded(cls, owners: list[CacheOwner]) -> list[CacheOwner]:
        total = sum(len(owner.entries) for owner in owners)
        if total > MAX_CACHE_ENTRIES:
            raise ValueError(f"{total} entries in all; a cache section holds at most "
                             f"{MAX_CACHE_ENTRIES}")
        return owners


class ClusterInfo(_Model):
    """A stored cluster's summary (the answer of PUT, PATCH and GET)."""

    name: str
    version: int
    nodes: int
    jobs: int = Field(description="pending jobs of the scenario's jobs list (whole NPUs); "
                      "with vnpu-jobs, every pending job is counted once")
    vnpu_jobs: int = Field(0, alias="vnpu-jobs", description="pending vNPU jobs")
    cache_entries: int = Field(alias="cache-entries")
    cache_states: dict[str, int] = Field(default_factory=dict, alias="cache-states")
    now: int | None = None
    last_update: str = Field("full", alias="last-update",
                             description="values, jobs, structure, full or none")
    apply_seconds: float = Field(0.0, alias="apply-seconds")
    notes: list[str] = Field(default_factory=list)


def delta_messages(exc: ValidationError, where: str = "") -> list[str]:
    """pydantic errors as ``<delta>: field 'node-updates[0].npus': <message>`` lines.

    ``where`` prefixes the location (the item a nested model was validated for).
    """
    out = []
    for error in exc.errors():
        loc = ""
        for part in (where, *error["loc"]) if where else error["loc"]:
            loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
        text = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            text = "unknown field"
        value = error.get("input")
        if isinstance(value, (int, float, bool)) or (isinstance(value, str)
                                                     and len(value) <= 60):
            text = f"{text} (got {value!r})"
        out.append(escape_text(f"<delta>: field '{loc or '(the delta)'}': {text}", 2000))
    return out
