"""Stateful clusters: a scenario and its compiled :class:`~models.compiled.Problem`, kept
between plan calls and updated by deltas.

A scheduler daemon calls the service once per session (about once a second).  Sending and
re-parsing an 8,000-node scenario every time costs more than the greedy answer itself, so a
cluster is ``PUT`` once and then moved forward by small :class:`ClusterDelta` documents.
A delta is applied to a copy and must produce a scenario that passes every rule a full
body passes (one set of rules however a scenario arrives); only then does it replace the
stored cluster, so a refused delta leaves it byte-identical.  It is applied in three tiers,
each paying only for what changed:

``values``
    Only ``free``, ``health`` and ``images`` of existing nodes and ``now`` changed, and
    ``now`` expires or revives no cache owner: the node arrays are copied and patched
    (``O(nodes)`` memory copy), the image holders of the changed images patched
    (:func:`models.compiled.patch_image_holders`); the rules those fields take part in are
    checked on the changed nodes (:func:`models.validation.node_value_problems`: ``free``
    within ``0..npus`` and, with the running jobs' chips, not above ``npus``; an image's
    size is bounded by :class:`NodeUpdate` itself).  ``now`` is read by nothing but the
    live cache (an owner is live while its newest entry is not older than ``now -
    ttl-seconds``), so a ``now`` under which the same owners are live leaves the compiled
    jobs as they are: :func:`same_live_owners` decides it from the owners' sorted newest
    times (:func:`owner_times`, computed once per cache) by two binary searches.
``jobs``
    Jobs or vNPU jobs were submitted or removed, cache events arrived, ``now`` moved across
    an owner's expiry, or a vNPU node's chips (``vnpu-chips``, ``unfinished-templates``)
    changed: the cross-field rules run again (they are cheap; the vNPU rules of
    :func:`models.vnpu_rules.validate_vnpu` among them) and only the jobs and the live
    cache are recompiled (:func:`models.compiled.compile_jobs`); node arrays and
    multilevel trees are reused (a vNPU node offers no free chip to the other jobs, so
    its chips are not in the arrays; the vNPU view is rebuilt from the new scenario).
    Cache events, ``affinity-cache-owners`` and ``now`` moves pay for the owners they
    change (:mod:`solver.service.cache_view`): the cache section is written by replacing the
    touched owners' entries (checked alone; the others held), the live cache keeps every
    unchanged owner's map, and when no job changed the rules are not run again and only
    the jobs whose owner's live entries changed get a new origin.  The first cache event
    after a ``PUT`` whose section is not in the order the cache writes writes it whole.
    Jobs and running jobs removed and submitted (a watcher's pod events) check only the
    rules the submitted items take part in (:func:`models.validation.submitted_shapes`)
    and compile only the submitted jobs that differ from the removed ones; a job
    submitted again unchanged, or moved by ``jobs-order``, keeps its compiled view.  The
    running ranks' chips per node, which ``free`` is checked against, are moved by the
    items a delta changes (:mod:`solver.service.running_view`), not counted again.
``structure``
    Nodes were added or removed, or a node's ``npus``, ``super-pod-id``, ``rack-id`` or
    ``labels`` changed: the in-memory scenario is compiled again (no JSON parsing).

The previous-node cache follows the RFC's lifecycle through
:class:`heuristics.lifecycle.CacheLifecycle`: ``bind`` records an allocation (the old node
becomes the rollback anchor), ``evict`` releases a pod and keeps its entry, ``discard``
rolls a discarded allocation back, ``delete-owner`` forgets a deleted job's entries and
``refresh`` sets an owner's time to ``now``.

The delta and summary documents are :mod:`solver.service.delta`'s (re-exported here).

Every applied delta yields a new immutable :class:`ClusterSnapshot`; a plan that started on
an older snapshot finishes on it, so deltas and plans never block each other for long.

What a plan leaves for the next one (the last answer as a warm start, the built CP-SAT
models: :class:`solver.reuse.SolveCache`) is not part of a snapshot: the worker process
keeps one cache per stored cluster next to its :class:`ClusterStore`
(``solver.service.worker.Worker.solve_caches``), hands it to ``solve(..., cache=)`` and
drops it on a ``PUT`` or ``DELETE``.  A delta leaves it in place; the solve decides what
still fits the new problem (:mod:`solver.reuse`, :mod:`solver.model.reuse`).

Why this file is long: (about 900 lines) applying a delta (the section edits, the cache
events and one function per tier) and the cluster that holds the result share the
private records of one application (:class:`_Edit`, :class:`_CacheChange`,
:class:`_Applied`); the cache section's incremental view is
:mod:`solver.service.cache_view`'s and the documents are :mod:`solver.service.delta`'s.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from pydantic import ValidationError

from heuristics.lifecycle import CacheLifecycle, EntryState
from models.compiled import (
    HEALTHY,
    SUBHEALTHY,
    UNHEALTHY,
    Problem,
    compile_job,
    compile_jobs,
    compile_scenario,
    job_origin,
    job_queue,
    patch_image_holders,
    scenario_now,
)
from models.limits import escape_text
from models.scenario import (
    AffinityCacheModel,
    Health,
    Job,
    Node,
    RunningJob,
    Scenario,
    VnpuJob,
)
from models.validation import (
    InputError,
    JobShape,
    node_value_problems,
    submitted_shapes,
    validate_scenario,
)
from solver.service.cache_view import (
    CacheView,
    cache_view,
    owner_state_counts,
    owner_times,
    patch_cache,
    patch_live,
    remember_view,
    replace_owners,
    same_live_owners,
)
from solver.service.delta import (
    CacheEvent,
    CacheEventKind,
    ClusterDelta,
    ClusterInfo,
    NodeUpdate,
    delta_messages,
)
from solver.service.running_view import carry_chips, chips_after, chips_of, remember_chips

__all__ = ["CacheEvent", "CacheEventKind", "Cluster", "ClusterDelta", "ClusterInfo",
           "ClusterSnapshot", "ClusterStore", "NodeUpdate", "VersionConflict", "apply_delta",
           "delta_messages", "owner_times", "recompile_jobs", "same_live_owners"]

_HEALTH_CODE = {Health.HEALTHY: HEALTHY, Health.SUBHEALTHY: SUBHEALTHY,
                Health.UNHEALTHY: UNHEALTHY}
#: Node fields whose change only needs the node arrays patched.
_VALUE_FIELDS = frozenset({"free", "health", "images"})
#: Node fields that change a vNPU node's chips (``nodes[].vnpu``): the jobs tier.
_VNPU_FIELDS = frozenset({"vnpu_chips", "unfinished_templates"})
#: A pending or running job of a delta.
_Item = TypeVar("_Item", Job, RunningJob)


class VersionConflict(Exception):
    """``expect-version`` does not match the cluster's version."""


