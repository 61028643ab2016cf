"""Decision variables of the counted CP-SAT model.

Every variable is registered with a name so that hints can address each one and tests can
check that the warm start covers them all.  Auxiliary variables (objective terms defined by
``max``/``mod``/``div``/reification) are registered with a Python rule that computes their
value from the others, so a complete hint is derived mechanically from a placement.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ortools.sat.python import cp_model

from models.compiled import Problem
from models.validation import UB_MEM_RACKS
from solver.model.cancel import checked, checkpoint
from solver.model.structure import POOLED_PARENT, JobStructure, Structure, avoided_cells

Var = cp_model.IntVar
Assignment = dict[int, int]  # variable index → value
Rule = Callable[[Assignment], int]
#: Terms of a linear expression handled between two cancellation checkpoints (the
#: objective of an 8,192-node batch has tens of thousands: summed, bounded or copied in
#: one go they hold the worker past its deadline).
CHUNK_TERMS = 4096


def term_chunks(terms: list[tuple[Var, int]]) -> Iterator[list[tuple[Var, int]]]:
    """``terms`` in slices of :data:`CHUNK_TERMS` with a cancellation checkpoint before
    each (for sums longer than that; shorter ones are handled in one go)."""
    for start in range(0, len(terms), CHUNK_TERMS):
        checkpoint()
        yield terms[start:start + CHUNK_TERMS]


class Lin:
    """A linear expression ``Σ coef·var + const`` that can also be evaluated in Python."""

    __slots__ = ("const", "terms")

    def __init__(self, terms: list[tuple[Var, int]] | None = None, const: int = 0) -> None:
        self.terms: list[tuple[Var, int]] = list(terms or [])
        self.const = const

    def add(self, var: Var, coef: int = 1) -> Lin:
        """Add ``coef·var`` in place."""
        if coef:
            self.terms.append((var, coef))
        return self

    def plus(self, other: Lin, factor: int = 1) -> Lin:
        """Add ``factor·other`` in place."""
        terms = other.terms
        if len(terms) <= CHUNK_TERMS:  # the common case, without a generator
            self.terms.extend((v, c * factor) for v, c in terms)
        else:
            for part in term_chunks(terms):
                self.terms.extend((v, c * factor) for v, c in part)
        self.const += factor * other.const
        return self

    @property
    def is_const(self) -> bool:
        """Whether the expression has no variable."""
        return not self.terms

    def expr(self) -> Any:
        """The CP-SAT expression."""
        return lin_expr(self.terms, self.const)

    def value(self, values: Assignment) -> int:
        """Value under an assignment."""
        return lin_value(self.terms, self.const, values)


@dataclass
class Registry:
    """All variables of the model, with value rules for the auxiliary ones."""

    model: cp_model.CpModel
    variables: list[Var] = field(default_factory=list)
    rules: dict[int, Rule] = field(default_factory=dict)
    bounds: dict[int, tuple[int, int]] = field(default_factory=dict)

    def int_var(self, lb: int, ub: int, name: str) -> Var:
        """A new integer variable."""
        checkpoint()
        var = self.model.new_int_var(lb, ub, name)
        self.variables.append(var)
        self.bounds[var.index] = (lb, ub)
        return var

    def bool_var(self, name: str) -> Var:
        """A new Boolean variable."""
        checkpoint()
        var = self.model.new_bool_var(name)
        self.variables.append(var)
        self.bounds[var.index] = (0, 1)
        return var

    def aux(self, var: Var, rule: Rule) -> Var:
        """Register ``rule`` as the way to compute ``var`` from the other variables."""
        self.rules[var.index] = rule
        return var

    def range_of(self, lin: Lin) -> tuple[int, int]:
        """Bounds of a linear expression from its variables' bounds."""
        lo = hi = lin.const
        terms = lin.terms if len(lin.terms) <= CHUNK_TERMS else checked(lin.terms, CHUNK_TERMS)
        for var, coef in terms:
            vlo, vhi = self.bounds[var.index]
            if coef >= 0:
                lo += coef * vlo
                hi += coef * vhi
            else:
                lo += coef * vhi
                hi += coef * vlo
        return lo, hi

    # -------------------------------------------------------------- auxiliaries
    def define(self, lin: Lin, name: str) -> Var:
        """A variable equal to ``lin``."""
        lo, hi = self.range_of(lin)
        var = self.int_var(lo, hi, name)
        self.model.add(var == lin.expr())
        return self.aux(var, lin.value)

    def modulo(self, lin: Lin, m: int, name: str) -> Lin:
        """``lin mod m`` for a non-negative ``lin`` (a constant when ``lin`` is)."""
        if m == 1:
            return Lin()
        lin = reduce_modulo(lin, m)
        if lin.is_const:
            return Lin(const=lin.const % m)
        base = self.define(lin, f"{name}.v")
        target = self.int_var(0, m - 1, name)
        self.model.add_modulo_equality(target, base, m)
        self.aux(target, partial(_mod_rule, base.index, m))
        return Lin([(target, 1)])

    def divide(self, lin: Lin, m: int, name: str) -> Lin:
        """``lin // m`` for a non-negative ``lin`` (a constant when ``lin`` is)."""
        if lin.is_const:
            return Lin(const=lin.const // m)
        if m == 1:
            return Lin(list(lin.terms), lin.const)
        if all(coef % m == 0 for _, coef in lin.terms):
            # the variable part is a multiple of m: the quotient is linear
            return Lin([(v, c // m) for v, c in lin.terms], lin.const // m)
        base = self.define(lin, f"{name}.v")
        lo, hi = self.range_of(lin)
        target = self.int_var(max(0, lo // m), max(0, hi // m), name)
        self.model.add_division_equality(target, base, m)
        self.aux(target, partial(_div_rule, base.index, m))
        return Lin([(target, 1)])

    def positive_part(self, lin: Lin, name: str) -> Lin:
        """``max(0, lin)``."""
        if lin.is_const:
            return Lin(const=max(0, lin.const))
        lo, hi = self.range_of(lin)
        if lo >= 0:
            return Lin(list(lin.terms), lin.const)
        if hi <= 0:
            return Lin()
        target = self.int_var(0, hi, name)
        self.model.add_max_equality(target, [lin.expr(), 0])
        self.aux(target, partial(_pos_rule, lin))
        return Lin([(target, 1)])

    def when(self, literal: Var, lin: Lin, name: str) -> Lin:
        """``lin`` if ``literal`` else 0 (``lin`` must be non-negative)."""
        lo, hi = self.range_of(lin)
        target = self.int_var(min(0, lo), max(0, hi), name)
        self.model.add(target == lin.expr()).only_enforce_if(literal)
        self.model.add(target == 0).only_enforce_if(~literal)
        self.aux(target, partial(_when_rule, literal.index, lin))
        return Lin([(target, 1)])

    def any_of(self, literals: list[Var], name: str) -> Var:
        """A Boolean equal to the OR of ``literals``."""
        if len(literals) == 1:
            return literals[0]
        target = self.bool_var(name)
        self.model.add_max_equality(target, literals)
        self.aux(target, partial(_any_rule, [v.index for v in literals]))
        return target


def reduce_modulo(lin: Lin, m: int) -> Lin:
    """An expression congruent to ``lin`` modulo ``m`` with fewer variables.

    Terms with a negative coefficient that is a multiple of ``m`` are dropped: the value
    changes by a multiple of ``m`` and can only grow, so a non-negative ``lin`` stays
    non-negative.  (Left-node counts lose whole groups at a time, which is why a job's own
    usage usually vanishes from its fragment score.)
    """
    kept = [(v, c) for v, c in lin.terms if not (c < 0 and c % m == 0)]
    if len(kept) == len(lin.terms):
        return lin
    return Lin(kept, lin.const)


def _mod_rule(base: int, m: int, vals: Assignment) -> int:
    return vals[base] % m


def _div_rule(base: int, m: int, vals: Assignment) -> int:
    return vals[base] // m


def _pos_rule(lin: Lin, vals: Assignment) -> int:
    return max(0, lin.value(vals))


def _when_rule(literal: int, lin: Lin, vals: Assignment) -> int:
    return lin.value(vals) if vals[literal] else 0


def _any_rule(literals: list[int], vals: Assignment) -> int:
    return max(vals[i] for i in literals)


def ge1_rule(lin: Lin, vals: Assignment) -> int:
    """1 when ``lin >= 1``."""
    return int(lin.value(vals) >= 1)


def product_rule(a: int, b: int, vals: Assignment) -> int:
    """Product of two variables' values."""
    return vals[a] * vals[b]


def lin_value(terms: list[tuple[Var, int]], const: int, values: Assignment) -> int:
    """Value of ``Σ coef·var + const`` under ``values``."""
    if len(terms) <= CHUNK_TERMS:  # the common case, without a generator
        return const + sum(coef * values[var.index] for var, coef in terms)
    return const + sum(sum(coef * values[var.index] for var, coef in part)
                       for part in term_chunks(terms))


def lin_expr(terms: list[tuple[Var, int]], const: int = 0) -> Any:
    """The CP-SAT expression of ``Σ coef·var + const``.

    Up to :data:`CHUNK_TERMS` terms it is one ``LinearExpr.weighted_sum`` call; a longer
    sum is one such call per :data:`CHUNK_TERMS` terms, with a cancellation checkpoint
    before each, added up by one ``LinearExpr.sum``: a single call over 10^5 terms is
    20-40 ms of work without a checkpoint.  CP-SAT flattens either form into the same
    rows (same variables in the same order, repeated variables merged), so the model
    does not depend on how the sum was cut.
    """
    if not terms:
        return const
    checkpoint()
    if len(terms) == 1 and const == 0:
        var, coef = terms[0]
        return var if coef == 1 else coef * var
    if len(terms) <= CHUNK_TERMS:  # the common case, one call
        expr = cp_model.LinearExpr.weighted_sum([v for v, _ in terms], [c for _, c in terms])
    else:
        expr = cp_model.LinearExpr.sum([
            cp_model.LinearExpr.weighted_sum([v for v, _ in part], [c for _, c in part])
            for part in term_chunks(terms)])
        checkpoint()
    return expr + const if const else expr


@dataclass
class ModelVariables:
    """The variables of the counted model, by role.

    Keys use job index ``j``, group id ``g`` (see :class:`structure.Group`), domain id
    ``d``, cell id ``c``, rank ``r`` and node index ``n``.
    """

    reg: Registry
    placed: dict[int, Var] = field(default_factory=dict)
    tree: dict[tuple[int, int], Var] = field(default_factory=dict)  # (j, tree)
    explicit: dict[tuple[int, int, int], Var] = field(default_factory=dict)  # (j, g, d)
    child_count: dict[tuple[int, int, int], Var] = field(default_factory=dict)  # (j, g, d)
    anon_count: dict[tuple[int, int, int], Var] = field(default_factory=dict)  # (j, level, d)
    cell_take: dict[tuple[int, int, int], Var] = field(default_factory=dict)  # (j, g, c)
    pool_take: dict[tuple[int, int], Var] = field(default_factory=dict)  # (j, c)
    hit: dict[tuple[int, int], Var] = field(default_factory=dict)  # (j, r)
    fault_return: dict[tuple[int, int, int], Var] = field(default_factory=dict)  # (j, g, node)
    node_ranks: dict[tuple[int, int], Var] = field(default_factory=dict)  # (j, n) ordinary
    node_uses: dict[tuple[int, int], Var] = field(default_factory=dict)  # (j, n): ranks ≥ 1
    touched: dict[int, Var] = field(default_factory=dict)  # n: any node-level rank on it
    node_fault_return: dict[tuple[int, int], Var] = field(default_factory=dict)  # (j, n)
    ub_domain: dict[tuple[int, int], Var] = field(default_factory=dict)  # (j, rack // 16)
    group_level: dict[tuple[int, int], int] = field(default_factory=dict)  # (j, g) → level
    group_index: dict[tuple[int, int, int], list[Var]] | None = None  # see group_count
    # partly running jobs (solver.model.podlevel): group g of level li in domain d
    pod_dom: dict[tuple[int, int, int, int], Var] = field(default_factory=dict)  # (j, li, g, d)


def group_count(mv: ModelVariables, js: JobStructure, li: int, d: int) -> Lin:
    """Groups of job ``js.job`` at level ``li`` placed in domain ``d``.

    Explicit groups there, anonymous groups counted there, and the counted (non-explicit)
    children of explicit parents there.  The terms come from an index built on first use
    (after :func:`create_variables`, which creates every variable counted here).
    """
    checkpoint()
    index = mv.group_index
    if index is None:
        index = mv.group_index = _group_index(mv)
    out = Lin()
    for var in index.get((js.job, li, d), ()):
        out.add(var)
    return out


def _group_index(mv: ModelVariables) -> dict[tuple[int, int, int], list[Var]]:
    """``(job, level, domain)`` → the variables :func:`group_count` sums, in its order."""
    index: dict[tuple[int, int, int], list[Var]] = {}
    explicit: dict[tuple[int, int, int], list[Var]] = {}
    child: dict[tuple[int, int, int], list[Var]] = {}
    for (j, gid, d), var in checked(mv.explicit.items()):
        explicit.setdefault((j, mv.group_level[(j, gid)], d), []).append(var)
    for (j, pid, d), var in checked(mv.child_count.items()):
        child.setdefault((j, mv.group_level[(j, pid)] + 1, d), []).append(var)
    keys = set(explicit) | set(child) | set(mv.anon_count)
    for key in checked(keys):
        terms = list(explicit.get(key, ()))
        anon = mv.anon_count.get(key)
        if anon is not None:
            terms.append(anon)
        terms.extend(child.get(key, ()))
        index[key] = terms
    return index


def cell_usage(mv: ModelVariables, structure: Structure) -> dict[int, Lin]:
    """Whole nodes used per cell by every job (node-level touches included)."""
    usage: dict[int, Lin] = {}
    for (_, _, c), var in checked(mv.cell_take.items(), 1024):
        usage.setdefault(c, Lin()).add(var)
    for (_, c), var in checked(mv.pool_take.items(), 1024):
        usage.setdefault(c, Lin()).add(var)
    for n, var in checked(mv.touched.items(), 1024):
        owner = structure.cell_of.get(n)
        if owner is not None:
            usage.setdefault(owner, Lin()).add(var)
    return usage


def create_variables(
    model: cp_model.CpModel, problem: Problem, structure: Structure
) -> ModelVariables:
    """Create every structural and preference variable (objective auxiliaries come later)."""
    reg = Registry(model)
    mv = ModelVariables(reg)
    for j, js in structure.jobs.items():
        mv.placed[j] = reg.bool_var(f"placed[{j}]")
        for t in js.trees:
            mv.tree[(j, t)] = reg.bool_var(f"tree[{j},{t}]")
        for group in js.groups:
            mv.group_level[(j, group.id)] = group.level
            for d in group.pref_domains:
                mv.explicit[(j, group.id, d)] = reg.bool_var(f"x[{j},{group.id},{d}]")
        leaf = js.leaf_level
        # anonymous group counts per candidate domain at every level
        for li, cands in enumerate(js.candidates):
            size = js.sizes[li]
            count = problem.jobs[j].tasks // size
            for d in cands:
                mv.anon_count[(j, li, d)] = reg.int_var(0, count, f"na[{j},{li},{d}]")
        # anonymous children of explicit groups, per child domain inside its pref domains
        # (pooled over the groups: one count per child domain; see POOLED_PARENT)
        pooled: dict[int, int] = defaultdict(int)
        for group in js.groups:
            if group.level == leaf or not group.pref_domains:
                continue
            below = set(js.candidates[group.level + 1])
            kids = len(group.children)
            for d in group.pref_domains:
                for child in structure.domains[d].children:
                    if child not in below:
                        continue
                    if structure.pools_windows(j):
                        pooled[child] += kids
                    else:
                        mv.child_count[(j, group.id, child)] = reg.int_var(
                            0, kids, f"nc[{j},{group.id},{child}]")
        if pooled:
            mv.group_level[(j, POOLED_PARENT)] = 0
            for child, most in sorted(pooled.items()):
                mv.child_count[(j, POOLED_PARENT, child)] = reg.int_var(
                    0, most, f"nc[{j},*,{child}]")
        # explicit leaf groups take nodes from the cells of their preferred domains
        eligible = set(js.eligible_cells)
        size = js.sizes[leaf]
        for gid in js.by_level[leaf]:
            group = js.groups[gid]
            for d in group.pref_domains:
                for c in structure.domains[d].cells:
                    if c in eligible and structure.may_take(j, gid, c):
                        cap = min(size, structure.cells[c].size)
                        mv.cell_take[(j, gid, c)] = reg.int_var(0, cap, f"k[{j},{gid},{c}]")
        # the anonymous pool of the job, per eligible cell of a candidate leaf domain
        leaf_cands = set(js.candidates[leaf])
        avoided = avoided_cells(structure, problem.jobs[j])
        for c in js.eligible_cells:
            if c in avoided:  # taken by explicit groups only (exact fault returns)
                continue
            if not structure.may_take(j, -1, c):  # a lean step: another job's cached node
                continue
            cell = structure.cells[c]
            did = _leaf_domain_of(structure, js.kinds[leaf], c, cell.tree)
            if did in leaf_cands:
                cap = min(cell.size, problem.jobs[j].tasks)
                mv.pool_take[(j, c)] = reg.int_var(0, cap, f"p[{j},{c}]")
        job = problem.jobs[j]
        if job.ub_memory and job.tasks > 1:
            for u in sorted({structure.domains[d].key[2] // UB_MEM_RACKS  # type: ignore[operator]
                             for d in js.candidates[leaf]}):
                mv.ub_domain[(j, u)] = reg.bool_var(f"ub[{j},{u}]")
        # hits and fault returns of explicit leaf groups
        for gid in checked(js.by_level[leaf], 64):
            group = js.groups[gid]
            for r in group.ranks:
                n = int(job.origin[r])
                if n < 0:
                    continue
                origin_cell = structure.cell_of.get(n)
                if origin_cell is None or (j, gid, origin_cell) not in mv.cell_take:
                    continue
                if job.fault[r]:
                    if (j, gid, n) not in mv.fault_return:
                        mv.fault_return[(j, gid, n)] = reg.bool_var(f"fr[{j},{gid},{n}]")
                elif job.prefer_previous:
                    mv.hit[(j, r)] = reg.bool_var(f"hit[{j},{r}]")
    for j, os_ in structure.ordinary.items():
        job = problem.jobs[j]
        mv.placed[j] = reg.bool_var(f"placed[{j}]")
        per_node_ranks: dict[int, int] = {}
        for n in os_.nodes:
            cap = min(job.tasks, int(problem.free[n]) // job.npu_per_task)
            if cap <= 0:
                continue
            per_node_ranks[n] = cap
            mv.node_ranks[(j, n)] = reg.int_var(0, cap, f"nr[{j},{n}]")
            mv.node_uses[(j, n)] = reg.bool_var(f"nu[{j},{n}]")
        for r in checked(range(job.tasks), 1024):
            n = int(job.origin[r])
            if n < 0 or n not in per_node_ranks:
                continue
            if job.fault[r]:
                if (j, n) not in mv.node_fault_return:
                    mv.node_fault_return[(j, n)] = reg.int_var(
                        0, per_node_ranks[n], f"nfr[{j},{n}]")
            elif job.prefer_previous:
                mv.hit[(j, r)] = reg.bool_var(f"hit[{j},{r}]")
    for j, choices in structure.pod_choices.items():
        for (li, g), domains in sorted(choices.choices.items()):
            for d in sorted(domains):
                mv.pod_dom[(j, li, g, d)] = reg.bool_var(f"pd[{j},{li},{g},{d}]")
    for n in checked(structure.ordinary_nodes):
        if any((j, n) in mv.node_ranks for j in structure.ordinary):
            mv.touched[n] = reg.bool_var(f"t[{n}]")
    return mv


def _leaf_domain_of(structure: Structure, kind: str, cell: int, tree: int) -> int:
    if kind == "ml":
        return structure.leaf_domain[(cell, "ml", tree)]
    return structure.leaf_domain.get((cell, kind, -1), -1)


leaf_domain_of = _leaf_domain_of
