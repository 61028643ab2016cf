"""Built CP-SAT models kept between solves of a stored cluster.

A stored cluster changes a little between sessions (a few nodes' free chips or health),
and the large-neighbourhood search (:mod:`solver.lns`) builds the same step models again
and again: the steps a session runs from the previous session's answer are the ones the
previous session ended with (same neighbourhood, same fixed jobs, same kept nodes), and
within one search a sweep after the last improvement repeats the previous sweep's steps.
:class:`ModelCache` keeps those models (a bounded number per stored cluster) and hands
one back instead of building it again when the new build would be *identical*.

What "identical" rests on
-------------------------
:func:`solver.cpsat.build_model` is a deterministic function of the problem, the
weights and the step (warm start, kept nodes, fixed jobs, left-out jobs).  The
:func:`step_digest` of a build covers all of these, except that the per-node state (free
chips, health) is covered at full detail only on the nodes a step model can look at one
by one, ``R`` = the kept nodes, every node of the warm start, the fixed jobs' nodes and
every job's cached and running nodes.  The model reads the state of the other nodes only
through counts (audited in ``solver/model/``):

* ``constraints.py`` (the knapsack rows): sums over all nodes of the chips left on healthy
  nodes, of the slots per request size, and of the whole nodes per node size;
* ``objective.py`` (reserve): whole free nodes per super pod, and per multilevel level
  path (``_whole_members_by_path``);
* ``structure.py``: cells and ordinary candidates are taken from kept nodes only;
* ``podscope.py`` / ``podlevel.py`` (partly running A3/850, 950 and multilevel jobs): a
  job's scope (anchors, stage rules, UB-memory domain) is a function of its running
  ranks' and cache entries' nodes (in ``R``), its fields (the jobs' part of the digest)
  and the topology; the scope's node mask is read on the job's candidates only, which
  are kept nodes, and a leaf domain exists in the model only when a kept node is in it
  (``tests/solver/model/test_model_reuse.py`` changes nodes of the scope's domains outside
  ``R`` and requires the fresh build's proto);
* the health of a node outside ``R`` enters only as "unhealthy or not".

Each of these is a function of how many nodes outside ``R`` of each *topology class*
(super pod, rack, multilevel tree and level path, node size) have each (free chips,
unhealthy) state, so the digest covers that histogram instead of the nodes themselves.
A node outside ``R`` that turns sub-healthy, or two nodes of one class that swap their
states, leave the digest unchanged; any other change gives another digest, and the model
is built.  Without a kept-node mask (the whole-batch model) ``R`` is every node.  The
problem's ``now``, names map and scenario are not read by the model and are left out, so
a clock that moves between sessions does not defeat the cache.

The weights are not in the digest: the automatic weights (:func:`models.objective.
resolve_weights`) follow counts over the whole cluster, such as the number of sub-healthy
nodes, so nearly every health change moves them.  Only the objective depends on them (the
``placed`` term's coefficients, the weighted sum, and the bound row ``objective <=
best_possible`` that :func:`solver.cpsat.build_model` adds last), so a model kept with
other weights gets those three set again (:func:`_reweighted`) and is then the proto a
build with the new weights gives.  A model whose last row is not that bound row (the
builder changed) is reused with its own weights only.

Should a later change to the model code read something else, the digest could miss it:
``tests/solver/model/test_model_reuse.py`` rebuilds the model for random deltas and requires
the same proto whenever the cache hands a kept (possibly re-weighted) model back.  Even
then a wrong model could not make an invalid or a worse answer: a step's answer is
accepted only when :func:`models.check.check` passes and
:func:`models.objective.evaluate` on the current problem scores it higher, and the facade
validates CP-SAT's final answer and returns its fallback when that is better.

A hit is the same model object: :func:`solver.cpsat.add_hint` clears its warm start and
sets the new one, unless it holds that same plan's hints already, so its proto is the one
a fresh build hinted with that plan would give.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field, is_dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel

from models.compiled import UNHEALTHY, Problem
from models.derived import Derived
from models.objective import ResolvedWeights
from models.plan import Plan
from solver.model.cancel import checkpoint, retain

if TYPE_CHECKING:  # pragma: no cover
    from solver.model.variables import Lin

#: :class:`solver.model.built.BuiltModel` (not imported: it loads OR-Tools, which this module
#: imports only inside the functions that need it)
BuiltModel = Any

log = logging.getLogger("npu_place.cpsat")

#: Models kept per stored cluster (least recently used dropped first) ...
MAX_MODELS = 16
#: ... and CP-SAT variables summed over them: about 0.3 kB of memory per variable
#: (resident set growth of one 13,814-variable step model of an 8,192-node, 12-job 950
#: batch: 3.8 MB), so at most about 35 MB per stored cluster.
MAX_VARIABLES = 120_000
#: Bumped whenever what :func:`step_digest` covers changes meaning.
DIGEST_VERSION = b"model-reuse-1"


def _feed(h: Any, value: Any) -> None:
    """Feed ``value`` into the hash ``h`` unambiguously (type tags and lengths)."""
    if value is None:
        h.update(b"N")
    elif isinstance(value, bool | np.bool_):
        h.update(b"T" if value else b"F")
    elif isinstance(value, Enum):
        h.update(b"E")
        _feed(h, value.value)
    elif isinstance(value, int | np.integer):
        h.update(b"i%d;" % int(value))
    elif isinstance(value, float | np.floating):
        h.update(b"f" + repr(float(value)).encode() + b";")
    elif isinstance(value, str | bytes):
        data = value.encode() if isinstance(value, str) else b"b" + value
        h.update(b"s%d:" % len(data))
        h.update(data)
    elif isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        h.update(f"a{array.dtype.str}{array.shape};".encode())
        h.update(array.tobytes())
    elif isinstance(value, tuple | list):
        h.update(b"(%d" % len(value))
        for i, item in enumerate(value):
            if i % 256 == 255:  # long lists (a multilevel tree's label values)
                checkpoint()
            _feed(h, item)
        h.update(b")")
    elif isinstance(value, dict):
        h.update(b"{%d" % len(value))
        for i, key in enumerate(sorted(value, key=repr)):
            if i % 256 == 255:
                checkpoint()
            _feed(h, key)
            _feed(h, value[key])
        h.update(b"}")
    elif isinstance(value, set | frozenset):
        _feed(h, sorted(value, key=repr))
    elif is_dataclass(value) and not isinstance(value, type):
        h.update(b"D" + type(value).__name__.encode())
        for f in dataclasses.fields(value):
            _feed(h, f.name)
            _feed(h, getattr(value, f.name))
    elif isinstance(value, BaseModel):
        h.update(b"M" + type(value).__name__.encode())
        h.update(value.model_dump_json().encode())
    else:  # never hash a repr that may hold an object id
        raise TypeError(f"cannot digest a {type(value).__name__}")


#: Per problem: the digest of topology and jobs, the topology class of every node, and
#: the digest of the topology alone (:func:`_fixed_part`).
FIXED_PART: Derived[None, tuple[bytes, np.ndarray, bytes]] = Derived("model-reuse digests")


def _fixed_part(problem: Problem) -> tuple[bytes, np.ndarray]:
    """The digest of everything but the node state and the step (topology, jobs), and
    the topology class of every node; once per problem (:data:`FIXED_PART`)."""
    both, classes, _ = problem.derived.get_or_compute(FIXED_PART, None,
                                                      lambda: _compute_fixed_part(problem))
    return both, classes


def _compute_fixed_part(problem: Problem) -> tuple[bytes, np.ndarray, bytes]:
    h = hashlib.blake2b(digest_size=20)
    _feed(h, DIGEST_VERSION)
    # names as one string plus their lengths (one update, not one per node)
    # checkpoints between the stages: at 65,536 nodes each is a few milliseconds, all
    # of them together (two sorts per column) were one stretch of about 25 ms of CPU
    # at a step's start, which a deadline inside could not stop
    _feed(h, "".join(problem.node_names))
    checkpoint()
    _feed(h, np.fromiter(map(len, problem.node_names), dtype=np.int64,
                         count=problem.num_nodes))
    checkpoint()
    _feed(h, (problem.npus, problem.super_pod, problem.rack,
              problem.natural_order, problem.natural_pos, problem.node_tree,
              problem.tree_names, problem.super_pod_size, problem.super_pod_size_configured,
              problem.reserve_nodes, problem.prefer_previous_node))
    checkpoint()
    _feed(h, problem.trees)  # long lists inside checkpoint in _feed
    checkpoint()
    # image locality: the cells are split by the images the nodes hold
    _feed(h, (problem.image_locality, problem.image_holders))
    checkpoint()
    topology = h.copy().digest()
    _feed(h, problem.queue)
    checkpoint()
    _feed(h, problem.jobs)
    checkpoint()
    # topology class of each node: every column a count outside R is taken by
    columns = [problem.npus, problem.super_pod, problem.rack, problem.node_tree]
    member = np.zeros(problem.num_nodes, dtype=np.int64)
    depth = max((view.depth for view in problem.trees.values()), default=0)
    path = [np.full(problem.num_nodes, -1, dtype=np.int64) for _ in range(depth)]
    for t, name in enumerate(problem.tree_names):
        view = problem.trees[name]
        checkpoint()
        mine = problem.node_tree == t
        member[mine] = view.member[mine]
        for i in range(view.depth):
            path[i][mine] = np.asarray(view.level_value[i])[mine]
    # exact class ids, one column at a time: (class so far, column) → dense id
    classes = np.zeros(problem.num_nodes, dtype=np.int64)
    for column in [*columns, member, *path]:
        checkpoint()
        _, codes = np.unique(np.asarray(column, dtype=np.int64), return_inverse=True)
        codes = np.asarray(codes, dtype=np.int64).reshape(-1)
        checkpoint()
        _, classes = np.unique(classes * (int(codes.max(initial=0)) + 1) + codes,
                               return_inverse=True)
        classes = np.asarray(classes, dtype=np.int64).reshape(-1)
    return h.digest(), classes, topology


def input_parts(problem: Problem) -> tuple[bytes, bytes]:
    """Digests of ``problem``'s topology and of topology plus jobs (once per problem)."""
    both, _, topology = problem.derived.get_or_compute(FIXED_PART, None,
                                                       lambda: _compute_fixed_part(problem))
    return topology, both