@dataclass(frozen=True, eq=False)
class ClusterSnapshot:
    """One immutable version of a cluster: what a plan call reads."""

    name: str
    version: int
    problem: Problem


def _shapes(problem: Problem) -> dict[str, JobShape]:
    return {job.name: JobShape(policy=job.policy, family=job.family, whole_node=job.whole_node,
                               node_npus=job.node_npus, sp_block=job.sp_block,
                               tp_block=job.tp_block, levels=job.levels, soft=job.soft)
            for job in problem.jobs}


def recompile_jobs(problem: Problem, scenario: Scenario,
                   shapes: dict[str, JobShape] | None = None,
                   nodes_unchanged: bool = False, cache_checked: bool = False,
                   live: dict[str, dict[int, str]] | None = None) -> Problem:
    """A new problem with ``scenario``'s jobs, cache and ``now``; nodes and trees reused.

    ``scenario`` must have the same nodes (names and order) as ``problem.scenario``.
    Without ``shapes`` the cross-field rules run again (raising :class:`InputError`);
    with ``nodes_unchanged`` (no node's ``free`` or ``health`` changed either) the rules
    on the nodes alone are not run again: they held on the stored cluster; with
    ``cache_checked`` the cache entries' rules neither (the entries held, or the changed
    ones were checked: :func:`~solver.service.cache_view.patch_cache`).  ``live`` is the
    live cache of ``scenario`` at its ``now`` when the caller knows it.
    """
    if shapes is None:
        shapes, messages = validate_scenario(
            scenario, "<delta>", problem.node_index if nodes_unchanged else None,
            cache_checked=cache_checked)
        if messages:
            raise InputError(messages)
    now = scenario_now(scenario)
    jobs, live = compile_jobs(scenario, shapes, problem.node_index, now, live)
    return replace(problem, scenario=scenario, now=now, jobs=jobs,
                   job_index={job.name: j for j, job in enumerate(jobs)},
                   queue=job_queue(jobs), live=live)


@dataclass
class _Applied:
    scenario: Scenario
    problem: Problem
    lifecycle: CacheLifecycle
    tier: str
    notes: list[str]
    stamp: int | None = None  # the time cache events were stamped with (None: no events)
    #: the owners whose cache entries changed (``None``: any may have)
    touched: frozenset[str] | None = frozenset()


@dataclass
class _Edit:
    """A delta's changes to the sections of a stored scenario, before the cache events:
    what :func:`apply_delta` decides the tier from."""

    scenario: Scenario
    now: int | None
    now_moved: bool
    nodes: list[Node]
    removed: set[str]
    #: nodes added, removed or changed in a field other than the node values
    structural: bool = False
    #: positions of nodes whose values (``free``, ``health``, ``images``) alone changed
    changed: list[int] = field(default_factory=list)
    #: node name -> index of its update in ``node-updates`` (for messages)
    changed_where: dict[str, int] = field(default_factory=dict)
    #: a vNPU node's chips changed (the scenario's nodes, not the node arrays)
    vnpu_changed: bool = False
    jobs: list[Job] = field(default_factory=list)
    vnpu_jobs: list[VnpuJob] = field(default_factory=list)
    #: the jobs, the vNPU jobs or a vNPU node's chips changed
    jobs_edited: bool = False
    #: the vNPU jobs or a vNPU node's chips changed (the vNPU rules run again)
    vnpu_edited: bool = False
    running: list[RunningJob] = field(default_factory=list)
    #: the pending and running jobs the delta submitted that differ from a removed one
    #: of their name (the others are the stored items again, in a new place)
    jobs_new: list[Job] = field(default_factory=list)
    running_new: list[RunningJob] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def say(self, where: str, text: str) -> None:
        """Record a problem of the delta at ``where`` (a field path)."""
        self.errors.append(escape_text(f"<delta>: {where}: {text}", 2000))


@dataclass
class _CacheChange:
    """The cache after a delta's cache events (and removed nodes)."""

    model: AffinityCacheModel
    lifecycle: CacheLifecycle
    stamp: int | None = None
    #: owners whose entries changed (``None``: the section was written whole)
    touched: frozenset[str] | None = frozenset()
    #: the new cache section's view, when only the touched owners' entries were written
    view: CacheView | None = None


