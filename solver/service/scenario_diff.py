"""The delta that turns one scenario into another: what a watcher of the cluster sends.

:func:`scenario_delta` compares the stored scenario with the importer's newer answer and
writes one :class:`~solver.service.delta.ClusterDelta` document of the differences, so
that the stored cluster, once the delta is applied, exports exactly the newer scenario:

* ``now`` when it moved;
* nodes: a changed node whose changes a ``node-updates`` entry expresses (``free``,
  ``health``, ``npus``, labels, images, a super pod or rack set) is updated; any other
  change (a field that disappears, a vNPU description) removes and adds it again;
* jobs, vNPU jobs, running jobs and nodes keep the order of the newer scenario: items are
  compared by name, the longest prefix of unchanged items in the same order is kept, and
  every other item is removed and submitted again (submitted items go to the end);
* ``config`` and ``affinity-cache`` are sent whole when they differ (the cache also when
  a node goes: the stored cluster rewrites its cache then).

A delta with nothing in it is ``None``.

:func:`pieces_delta` writes the same delta from what an incremental import
(:func:`models.kube.incremental.advance`) says changed, comparing only those nodes and
jobs: its cost follows the change, not the cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from models.kube.incremental import Changes, ImportPieces
from models.scenario import Node, Scenario

#: Node fields a ``node-updates`` entry sets (model attribute names).
_UPDATABLE = frozenset({"free", "health", "npus", "super_pod_id", "rack_id", "labels",
                        "images"})
#: Those that cannot be set back to "absent" by an update (``None`` means absent).
_NOT_CLEARABLE = frozenset({"super_pod_id", "rack_id", "images"})

class _Named(Protocol):
    name: str


T = TypeVar("T", bound=_Named)


def _named(items: Sequence[Any]) -> dict[str, Any]:
    return {item.name: item for item in items}


def _kept_prefix(unchanged: Sequence[str], new: Sequence[str]) -> int:
    """How many of ``new``'s first names ``unchanged`` (in its order) also starts with."""
    kept = 0
    for before, after in zip(unchanged, new, strict=False):
        if before != after:
            break
        kept += 1
    return kept


def _ordered(old: Sequence[T], new: Sequence[T]) -> tuple[list[str], list[T]]:
    """Names to remove and items to submit so that ``old`` becomes ``new`` (same order).

    The kept items are the longest prefix of ``new`` that ``old``'s unchanged items (in
    their order) also start with; the rest of ``old`` is removed and the rest of ``new``
    submitted, which appends it after the kept prefix.
    """
    wanted = _named(new)
    kept = _kept_prefix([item.name for item in old if wanted.get(item.name) == item],
                        [item.name for item in new])
    keep = {item.name for item in new[:kept]}
    return [item.name for item in old if item.name not in keep], list(new[kept:])


def _node_update(old: Node, new: Node) -> dict[str, Any] | None:
    """The ``node-updates`` entry that turns ``old`` into ``new``; ``None`` when an
    update cannot (the node is then removed and added again)."""
    if old.vnpu is not None or new.vnpu is not None:
        return None
    changed = [name for name in Node.model_fields if getattr(old, name) != getattr(new, name)]
    if any(name not in _UPDATABLE for name in changed):
        return None
    if any(name in _NOT_CLEARABLE and getattr(new, name) is None for name in changed):
        return None
    update: dict[str, Any] = {"name": new.name}
    for name in changed:
        field = Node.model_fields[name]
        value = getattr(new, name)
        update[field.alias or name] = value.value if hasattr(value, "value") else value
    return update