def plan_digest(plan: Plan) -> bytes:
    """A digest of ``plan``'s nodes per rank (by value)."""
    h = hashlib.blake2b(digest_size=20)
    _feed(h, [None if nodes is None else np.asarray(nodes, dtype=np.int64)
              for nodes in plan.nodes])
    return h.digest()


def _tally(states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(states, return_counts=True)`` of int64 ``states``: by counting when the
    values are small non-negative integers (no sort of 60,000 states per step of a
    65,536-node search), by sorting otherwise."""
    if len(states) and states.min() >= 0 and states.max() < 4 * len(states) + 4096:
        tally = np.bincount(states)
        values = np.flatnonzero(tally).astype(np.int64)
        return values, tally[values].astype(np.int64)
    values, counts = np.unique(states, return_counts=True)
    return values, counts.astype(np.int64)


def step_digest(problem: Problem, hint: Plan | None, keep: np.ndarray | None,
                fixed: dict[int, np.ndarray] | None, skip: frozenset[int]) -> bytes:
    """The digest of one :func:`solver.cpsat.build_model` call but its weights (see the
    module docstring): equal digests give the same model up to its objective's weights."""
    fixed_digest, classes = _fixed_part(problem)
    checkpoint()
    h = hashlib.blake2b(digest_size=20)
    h.update(fixed_digest)
    # node indices by value (an answer recalled from the last session holds int64
    # arrays, the search's incumbent int32 ones)
    hint_nodes = None if hint is None else [
        None if nodes is None else np.asarray(nodes, dtype=np.int64) for nodes in hint.nodes]
    _feed(h, hint_nodes)
    _feed(h, None if keep is None else np.packbits(np.asarray(keep, dtype=bool)))
    _feed(h, None if fixed is None else {int(j): np.asarray(n, dtype=np.int64)
                                         for j, n in fixed.items()})
    _feed(h, skip)
    checkpoint()
    n = problem.num_nodes
    if keep is None:
        seen = np.ones(n, dtype=bool)
    else:
        seen = np.asarray(keep, dtype=bool).copy()
        for nodes in [*(hint_nodes or []), *(fixed or {}).values()]:
            if nodes is not None:
                idx = np.asarray(nodes, dtype=np.int64)
                seen[idx[(idx >= 0) & (idx < n)]] = True
        for job in problem.jobs:
            for arr in (job.origin, job.running):
                idx = np.asarray(arr, dtype=np.int64)
                seen[idx[idx >= 0]] = True
    inside = np.flatnonzero(seen)
    health = np.asarray(problem.health, dtype=np.int64).copy()
    hosts = _pinned_hosts(problem, hint_nodes, fixed)
    if len(hosts):
        # a node a fixed whole-node job uses is no cell and no candidate: its health
        # counts only as "unhealthy or not" and in the sub-healthy term's constant,
        # which a hit sets again (ModelCache.get)
        health[hosts] = np.where(health[hosts] == UNHEALTHY, UNHEALTHY, -1)
    checkpoint()
    _feed(h, inside)
    _feed(h, np.asarray(problem.free, dtype=np.int64)[inside])
    _feed(h, health[inside])
    checkpoint()
    outside = ~seen
    if outside.any():
        free = np.asarray(problem.free, dtype=np.int64)[outside]
        unhealthy = (np.asarray(problem.health)[outside] == UNHEALTHY).astype(np.int64)
        span = 2 * (int(free.max()) + 1)
        states = classes[outside] * span + free * 2 + unhealthy
        values, counts = _tally(states)
        _feed(h, span)
        _feed(h, values)
        _feed(h, counts)
    return h.digest()


def _pinned_hosts(problem: Problem, hint_nodes: list[np.ndarray | None] | None,
                  fixed: dict[int, np.ndarray] | None) -> np.ndarray:
    """Nodes only fixed whole-node jobs use: their placed ranks' nodes, less every node
    another job's warm start or any job's running ranks use."""
    if not fixed:
        return np.zeros(0, dtype=np.int64)
    hosts: set[int] = set()
    for j, nodes in fixed.items():
        checkpoint()
        job = problem.jobs[int(j)]
        if job.whole_node:
            hosts.update(job.placed_nodes(np.asarray(nodes, dtype=np.int64)).tolist())
    for k, other in enumerate(hint_nodes or []):
        if other is not None and k not in fixed:
            checkpoint()
            hosts.difference_update(np.asarray(other, dtype=np.int64).tolist())
    for job in problem.jobs:
        hosts.difference_update(int(n) for n in job.running if n >= 0)
    return np.asarray(sorted(hosts), dtype=np.int64)


def _pinned_subhealthy(built: BuiltModel, problem: Problem,
                       weights: ResolvedWeights) -> int:
    """The sub-healthy term's constant of ``built``'s pinned jobs on ``problem``."""
    from solver.model.objective import ObjectiveBuilder

    return ObjectiveBuilder(built.variables.reg, problem, built.structure, built.variables,
                            weights, built.pinned).pinned_subhealthy()


@dataclass
class _Kept:
    built: BuiltModel
    weights: ResolvedWeights
    bound: int | None  # index of the objective's bound row, None: not re-weightable
    session: int  # ModelCache.session it was built in
    hosts_subhealthy: int  # the pinned jobs' sub-healthy nodes it was built with


def _bound_row(built: BuiltModel) -> int | None:
    """The index of ``built``'s last constraint when it is the objective's bound row
    ``objective <= best_possible`` as :func:`solver.cpsat.build_model` adds it, else
    ``None`` (the model is then reused with the same weights only)."""
    rows = built.model.proto.constraints
    if not len(rows):
        return None
    last = len(rows) - 1
    # ``has_linear`` first: reading ``.linear`` of another kind of constraint turns it
    # into an empty linear one (an infeasible model: seen on a model whose objective is a
    # constant, where the bound row is a constant constraint)
    if not rows[last].has_linear():
        return None
    expected = _bound_linear(built.objective, built.best_possible)
    return last if expected is not None and str(rows[last].linear) == expected else None


def _bound_linear(objective: Lin, best: int) -> str | None:
    """The bound row ``objective <= best`` as text, or ``None`` when CP-SAT does not make
    it a linear constraint (a constant objective)."""
    from ortools.sat.python import cp_model  # solver/ only, and not on the greedy path

    scratch = cp_model.CpModel()
    scratch.add(objective.expr() <= best)
    row = scratch.proto.constraints[0]
    return str(row.linear) if row.has_linear() else None


def _reweighted(kept: _Kept, weights: ResolvedWeights, hosts_subhealthy: int) -> BuiltModel:
    """``kept``'s model with the objective of ``weights`` and ``hosts_subhealthy``
    sub-healthy nodes under pinned jobs: the ``placed`` term, the sub-healthy term's
    constant, the objective and the bound row are set again as a build sets them (every
    other part of the model depends on neither)."""
    from ortools.sat.python import cp_model

    from solver.model.objective import placed_term
    from solver.model.variables import Lin

    built = kept.built
    assert kept.bound is not None
    old = built.terms.subhealthy
    subhealthy = Lin(list(old.terms), old.const - kept.hosts_subhealthy + hosts_subhealthy)
    terms = dataclasses.replace(
        built.terms, placed=placed_term(built.variables, weights, built.pinned),
        subhealthy=subhealthy)
    objective = terms.total(weights)
    built.model.hinted = None  # its value was the old objective's
    built.model.maximize(objective.expr())
    _, best = built.variables.reg.range_of(objective)
    scratch = cp_model.CpModel()
    scratch.add(objective.expr() <= best)
    # the whole row, whatever kind CP-SAT made of it (never read ``.linear`` of a row
    # that is not linear: that turns it into an empty linear one)
    built.model.proto.constraints[kept.bound].copy_from(scratch.proto.constraints[0])
    return dataclasses.replace(built, terms=terms, objective=objective, best_possible=best)


@dataclass(frozen=True)
class ModelCounts:
    """The CP-SAT models of one solve: handed back from a cache or built.

    Attributes
    ----------
    carried
        Kept models built by an earlier solve (session) of the same stored cluster.
    within
        Kept models built earlier in the same solve (a step repeated by the search).
    built
        Models built.
    """

    carried: int = 0
    within: int = 0
    built: int = 0

    @property
    def reused(self) -> int:
        """Models handed back instead of built (``carried + within``)."""
        return self.carried + self.within

    @property
    def total(self) -> int:
        """Models the solve used (``reused + built``)."""
        return self.reused + self.built


@dataclass
class ModelCache:
    """Built models of one stored cluster by :func:`step_digest`, bounded in number and
    in variables (least recently used dropped first).

    Attributes
    ----------
    hits, builds
        Models handed back / built through this cache (over its whole life).
    carried
        Of the hits, those on models built in an earlier session (:meth:`new_session`).
    reweighted
        Of the hits, those whose objective was set again (the automatic weights follow
        counts over the whole cluster, e.g. of sub-healthy nodes; a node under a fixed
        job turned sub-healthy or healthy).
    digest_seconds
        Seconds spent computing digests.
    """

    max_models: int = MAX_MODELS
    max_variables: int = MAX_VARIABLES
    hits: int = 0
    builds: int = 0
    carried: int = 0
    reweighted: int = 0
    session: int = 0
    digest_seconds: float = 0.0
    _models: OrderedDict[bytes, _Kept] = field(default_factory=OrderedDict, repr=False)
    _last_parts: tuple[bytes, bytes] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self._models)

    def new_session(self, problem: Problem | None = None) -> str | None:
        """Start counting a new solve: later hits on models built before are ``carried``.

        With ``problem``: why no kept model can fit it, when its nodes or jobs differ
        from the last session's (a note for the caller), else ``None``."""
        self.session += 1
        if problem is None:
            return None
        try:
            parts = input_parts(problem)
        except TypeError:
            return None
        last, self._last_parts = self._last_parts, parts
        if last is None or not self._models:
            return None
        if last[0] != parts[0]:
            return ("model reuse: the cluster's nodes changed since the last session; "
                    "every CP-SAT model is built afresh")
        if last[1] != parts[1]:
            return ("model reuse: the jobs changed since the last session (a job added, "
                    "removed or changed); every CP-SAT model is built afresh")
        return None

    @property
    def variables(self) -> int:
        """CP-SAT variables summed over the kept models."""
        return sum(len(k.built.variables.reg.variables) for k in self._models.values())

    def digest(self, problem: Problem, hint: Plan | None, keep: np.ndarray | None,
               fixed: dict[int, np.ndarray] | None, skip: frozenset[int]) -> bytes | None:
        """:func:`step_digest`, timed; ``None`` (build, keep nothing) when an input holds
        a value the digest does not know how to cover (logged: a gap in this module)."""
        started = time.perf_counter()
        try:
            return step_digest(problem, hint, keep, fixed, skip)
        except TypeError as exc:
            log.error("model reuse: %s; the model is built and not kept", exc)
            return None
        finally:
            self.digest_seconds += time.perf_counter() - started

    def get(self, key: bytes, problem: Problem, weights: ResolvedWeights) -> BuiltModel | None:
        """The model kept under ``key`` with ``weights``' objective, for ``problem``
        (counted as a hit), or ``None``."""
        kept = self._models.get(key)
        if kept is None:
            return None
        hosts = _pinned_subhealthy(kept.built, problem, weights)
        if kept.weights != weights or kept.hosts_subhealthy != hosts:
            if kept.bound is None:
                return None
            # out of the cache while its proto is patched: a cancelled patch leaves
            # nothing half-done behind
            del self._models[key]
            kept.built = _reweighted(kept, weights, hosts)
            kept.weights, kept.hosts_subhealthy = weights, hosts
            self._models[key] = kept
            self.reweighted += 1
        self._models.move_to_end(key)
        self.hits += 1
        if kept.session != self.session:
            self.carried += 1
        # same model; it answers for the current problem object (hints, recovery)
        return dataclasses.replace(kept.built, problem=problem)

    def put(self, key: bytes, built: BuiltModel, weights: ResolvedWeights) -> None:
        """Keep ``built`` (built with ``weights``) under ``key``; drop the least recently
        used beyond the bounds."""
        self.builds += 1
        size = len(built.variables.reg.variables)
        if size > self.max_variables or self.max_models <= 0:
            return
        old = self._models.pop(key, None)
        if old is not None:
            retain(old.built)
        self._models[key] = _Kept(built, weights, _bound_row(built), self.session,
                                  _pinned_subhealthy(built, built.problem, weights))
        total = self.variables
        while len(self._models) > self.max_models or total > self.max_variables:
            _, dropped = self._models.popitem(last=False)
            total -= len(dropped.built.variables.reg.variables)
            retain(dropped.built)  # freed at a safe time, never just before a deadline

    def mark(self) -> tuple[int, int, int]:
        """The counters now (``hits``, ``carried``, ``builds``), for :meth:`counts_since`."""
        return self.hits, self.carried, self.builds

    def counts_since(self, mark: tuple[int, int, int]) -> ModelCounts:
        """The models handed back and built since :meth:`mark` returned ``mark``."""
        carried = self.carried - mark[1]
        return ModelCounts(carried=carried, within=self.hits - mark[0] - carried,
                           built=self.builds - mark[2])

    def clear(self) -> None:
        """Drop every kept model."""
        for kept in self._models.values():
            retain(kept.built)
        self._models.clear()