def apply_delta(problem: Problem, lifecycle: CacheLifecycle, delta: ClusterDelta,
                stamp: int | None = None) -> _Applied:
    """Apply ``delta`` to a compiled cluster without touching the inputs.

    The result passes every rule a full scenario body passes: changed nodes are checked
    by :class:`~models.scenario.Node`, the new scenario by
    :class:`~models.scenario.Scenario` (its bounds and section sizes) and the
    cross-field rules run again (all of :func:`models.validation.validate_scenario` in
    the ``jobs`` and ``structure`` tiers; in the ``values`` tier, where only ``free`` and
    ``health`` changed, the rules those two fields take part in,
    :func:`models.validation.node_value_problems`).  The sections are edited first
    (:func:`_edit_nodes`, :func:`_edit_jobs`), then the cache events applied
    (:func:`_apply_cache_events`); the tier that is paid builds the new problem
    (:func:`_structure_tier`, :func:`_jobs_tier`, :func:`_values_tier`).

    Parameters
    ----------
    problem
        The cluster's current compiled problem (its ``scenario`` is the current scenario).
    lifecycle
        The cluster's cache lifecycle; never changed (cache events go to a copy).
    delta
        The changes.
    stamp
        The time cache events are stamped with; default: the delta's or scenario's
        ``now``, else the clock.  A replay passes the stamp of the first application, so
        that it rebuilds the same cache.

    Returns
    -------
    _Applied
        The new scenario, problem and lifecycle, the tier that was paid (``values``,
        ``jobs``, ``structure`` or ``none``), notes and the stamp used.

    Raises
    ------
    InputError
        With every problem found, each naming the delta field and the node, job or event.
    """
    scenario = problem.scenario
    edit = _Edit(scenario=scenario,
                 now=delta.now if delta.now is not None else scenario.now,
                 now_moved=delta.now is not None and delta.now != scenario.now,
                 nodes=list(scenario.nodes), removed=set(delta.nodes_removed))
    _edit_nodes(problem, delta, edit)
    _edit_jobs(problem, delta, edit)
    if edit.errors:
        raise InputError(edit.errors)
    notes: list[str] = []
    jobs_changed = edit.jobs_edited
    cache: _CacheChange | None = None
    if (delta.cache_events or edit.removed or delta.affinity_cache is not None
            or delta.affinity_cache_owners):
        cache = _apply_cache_events(problem, lifecycle, delta, edit, stamp, notes)
        jobs_changed = True
    if edit.now_moved and not jobs_changed and not edit.structural:
        # now alone: the jobs tier only when an owner expires or revives (values otherwise)
        assert edit.now is not None
        jobs_changed = not same_live_owners(problem, edit.now)
    if cache is None:
        cache = _CacheChange(scenario.affinity_cache, lifecycle)
    update: dict[str, Any] = {}
    if edit.structural or edit.changed or edit.vnpu_changed:
        update["nodes"] = edit.nodes
    if delta.config is not None and edit.structural:
        update["config"] = delta.config
    if jobs_changed:
        update.update(jobs=edit.jobs, affinity_cache=cache.model, now=edit.now,
                      running=edit.running, vnpu_jobs=edit.vnpu_jobs)
    elif edit.now_moved:
        update["now"] = edit.now
    if not update:
        return _Applied(scenario, problem, lifecycle, "none", notes)
    # the scenario's own bounds (now, section sizes); the items are validated already
    whole = {name: getattr(scenario, name) for name in Scenario.model_fields} | update
    try:
        new = Scenario.model_validate(whole)
    except ValidationError as exc:
        raise InputError(delta_messages(exc, "(the scenario after the delta)")) from None
    if edit.structural:
        return _structure_tier(new, cache, notes)
    if jobs_changed:
        return _jobs_tier(problem, new, edit, cache, notes)
    return _values_tier(problem, new, edit, cache, notes)