def scenario_delta(old: Scenario, new: Scenario) -> dict[str, Any] | None:
    """The delta document (plain data, the ``PATCH`` body) that turns ``old`` into ``new``.

    Returns
    -------
    dict or None
        The delta, without ``expect-version``; ``None`` when the scenarios are equal.
    """
    delta: dict[str, Any] = {}
    if new.now != old.now and new.now is not None:
        delta["now"] = new.now
    before = _named(old.nodes)
    updates: list[dict[str, Any]] = []
    replaced: set[str] = set()
    for node in new.nodes:
        was = before.get(node.name)
        if was is None or was == node:
            continue
        update = _node_update(was, node)
        if update is None:
            replaced.add(node.name)
        else:
            updates.append(update)
    # nodes: the order of the newer scenario; an updated node stays where it is, a
    # replaced one is removed and added again
    now_named = _named(new.nodes)
    kept = _kept_prefix([n.name for n in old.nodes
                         if n.name in now_named and n.name not in replaced],
                        [n.name for n in new.nodes])
    keep = {n.name for n in new.nodes[:kept]}
    removed = [n.name for n in old.nodes if n.name not in keep]
    added = list(new.nodes[kept:])
    updates = [u for u in updates if u["name"] in keep]
    if removed:
        delta["nodes-removed"] = removed
    if added:
        delta["nodes-added"] = [n.model_dump(by_alias=True, mode="json", exclude_none=True)
                                for n in added]
    if updates:
        delta["node-updates"] = updates
    for section, key_removed, key_submitted in (
            ("jobs", "jobs-removed", "jobs-submitted"),
            ("vnpu_jobs", "vnpu-jobs-removed", "vnpu-jobs-submitted"),
            ("running", "running-removed", "running-submitted")):
        gone, submitted = _ordered(getattr(old, section), getattr(new, section))
        if gone:
            delta[key_removed] = gone
        if submitted:
            delta[key_submitted] = [item.model_dump(by_alias=True, mode="json",
                                                    exclude_none=True) for item in submitted]
    if new.config != old.config:
        delta["config"] = new.config.model_dump(by_alias=True, mode="json", exclude_none=True)
    nodes_gone = set(removed) - {n.name for n in added}
    # a node that goes rewrites the stored cache through the lifecycle (one time per
    # owner): the section is sent whenever one does, so that it stays the import's
    if new.affinity_cache != old.affinity_cache or nodes_gone:
        delta["affinity-cache"] = new.affinity_cache.model_dump(by_alias=True, mode="json",
                                                                exclude_none=True)
    return delta or None


def _changed_items(old: Sequence[str], new: dict[str, Any], changed: set[str]
                   ) -> tuple[list[str], list[str], list[str] | None]:
    """Names to remove, names to submit and the new order (``None``: the removals and
    submissions give it) so that the order ``old`` becomes ``new``'s, where only
    ``changed`` items differ: the changed items alone are sent, and the order of the
    names when appending them would not give ``new``'s."""
    present = set(new)
    gone = [name for name in old if name in changed]
    submitted = [name for name in new if name in changed]
    removed = set(gone)
    appended = [name for name in old if name not in removed and name in present]
    appended += submitted
    order = list(new)
    return gone, submitted, (None if appended == order else order)


def pieces_delta(old: ImportPieces, new: ImportPieces, changes: Changes
                 ) -> dict[str, Any] | None:
    """The delta document that turns the import ``old`` into ``new``, where ``changes``
    says what differs (:func:`models.kube.incremental.advance`): only those nodes, jobs
    and the cache are compared and written; a changed job is removed and submitted
    again, and ``jobs-order`` / ``running-order`` put it back in the import's place (the
    names only, not every later job again); the cache owners whose entries changed are
    sent alone, with all of their entries (``affinity-cache-owners``).  A node change
    that a ``node-updates`` entry cannot express falls back to :func:`scenario_delta` of
    the two whole scenarios.

    Returns
    -------
    dict or None
        The delta, without ``expect-version``; ``None`` when nothing changed.
    """
    delta: dict[str, Any] = {}
    if changes.now_moved:
        delta["now"] = new.now
    updates = []
    for name in changes.nodes:
        update = _node_update(old.models[name], new.models[name])
        if update is None:
            return scenario_delta(old.scenario(), new.scenario())
        updates.append(update)
    if updates:
        delta["node-updates"] = updates
    for section, key_removed, key_submitted, key_order, changed in (
            ("jobs", "jobs-removed", "jobs-submitted", "jobs-order", changes.jobs),
            ("running", "running-removed", "running-submitted", "running-order",
             changes.running)):
        if not changed:
            continue
        before, after = getattr(old, section), getattr(new, section)
        gone, submitted, order = _changed_items(list(before), after, changed)
        if gone:
            delta[key_removed] = gone
        if submitted:
            delta[key_submitted] = [after[name] for name in submitted]
        if order is not None:
            delta[key_order] = order
    if changes.cache_owners:
        delta["affinity-cache-owners"] = owners_entries(new, changes.cache_owners)
    return delta or None


def owners_entries(pieces: ImportPieces, owners: set[str]) -> list[dict[str, Any]]:
    """The ``affinity-cache-owners`` items of ``owners`` in ``pieces``: each owner with
    all of its entries in the import's order (by rank; ``[]``: it has none any more)."""
    entries: dict[str, list[tuple[int, dict[str, Any]]]] = {owner: [] for owner in owners}
    for (owner, rank), entry in pieces.cache.items():
        mine = entries.get(owner)
        if mine is not None:
            mine.append((rank, entry))
    return [{"owner-uid": owner, "entries": [entry for _, entry in sorted(
        entries[owner], key=lambda item: item[0])]} for owner in sorted(owners)]