def _edit_nodes(problem: Problem, delta: ClusterDelta, edit: _Edit) -> None:
    """``nodes-removed``, ``nodes-added`` and ``node-updates`` applied to ``edit.nodes``
    (each node checked by its own rules when more than its values changed)."""
    say = edit.say
    nodes = edit.nodes
    if edit.removed:
        for i, name in enumerate(delta.nodes_removed):
            if name not in problem.node_index:
                say(f"field 'nodes-removed[{i}]'", f"node '{name}' does not exist")
        nodes[:] = [n for n in nodes if n.name not in edit.removed]
        edit.structural = True
    if delta.nodes_added:
        present = {n.name for n in nodes}
        for i, node in enumerate(delta.nodes_added):
            if node.name in present:
                say(f"field 'nodes-added[{i}].name'",
                    f"node '{node.name}' already exists (use node-updates)")
            present.add(node.name)
        nodes.extend(delta.nodes_added)
        edit.structural = True

    position = ({n.name: i for i, n in enumerate(nodes)} if edit.structural
                else problem.node_index)
    for i, node_update in enumerate(delta.node_updates):
        at = position.get(node_update.name)
        if at is None:
            say(f"field 'node-updates[{i}].name'", f"node '{node_update.name}' does not exist")
            continue
        fields = node_update.model_fields_set - {"name"}
        vnpu_fields = fields & _VNPU_FIELDS
        if vnpu_fields:
            spec = nodes[at].vnpu
            if spec is None:
                say(f"field 'node-updates[{i}].{sorted(vnpu_fields)[0].replace('_', '-')}'",
                    f"node '{node_update.name}' is not a vNPU node (it has no vnpu "
                    "description; give it one with a full body or nodes-added)")
                continue
            if node_update.unfinished_templates is None \
                    and "unfinished_templates" in vnpu_fields:
                say(f"field 'node-updates[{i}].unfinished-templates'",
                    "must be a list (give [] for none)")
                continue
            spec = spec.model_copy(update={
                "chips": node_update.vnpu_chips if "vnpu_chips" in vnpu_fields
                else spec.chips,
                "unfinished_templates": node_update.unfinished_templates
                if "unfinished_templates" in vnpu_fields else spec.unfinished_templates})
            nodes[at] = nodes[at].model_copy(update={"vnpu": spec})
            edit.vnpu_changed = True
            fields -= _VNPU_FIELDS
            edit.changed_where[node_update.name] = i
            if not fields:
                continue
        values = {f: getattr(node_update, f) for f in fields}
        if fields - _VALUE_FIELDS or any(v is None for v in values.values()):
            # the node's own rules (bounds, label text and count), as in a full body
            merged = nodes[at].model_dump(by_alias=True)
            merged.update(node_update.model_dump(by_alias=True, include=fields))
            try:
                node = Node.model_validate(merged)
            except ValidationError as exc:
                edit.errors.extend(delta_messages(exc, f"node-updates[{i}]"))
                continue
            edit.structural = True
        else:  # free (an int, checked with npus below) and health (an enum), not null
            node = nodes[at].model_copy(update=values)
            edit.changed.append(at)
        nodes[at] = node
        edit.changed_where[node.name] = i


def _edit_jobs(problem: Problem, delta: ClusterDelta, edit: _Edit) -> None:
    """The jobs and vNPU jobs removed and submitted, the cache events' nodes checked, and
    the running jobs' ranks on removed nodes dropped."""
    say = edit.say
    scenario = edit.scenario
    jobs = list(scenario.jobs)
    if delta.jobs_removed:
        names = {j.name for j in jobs}
        vnames = {j.name for j in scenario.vnpu_jobs}
        for i, name in enumerate(delta.jobs_removed):
            if name not in names:
                say(f"field 'jobs-removed[{i}]'", f"job '{name}' is not pending" + (
                    " (it is a vNPU job: use vnpu-jobs-removed)" if name in vnames else ""))
        gone = set(delta.jobs_removed)
        jobs = [j for j in jobs if j.name not in gone]
        edit.jobs_edited = True
    if delta.jobs_submitted:
        jobs.extend(delta.jobs_submitted)  # duplicates are reported by the rules below
        edit.jobs_edited = True
        edit.jobs_new = _new_items(scenario.jobs, delta.jobs_removed, delta.jobs_submitted)
    vnpu_jobs = list(scenario.vnpu_jobs)
    if delta.vnpu_jobs_removed:
        names = {j.name for j in vnpu_jobs}
        for i, name in enumerate(delta.vnpu_jobs_removed):
            if name not in names:
                say(f"field 'vnpu-jobs-removed[{i}]'", f"vNPU job '{name}' is not pending" + (
                    " (it is not a vNPU job: use jobs-removed)"
                    if any(j.name == name for j in scenario.jobs) else ""))
        gone = set(delta.vnpu_jobs_removed)
        vnpu_jobs = [j for j in vnpu_jobs if j.name not in gone]
        edit.jobs_edited = edit.vnpu_edited = True
    if delta.vnpu_jobs_submitted:
        vnpu_jobs.extend(delta.vnpu_jobs_submitted)  # duplicates: the rules below
        edit.jobs_edited = edit.vnpu_edited = True
    if edit.vnpu_changed:
        edit.jobs_edited = edit.vnpu_edited = True  # the vNPU rules run with the others
    edit.jobs, edit.vnpu_jobs = jobs, vnpu_jobs

    node_names: Collection[str] = set()
    if delta.cache_events or delta.affinity_cache_owners:
        # the stored index serves while no node was added or removed
        node_names = ({n.name for n in edit.nodes} if edit.removed or delta.nodes_added
                      else problem.node_index)
    for i, event in enumerate(delta.cache_events):
        if event.event is CacheEventKind.BIND and event.node not in node_names:
            say(f"field 'cache-events[{i}].node'", f"node '{event.node}' does not exist")
    _check_cache_owners(delta, node_names, say)
    # a node removed and added again in one delta is replaced, not gone
    edit.removed -= {n.name for n in delta.nodes_added}
    running = list(scenario.running)
    if edit.removed and running:
        running = [r.model_copy(update={"ranks": {k: v for k, v in r.ranks.items()
                                                  if v not in edit.removed}})
                   for r in running]
    if delta.running_removed or delta.running_submitted:
        running = _replace_running(running, delta, say)
        edit.jobs_edited = True
        edit.running_new = _new_items(scenario.running, delta.running_removed,
                                      delta.running_submitted)
    if delta.jobs_order is not None:
        edit.jobs = _reordered(jobs, delta.jobs_order, "jobs-order", "pending job", say)
        edit.jobs_edited = True
    if delta.running_order is not None:
        running = _reordered(running, delta.running_order, "running-order", "running job",
                             say)
        edit.jobs_edited = True
    if delta.config is not None and delta.config != scenario.config:
        edit.structural = True
    edit.running = running


def _check_cache_owners(delta: ClusterDelta, node_names: Collection[str], say: Any) -> None:
    """The rules ``affinity-cache-owners`` entries take part in (each owner named once,
    its entries of that owner with distinct ranks, on existing nodes: what the full rules
    check of an ``affinity-cache`` entry), reported to ``say``."""
    if delta.affinity_cache_owners and delta.affinity_cache is not None:
        say("field 'affinity-cache-owners'", "give either the whole affinity-cache section "
            "or the owners' entries, not both")
    seen: set[str] = set()
    for i, group in enumerate(delta.affinity_cache_owners):
        where = f"affinity-cache-owners[{i}]"
        owner, entries = group.owner_uid, group.entries
        if owner not in seen and len({entry.rank for entry in entries}) == len(entries) \
                and all(entry.owner_uid == owner and entry.node in node_names
                        and (not entry.previous or entry.previous in node_names)
                        for entry in entries):
            seen.add(owner)
            continue  # (the loop below names what is wrong)
        if group.owner_uid in seen:
            say(f"field '{where}.owner-uid'",
                f"owner '{group.owner_uid}' is named more than once")
        seen.add(group.owner_uid)
        ranks: set[int] = set()
        for j, entry in enumerate(group.entries):
            at = f"{where}.entries[{j}]"
            if entry.owner_uid != group.owner_uid:
                say(f"field '{at}.owner-uid'", f"the entry is of owner '{entry.owner_uid}', "
                    f"not of '{group.owner_uid}'")
            if entry.rank in ranks:
                say(f"field '{at}.rank'", f"rank {entry.rank} appears more than once")
            ranks.add(entry.rank)
            if entry.node not in node_names:
                say(f"field '{at}.node'", f"node '{entry.node}' does not exist")
            if entry.previous and entry.previous not in node_names:  # "": no anchor
                say(f"field '{at}.previous'", f"node '{entry.previous}' does not exist")


def _reordered(items: list[_Item], order: list[str], key: str, what: str, say: Any
               ) -> list[_Item]:
    """``items`` in the order of their names in ``order``, which must name each of them
    once (else reported to ``say`` under ``key``); with duplicate names among ``items``
    they are left as they are (the rules report the duplicate)."""
    by_name = {item.name: item for item in items}
    if len(by_name) != len(items):
        return items
    seen: set[str] = set()
    for i, name in enumerate(order):
        if name not in by_name:
            say(f"field '{key}[{i}]'", f"{what} '{name}' does not exist (after the "
                "removals and submissions)")
        elif name in seen:
            say(f"field '{key}[{i}]'", f"{what} '{name}' is named more than once")
        seen.add(name)
    missing = [name for name in by_name if name not in seen]
    if missing:
        say(f"field '{key}'", f"{len(missing)} {what}s are not named: "
            f"{', '.join(repr(n) for n in missing[:5])}")
    if len(seen) != len(order) or missing or len(order) != len(items):
        return items
    return [by_name[name] for name in order]


def _new_items(before: Collection[_Item], removed: Collection[str],
               submitted: Collection[_Item]) -> list[_Item]:
    """The items of ``submitted`` that are not a removed item of ``before`` again
    (equal to the one of their name that ``removed`` names)."""
    gone = set(removed)
    old = {item.name: item for item in before if item.name in gone} if gone else {}
    return [item for item in submitted if old.get(item.name) != item]


def _apply_cache_events(problem: Problem, lifecycle: CacheLifecycle, delta: ClusterDelta,
                        edit: _Edit, stamp: int | None, notes: list[str]) -> _CacheChange:
    """The cache lifecycle after the delta's cache sections and events (on a copy: the
    stored one changes only when all is valid) and the cache section it writes; entries on
    removed nodes dropped.

    ``affinity-cache-owners`` alone writes the named owners' entries as given
    (:func:`~solver.service.cache_view.replace_owners`); cache events write their owners'
    entries as the lifecycle does (:func:`~solver.service.cache_view.patch_cache`), or
    the whole section when the stored one is not in the lifecycle's order."""
    # the new section's lifecycle when the delta carries the whole section (a watcher's
    # resync), else a copy of the stored one
    new_lifecycle = (lifecycle.copy() if delta.affinity_cache is None
                     else CacheLifecycle.from_model(delta.affinity_cache))
    given = {group.owner_uid: group.entries for group in delta.affinity_cache_owners}
    for owner, entries in given.items():
        new_lifecycle.replace_owner(owner, entries)
    if stamp is None:
        stamp = int(edit.now) if edit.now is not None else int(time.time())
    for i, event in enumerate(delta.cache_events):
        owner, rank = event.owner_uid, event.rank
        if event.event is CacheEventKind.BIND:
            assert rank is not None and event.node is not None
            new_lifecycle.allocate(owner, rank, event.node, stamp)
        elif event.event is CacheEventKind.EVICT:
            assert rank is not None
            if new_lifecycle.release(owner, rank) is None:
                notes.append(f"cache-events[{i}]: no entry for ({owner}, {rank}) to keep")
        elif event.event is CacheEventKind.DISCARD:
            assert rank is not None
            new_lifecycle.discard(owner, rank)
        elif event.event is CacheEventKind.DELETE_OWNER:
            new_lifecycle.delete_owner(owner)
        else:
            if new_lifecycle.cache is not None:
                new_lifecycle.cache.refresh_owner(owner, stamp)
    owners = frozenset(event.owner_uid for event in delta.cache_events)
    removed = edit.removed
    cache_model: AffinityCacheModel | None = None
    view: CacheView | None = None
    touched: frozenset[str] | None = owners | frozenset(given)
    try:
        if given and delta.affinity_cache is None:
            cache_model, view = replace_owners(
                cache_view(problem), problem.scenario.affinity_cache.ttl_seconds, given)
        if owners and not removed and delta.affinity_cache is None \
                and new_lifecycle.cache is not None:
            patched = patch_cache(view or cache_view(problem), new_lifecycle.cache, owners,
                                  problem.node_index)
            cache_model, view = patched if patched is not None else (None, None)
        elif owners:
            cache_model = view = None
        if cache_model is None:  # the section written whole
            touched, view = None, None
            cache_model = (delta.affinity_cache if delta.affinity_cache is not None
                           and not delta.cache_events else new_lifecycle.to_model())
    except ValidationError as exc:
        raise InputError(delta_messages(exc, "(the cache after the delta)")) from None
    if removed:
        touched, view = None, None
        cache_model, dropped = _drop_removed(cache_model, removed)
        if dropped:
            notes.append(f"dropped {dropped} cache entries of removed nodes")
        states = new_lifecycle.export_states()
        new_lifecycle = CacheLifecycle.from_model(cache_model)
        new_lifecycle.restore_states(states)
    return _CacheChange(cache_model, new_lifecycle, stamp, touched, view)


def _structure_tier(new: Scenario, cache: _CacheChange, notes: list[str]) -> _Applied:
    """Nodes were added, removed or changed beyond their values: ``new`` compiled again
    (no JSON parsing)."""
    return _Applied(new, compile_scenario(new, "<delta>"), cache.lifecycle, "structure",
                    notes, cache.stamp, None)


def _value_errors(new: Scenario, edit: _Edit, used: Counter[str]) -> None:
    """The rules the changed node values take part in (:class:`InputError` naming the
    update's ``free``)."""
    value_errors = node_value_problems(new, edit.changed, used)
    if value_errors:
        raise InputError([escape_text(
            f"<delta>: field 'node-updates[{edit.changed_where[name]}].free': node "
            f"'{name}': {text}", 2000) for name, text in value_errors])


def _patched_arrays(problem: Problem, new: Scenario, edit: _Edit) -> Problem:
    """``problem`` with the changed nodes' ``free``, ``health`` and image holders
    patched, and ``new`` as its scenario."""
    if not edit.changed:
        return problem
    nodes, scenario = edit.nodes, edit.scenario
    free = problem.free.copy()
    health = problem.health.copy()
    moved: dict[int, tuple[frozenset[str], frozenset[str]]] = {}
    for at in edit.changed:
        # a vNPU node serves vNPU jobs only: no free chip for the others (compiled)
        free[at] = 0 if nodes[at].vnpu is not None else nodes[at].free
        health[at] = _HEALTH_CODE[nodes[at].health]
        old, now_held = scenario.nodes[at].images or {}, nodes[at].images or {}
        if old.keys() != now_held.keys():
            moved[at] = (frozenset(old), frozenset(now_held))
    holders = (patch_image_holders(problem.image_holders, moved) if moved
               else problem.image_holders)
    return replace(problem, scenario=new, free=free, health=health, image_holders=holders)


def _jobs_tier(problem: Problem, new: Scenario, edit: _Edit, cache: _CacheChange,
               notes: list[str]) -> _Applied:
    """Jobs, cache events, ``now`` across an owner's expiry or a vNPU node's chips: the
    node arrays patched, the jobs and the live cache compiled again (:func:`_recompile`)."""
    out = _patched_arrays(problem, new, edit)
    recompiled = _recompile(problem, out, new, cache.view, cache.touched, edit)
    return _Applied(new, recompiled, cache.lifecycle, "jobs", notes, cache.stamp,
                    cache.touched)


def _values_tier(problem: Problem, new: Scenario, edit: _Edit, cache: _CacheChange,
                 notes: list[str]) -> _Applied:
    """Only node values and a ``now`` that expires no owner: the node arrays patched, the
    compiled jobs kept."""
    if edit.changed:
        _value_errors(new, edit, chips_of(problem))  # the same running ranks
    out = _patched_arrays(problem, new, edit)
    now = edit.now
    patched_problem = replace(out, scenario=new, now=problem.now if now is None else int(now))
    remember_view(patched_problem, cache_view(problem))  # the same cache entries
    carry_chips(problem, patched_problem)  # the same running ranks
    return _Applied(new, patched_problem, cache.lifecycle, "values", notes, cache.stamp,
                    cache.touched)


def _recompile(problem: Problem, out: Problem, new: Scenario, view: CacheView | None,
               touched: frozenset[str] | None, edit: _Edit) -> Problem:
    """The jobs tier: ``out`` (``problem`` with the node arrays patched) with ``new``'s
    jobs, cache and ``now``.

    ``view`` is the new cache section's view when only ``touched`` owners' entries
    changed (:func:`~solver.service.cache_view.patch_cache`; ``None`` with ``touched``
    empty: the section is the same; ``touched`` ``None``: it was written whole).  When
    neither the jobs nor a vNPU node changed (``jobs_edited``: cache events and ``now``
    moves, with node values perhaps), the rules are not run again (the changed nodes'
    values are checked as in the values tier) and only the jobs whose owner's live
    entries changed get a new origin.  When pending or running jobs were removed and
    submitted (and no vNPU part changed), the rules those items take part in are checked
    (:func:`~models.validation.submitted_shapes`) and only the submitted jobs that
    differ from the removed ones are compiled (:func:`_compile_submitted`); if a rule
    may be broken, or a vNPU part changed, the rules run without the nodes and cache
    entries that are known to hold, and every job is compiled again.  Either way the
    problem equals :func:`recompile_jobs` of the whole scenario.
    """
    jobs_edited, changed = edit.jobs_edited, edit.changed
    if touched is None:  # the cache section was written whole: the rules and jobs again
        return recompile_jobs(out, new, nodes_unchanged=not changed)
    if view is None:
        view = cache_view(problem)
    now = scenario_now(new)
    live = patch_live(problem.live, view, touched, now,
                      new.affinity_cache.ttl_seconds)
    # the running ranks' chips, where free is checked against them
    chips = (chips_after(problem, new) if changed or (jobs_edited and not edit.vnpu_edited)
             else None)
    wrong = bool(changed) and bool(node_value_problems(new, changed, chips))
    shapes = (submitted_shapes(new, problem.node_index, edit.jobs_new, edit.running_new,
                               chips)
              if jobs_edited and not wrong and not edit.vnpu_edited else None)
    if shapes is not None:
        recompiled = _compile_submitted(problem, out, new, shapes, live, now)
    elif jobs_edited or wrong:
        # the jobs changed (or a node value is wrong: the rules give the messages); node
        # values alone that pass their rules leave the rules on the nodes alone holding
        recompiled = recompile_jobs(out, new, nodes_unchanged=not wrong,
                                    cache_checked=True, live=live)
    else:
        jobs = tuple(job if live.get(job.owner_uid or "") is problem.live.get(
            job.owner_uid or "") else replace(job, origin=job_origin(
                job.tasks, live.get(job.owner_uid) if job.owner_uid else None,
                problem.node_index, job.running))
            for job in problem.jobs)
        recompiled = replace(out, scenario=new, now=now, jobs=jobs, live=live)
    remember_view(recompiled, view)
    if chips is not None:
        remember_chips(recompiled, chips)
    elif not jobs_edited:
        carry_chips(problem, recompiled)  # the same running ranks
    return recompiled


def _compile_submitted(problem: Problem, out: Problem, new: Scenario,
                       shapes: dict[str, JobShape], live: dict[str, dict[int, str]],
                       now: int) -> Problem:
    """``out`` with ``new``'s jobs: the jobs named in ``shapes`` (validated, with those
    shapes) compiled; every other job's view reused from ``problem`` (the same job),
    moved to its new position and given a new origin when its owner's live entries
    changed."""
    index = problem.node_index
    prefer = new.config.prefer_previous_node
    jobs = []
    for j, job in enumerate(new.jobs):
        shape = shapes.get(job.name)
        if shape is not None:
            jobs.append(compile_job(j, job, shape, index, live, prefer))
            continue
        view = problem.jobs[problem.job_index[job.name]]
        owner = job.owner_uid
        if owner and live.get(owner) is not problem.live.get(owner):
            view = replace(view, origin=job_origin(job.tasks, live.get(owner), index,
                                                   view.running))
        if view.index != j:
            view = replace(view, index=j)
        jobs.append(view)
    views = tuple(jobs)
    return replace(out, scenario=new, now=now, jobs=views,
                   job_index={view.name: j for j, view in enumerate(views)},
                   queue=job_queue(views), live=live)


def _shift_counts(counts: Counter[str] | None, before: CacheLifecycle,
                  after: CacheLifecycle, touched: frozenset[str] | None
                  ) -> Counter[str] | None:
    """``counts`` (of ``before``) moved to ``after``, which differs in ``touched`` owners'
    entries and states only (``None``: anywhere: counted again when asked)."""
    if counts is None or touched is None:
        return None
    out = counts - owner_state_counts(before, touched)  # also drops counts down to 0
    out.update(owner_state_counts(after, touched))
    return out


def _replace_running(running: list[RunningJob], delta: ClusterDelta, say: Any
                     ) -> list[RunningJob]:
    """``running`` without ``running-removed`` and with ``running-submitted`` appended
    (a name in both is replaced); unknown names and duplicates are reported to ``say``."""
    names = {r.name for r in running}
    for i, name in enumerate(delta.running_removed):
        if name not in names:
            say(f"field 'running-removed[{i}]'", f"running job '{name}' does not exist")
    gone = set(delta.running_removed)
    out = [r for r in running if r.name not in gone]
    present = {r.name for r in out}
    for i, job in enumerate(delta.running_submitted):
        if job.name in present:
            say(f"field 'running-submitted[{i}].name'", f"running job '{job.name}' exists "
                "already (remove it in running-removed to replace it)")
        present.add(job.name)
    return out + list(delta.running_submitted)


def _drop_removed(model: AffinityCacheModel, removed: set[str]
                  ) -> tuple[AffinityCacheModel, int]:
    kept = []
    dropped = 0
    for entry in model.entries:
        if entry.node in removed:
            dropped += 1
            continue
        if entry.previous in removed:
            entry = entry.model_copy(update={"previous": None})
        kept.append(entry)
    return model.model_copy(update={"entries": kept}), dropped


class Cluster:
    """A named cluster held by the service: current snapshot plus the cache lifecycle.

    Deltas are serialised by a lock; plan calls read :attr:`snapshot` without locking.
    """

    def __init__(self, name: str, problem: Problem, version: int = 1) -> None:
        self.name = name
        self._lock = threading.Lock()
        self.lifecycle = CacheLifecycle.from_model(problem.scenario.affinity_cache)
        self.snapshot = ClusterSnapshot(name, version, problem)
        self.last_update = "full"
        self.last_stamp: int | None = None
        self.apply_seconds = 0.0
        self.notes: list[str] = []
        #: entries per cache state (``lifecycle.counts()``), kept up to date by the deltas
        #: for the owners they change; ``None``: counted again when asked
        self._state_counts: Counter[str] | None = None

    def apply(self, delta: ClusterDelta, stamp: int | None = None) -> ClusterInfo:
        """Apply a delta (whole or not at all) and return the new summary.

        Parameters
        ----------
        delta
            The changes.
        stamp
            The time to stamp cache events with (a replay passes the first
            application's :attr:`last_stamp`); default: ``now``, else the clock.

        Raises
        ------
        InputError
            When the delta or the resulting scenario is invalid (the cluster is unchanged).
        VersionConflict
            When ``expect-version`` does not match.
        """
        with self._lock:
            started = time.perf_counter()
            current = self.snapshot
            if delta.expect_version is not None and delta.expect_version != current.version:
                raise VersionConflict(
                    f"cluster '{self.name}' is at version {current.version}, the delta "
                    f"expects {delta.expect_version}")
            # applied to copies: any failure leaves snapshot and lifecycle as they were
            applied = apply_delta(current.problem, self.lifecycle, delta, stamp)
            if applied.lifecycle is not self.lifecycle:
                self._state_counts = _shift_counts(self._state_counts, self.lifecycle,
                                                   applied.lifecycle, applied.touched)
            self.lifecycle = applied.lifecycle
            self.last_stamp = applied.stamp
            if applied.tier != "none":
                self.snapshot = ClusterSnapshot(self.name, current.version + 1,
                                                applied.problem)
            self.last_update = applied.tier
            self.apply_seconds = time.perf_counter() - started
            self.notes = applied.notes
            return self.info()

    def export_state(self) -> dict[str, Any]:
        """Everything needed to rebuild this cluster (:meth:`restore_state`): the scenario,
        the version and the cache lifecycle's states, as JSON-ready data."""
        snap = self.snapshot
        return {"scenario": snap.problem.scenario.to_dict(), "version": snap.version,
                "cache-states": self.lifecycle.export_states()}

    def restore_state(self, states: dict[str, Any]) -> None:
        """Set the cache lifecycle's states exported by :meth:`export_state`."""
        with self._lock:
            self.lifecycle.restore_states(states)
            self._state_counts = None

    def refresh_clock(self) -> ClusterSnapshot:
        """The snapshot to plan on; without a scenario ``now`` the live cache follows the clock.

        A cluster whose scenario has no ``now`` had its live cache computed at the last
        update; when the clock has moved on since, the jobs are recompiled (cheap) so that
        TTL expiry is measured from the time of the plan, as a fresh snapshot would be.
        """
        snap = self.snapshot
        if snap.problem.scenario.now is not None or snap.problem.now >= int(time.time()):
            return snap
        with self._lock:
            snap = self.snapshot
            if snap.problem.now < int(time.time()):
                problem = recompile_jobs(snap.problem, snap.problem.scenario,
                                         _shapes(snap.problem))
                snap = replace(snap, problem=problem)
                self.snapshot = snap
            return snap

    def cache_states(self) -> dict[str, int]:
        """Entries per cache state (:meth:`heuristics.lifecycle.CacheLifecycle.counts`),
        in the order of :class:`heuristics.lifecycle.EntryState`."""
        if self._state_counts is None:
            self._state_counts = Counter(self.lifecycle.counts())
        counts = self._state_counts
        return {state.value: counts[state.value] for state in EntryState
                if counts[state.value] > 0}

    def info(self) -> ClusterInfo:
        """The cluster's summary."""
        problem = self.snapshot.problem
        scenario = problem.scenario
        return ClusterInfo(
            name=self.name, version=self.snapshot.version, nodes=problem.num_nodes,
            jobs=len(problem.jobs), vnpu_jobs=len(scenario.vnpu_jobs),
            cache_entries=len(scenario.affinity_cache.entries),
            cache_states=self.cache_states(), now=scenario.now,
            last_update=self.last_update, apply_seconds=round(self.apply_seconds, 6),
            notes=list(self.notes))


class ClusterStore:
    """The service's clusters by name, bounded in number."""

    def __init__(self, max_clusters: int = 16) -> None:
        self.max_clusters = max_clusters
        self._clusters: dict[str, Cluster] = {}
        self._lock = threading.Lock()

    def put(self, name: str, problem: Problem, version: int = 1) -> tuple[Cluster, bool]:
        """Store (or replace) a cluster; returns it and whether it is new.

        Raises
        ------
        OverflowError
            When the store is full and ``name`` is new.
        """
        with self._lock:
            created = name not in self._clusters
            if created and len(self._clusters) >= self.max_clusters:
                raise OverflowError(f"the service holds {self.max_clusters} clusters already; "
                                    "delete one first")
            cluster = Cluster(name, problem, version)
            self._clusters[name] = cluster
            return cluster, created

    def get(self, name: str) -> Cluster | None:
        """The cluster named ``name``, or ``None``."""
        return self._clusters.get(name)

    def delete(self, name: str) -> bool:
        """Forget a cluster; returns whether it existed."""
        with self._lock:
            return self._clusters.pop(name, None) is not None

    def __len__(self) -> int:
        return len(self._clusters)
