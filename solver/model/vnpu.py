"""CP-SAT model of the vNPU jobs: chip-level variables, one method per rule family.

vNPU nodes serve vNPU jobs only, so the vNPU part of a scenario is a problem of its own:
its objective is the vNPU part of :func:`models.objective.evaluate` (placed jobs with their
priority weight, origin hits with the common hit weight, sub-healthy nodes used), and the
whole objective is the other jobs' part plus this one.

Variables: ``placed[j]``; per rank, node and chip a Boolean per way the rank may take that
chip — a slice with the full request, a slice with the 310P AI-CPU downgrade, or a chip of
a whole-card request (``k`` of them with the rank's node literal).  Per node and template a
"slices of this template here" literal and a "whole card here" literal carry the
one-template rule; a "node used" literal (only on sub-healthy nodes) carries the penalty
and is tied both ways, so the solver's objective equals ``evaluate()`` on every solution.
A job whose candidate nodes span both handler families gets a family literal its ranks
follow; the downgraded literals exist only on 310P nodes for vir02/vir04 and are tied to
upstream's condition (the full request fits no chip of the node, :meth:`downgrade_rule`).
Nodes that refuse the job's request on their own chip kind get no literal.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from models.compiled import SUBHEALTHY, Problem
from models.objective import ResolvedWeights
from models.placement import Status
from models.scenario import VnpuDvpp
from models.vnpu import (
    ASCEND_310P,
    TEMPLATES,
    Request,
    VnpuPlan,
    VnpuProblem,
    compile_vnpu,
    downgraded,
)
from models.vnpu_rules import FAMILY_310P
from solver.model.cancel import BuildCancelled, CancelToken, cancellable, checkpoint

#: Above this many chip literals the model is not built (the greedy answer stays).
MAX_LITERALS = 200_000
#: Building costs about this much per literal: the model is built only when building
#: takes at most half the budget (building cannot be interrupted).
SECONDS_PER_LITERAL = 30e-6


@dataclass(frozen=True, slots=True)
class ChipUse:
    """One literal: rank ``rank`` of job ``job`` takes chip ``chip`` of node ``v``."""

    job: int
    rank: int
    v: int  # position in VnpuProblem.nodes
    chip: int  # chip id
    request: Request
    downgraded: bool
    var: cp_model.IntVar


@dataclass
class VnpuModel:
    """The model and its literals."""

    model: cp_model.CpModel
    view: VnpuProblem
    placed: list[cp_model.IntVar] = field(default_factory=list)
    uses: list[ChipUse] = field(default_factory=list)
    # (job, rank, v) → literal "rank on node" (slices: the sum of its chip literals)
    on_node: dict[tuple[int, int, int], cp_model.LinearExprT] = field(default_factory=dict)
    whole_rank: dict[tuple[int, int, int], cp_model.IntVar] = field(default_factory=dict)
    used: dict[int, cp_model.IntVar] = field(default_factory=dict)  # sub-healthy v → used
    # image locality: (job, v) → "the job has a slice on node v", on nodes
    # holding the job's image
    image_host: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)
    objective: cp_model.LinearExprT = 0


class VnpuModelBuilder:
    """Builds the vNPU model for one problem and weights."""

    def __init__(self, problem: Problem, weights: ResolvedWeights) -> None:
        self.problem = problem
        self.weights = weights
        self.view = compile_vnpu(problem)
        self.m = VnpuModel(cp_model.CpModel(), self.view)
        self.hinted: VnpuPlan | None = None  # the plan given to :meth:`hint`

    def literal_count(self) -> int:
        """Chip literals the model would have (to decide whether to build it)."""
        view = self.view
        count = 0
        for j, job in enumerate(view.jobs):
            for v, vnode in enumerate(view.nodes):
                if vnode.usable and view.request(j, v) is not None:
                    count += job.tasks * len(vnode.chips) * 2
        return count

    def build(self) -> VnpuModel:
        """Every variable, constraint and the objective."""
        self.variables()
        self.ranks()
        self.chip_capacity()
        self.whole_cards()
        self.dvpp()
        self.one_template()
        self.one_family()
        self.downgrade_rule()
        self.objective()
        return self.m

    # ------------------------------------------------------------------ variables

    def variables(self) -> None:
        """``placed`` per job and a literal per (rank, node, chip, way)."""
        m, view = self.m, self.view
        for j, job in enumerate(view.jobs):
            m.placed.append(m.model.new_bool_var(f"placed[{j}]"))
            for v, vnode in enumerate(view.nodes):
                checkpoint()
                request = view.request(j, v)
                if not vnode.usable or request is None:
                    continue
                ways = [(request, False)]
                lower = downgraded(request) if vnode.kind == ASCEND_310P else None
                if lower is not None:
                    ways.append((lower, True))
                for r in range(job.tasks):
                    if request.is_whole:
                        on = m.model.new_bool_var(f"whole[{j},{r},{v}]")
                        m.whole_rank[(j, r, v)] = on
                        m.on_node[(j, r, v)] = on
                        for chip in vnode.chips:
                            if vnode.untouched(chip):
                                lit = m.model.new_bool_var(f"w[{j},{r},{v},{chip.id}]")
                                m.uses.append(ChipUse(j, r, v, chip.id, request, False, lit))
                        continue
                    lits = []
                    for way, is_down in ways:
                        for chip in vnode.chips:
                            if chip.unstable or chip.free_cores < way.cores or (
                                    chip.free_cpus < way.cpus):
                                continue
                            if way.dvpp is VnpuDvpp.YES and chip.dvpp is not VnpuDvpp.YES:
                                continue
                            if way.dvpp is VnpuDvpp.NULL and chip.dvpp is VnpuDvpp.NO:
                                continue
                            if vnode.unfinished and vnode.unfinished != {way.template}:
                                continue
                            lit = m.model.new_bool_var(f"s[{j},{r},{v},{chip.id},{int(is_down)}]")
                            m.uses.append(ChipUse(j, r, v, chip.id, way, is_down, lit))
                            lits.append(lit)
                    if lits:
                        m.on_node[(j, r, v)] = sum(lits)

    # ------------------------------------------------------------------ constraints

    def ranks(self) -> None:
        """Gang: every rank of a placed job on exactly one node, none of an unplaced one."""
        m = self.m
        per_rank: dict[tuple[int, int], list[cp_model.LinearExprT]] = {}
        for (j, r, _), expr in m.on_node.items():
            per_rank.setdefault((j, r), []).append(expr)
        for j, job in enumerate(self.view.jobs):
            for r in range(job.tasks):
                exprs = per_rank.get((j, r), [])
                m.model.add(sum(exprs) == m.placed[j])

    def chip_capacity(self) -> None:
        """Slices on a chip fit its free AI cores and AI CPUs."""
        m = self.m
        per_chip: dict[tuple[int, int], list[ChipUse]] = {}
        for use in m.uses:
            if not use.request.is_whole:
                per_chip.setdefault((use.v, use.chip), []).append(use)
        for (v, chip_id), uses in per_chip.items():
            checkpoint()
            chip = self.view.nodes[v].chip(chip_id)
            assert chip is not None
            m.model.add(sum(u.request.cores * u.var for u in uses) <= chip.free_cores)
            m.model.add(sum(u.request.cpus * u.var for u in uses) <= chip.free_cpus)

    def whole_cards(self) -> None:
        """A whole-card rank takes ``k`` untouched chips of its node, each alone."""
        m = self.m
        per_rank: dict[tuple[int, int, int], list[cp_model.IntVar]] = {}
        per_chip: dict[tuple[int, int], list[ChipUse]] = {}
        for use in m.uses:
            per_chip.setdefault((use.v, use.chip), []).append(use)
            if use.request.is_whole:
                per_rank.setdefault((use.job, use.rank, use.v), []).append(use.var)
        for key, on in m.whole_rank.items():
            j, _, v = key
            request = self.view.request(j, v)
            assert request is not None
            m.model.add(sum(per_rank.get(key, [])) == request.whole_chips * on)
        for uses in per_chip.values():
            whole = [u.var for u in uses if u.request.is_whole]
            if not whole:
                continue
            slices = [u.var for u in uses if not u.request.is_whole]
            taken = sum(whole)
            m.model.add(taken <= 1)
            if slices:
                m.model.add(sum(slices) <= len(slices) * (1 - taken))

    def dvpp(self) -> None:
        """At most one DVPP slice per chip, never next to a ``null`` slice."""
        m = self.m
        per_chip: dict[tuple[int, int], list[ChipUse]] = {}
        for use in m.uses:
            if not use.request.is_whole:
                per_chip.setdefault((use.v, use.chip), []).append(use)
        for uses in per_chip.values():
            yes = [u.var for u in uses if u.request.dvpp is VnpuDvpp.YES]
            if not yes:
                continue
            null = [u.var for u in uses if u.request.dvpp is VnpuDvpp.NULL]
            m.model.add(sum(yes) <= 1)
            if null:
                m.model.add(sum(null) <= len(null) * (1 - sum(yes)))

    def one_template(self) -> None:
        """A node's slices of this batch share one template (the unfinished one if any,
        filtered in :meth:`variables`); a whole-card rank joins no slice (order-free)."""
        m = self.m
        per_node: dict[int, dict[str, list[cp_model.IntVar]]] = {}
        for use in m.uses:
            if not use.request.is_whole:
                per_node.setdefault(use.v, {}).setdefault(use.request.template or "",
                                                          []).append(use.var)
        wholes: dict[int, list[cp_model.IntVar]] = {}
        for (_, _, v), on in m.whole_rank.items():
            wholes.setdefault(v, []).append(on)
        for v in set(per_node) | set(wholes):
            here: list[cp_model.IntVar] = []
            for t, lits in per_node.get(v, {}).items():
                flag = m.model.new_bool_var(f"tpl[{v},{t}]")
                for lit in lits:
                    m.model.add_implication(lit, flag)
                here.append(flag)
            if v in wholes:
                if self.view.nodes[v].unfinished:
                    for on in wholes[v]:
                        m.model.add(on == 0)
                flag = m.model.new_bool_var(f"whole-here[{v}]")
                for on in wholes[v]:
                    m.model.add_implication(on, flag)
                here.append(flag)
            if len(here) > 1:
                m.model.add_at_most_one(here)

    def one_family(self) -> None:
        """A job's ranks take nodes of one handler family (310P or 910): a job whose
        candidate nodes span both gets a "310P" literal its ranks follow (a job bound by its
        ``ring-controller`` has candidates of its family only)."""
        m, view = self.m, self.view
        per_job: dict[int, list[tuple[int, cp_model.LinearExprT]]] = {}
        for (j, _, v), expr in m.on_node.items():
            per_job.setdefault(j, []).append((v, expr))
        for j, items in per_job.items():
            if len({view.family(v) for v, _ in items}) < 2:
                continue
            is_310p = m.model.new_bool_var(f"family-310P[{j}]")
            for v, expr in items:
                if view.family(v) == FAMILY_310P:
                    m.model.add(expr <= is_310p)
                else:
                    m.model.add(expr <= 1 - is_310p)

    def downgrade_rule(self) -> None:
        """A rank takes the 310P AI-CPU downgrade only where upstream would: its full
        request fits no chip of the node once the plan's other ranks are placed
        (:func:`models.vnpu.full_fits_elsewhere`).

        On the rank's own chip that means the chip's AI CPUs are all taken (without the
        rank the full request would fit as soon as one more CPU were free); on every other
        chip of the node, per full shape (vir02: 2/2, vir04: 4/4) and node, a literal "some
        rank of that shape is downgraded here" requires the chip to lack the AI cores or
        the AI CPUs of the full request, or to hold a DVPP ``yes`` slice.
        """
        m, view = self.m, self.view
        per_chip: dict[tuple[int, int], list[ChipUse]] = {}
        down: dict[tuple[int, str], list[ChipUse]] = {}
        for use in m.uses:
            if use.request.is_whole:
                continue
            per_chip.setdefault((use.v, use.chip), []).append(use)
            if use.downgraded:
                full = self._full_template(use)
                down.setdefault((use.v, full), []).append(use)
        for use in (u for uses in down.values() for u in uses):
            chip = view.nodes[use.v].chip(use.chip)
            assert chip is not None
            cpus = sum(u.request.cpus * u.var for u in per_chip[(use.v, use.chip)])
            m.model.add(cpus >= chip.free_cpus).only_enforce_if(use.var)
        for (v, full_name), uses in down.items():
            checkpoint()
            vnode = view.nodes[v]
            full_cores, full_cpus, _ = TEMPLATES[ASCEND_310P][full_name]
            here = m.model.new_bool_var(f"downgraded-here[{v},{full_name}]")
            for use in uses:
                m.model.add_implication(use.var, here)
            for chip in vnode.chips:
                if (chip.unstable or chip.dvpp is VnpuDvpp.NO or chip.free_cores < full_cores
                        or chip.free_cpus < full_cpus):
                    continue  # the full request never fits this chip
                on_chip = per_chip.get((v, chip.id), [])
                reasons: list[cp_model.IntVar] = []
                for unit, limit, need in ((0, chip.free_cores, full_cores),
                                          (1, chip.free_cpus, full_cpus)):
                    used = sum((u.request.cores if unit == 0 else u.request.cpus) * u.var
                               for u in on_chip)
                    short = m.model.new_bool_var(f"short[{v},{chip.id},{full_name},{unit}]")
                    m.model.add(used >= limit - need + 1).only_enforce_if(short)
                    reasons.append(short)
                yes = [u.var for u in on_chip if u.request.dvpp is VnpuDvpp.YES]
                if yes:
                    has_yes = m.model.new_bool_var(f"dvpp-yes[{v},{chip.id},{full_name}]")
                    m.model.add(sum(yes) >= 1).only_enforce_if(has_yes)
                    reasons.append(has_yes)
                m.model.add_bool_or(reasons).only_enforce_if(here)

    def _full_template(self, use: ChipUse) -> str:
        """The full request's template of a downgraded use (vir02 or vir04)."""
        request = self.view.request(use.job, use.v)
        assert request is not None and request.template is not None
        return request.template

    # ------------------------------------------------------------------ objective

    def objective(self) -> None:
        """Placed jobs, origin hits and sub-healthy nodes used, as ``evaluate()``."""
        m, view, w = self.m, self.view, self.weights
        terms: list[cp_model.LinearExprT] = [
            w.vnpu_placed[j] * m.placed[j] for j in range(len(view.jobs))]
        per_node: dict[int, list[cp_model.LinearExprT]] = {}
        for (j, r, v), expr in m.on_node.items():
            per_node.setdefault(v, []).append(expr)
            if view.nodes[v].node == view.jobs[j].origin[r] and w.origin_hit:
                terms.append(w.origin_hit * expr)
        per_job_node: dict[tuple[int, int], list[cp_model.LinearExprT]] = {}
        for (j, _r, v), expr in m.on_node.items():
            if w.vnpu_image_of(j):
                per_job_node.setdefault((j, v), []).append(expr)
        for (j, v), exprs in per_job_node.items():
            image = view.jobs[j].spec.image
            mask = self.problem.image_mask(image.name if image is not None else None)
            if mask is None or not mask[view.nodes[v].node]:
                continue
            host = m.model.new_bool_var(f"img[{j},{v}]")
            m.image_host[(j, v)] = host
            total = sum(exprs)
            m.model.add(total >= 1).only_enforce_if(host)
            m.model.add(total == 0).only_enforce_if(~host)
            terms.append(w.vnpu_image_of(j) * host)
        if w.subhealthy:
            for v, exprs in per_node.items():
                if self.problem.health_list[view.nodes[v].node] != SUBHEALTHY:
                    continue
                used = m.model.new_bool_var(f"used[{v}]")
                m.used[v] = used
                total = sum(exprs)
                m.model.add(total >= 1).only_enforce_if(used)
                m.model.add(total == 0).only_enforce_if(~used)
                terms.append(-w.subhealthy * used)
        m.objective = sum(terms)
        m.model.maximize(m.objective)

    # ------------------------------------------------------------------ hint, answer

    def hint(self, plan: VnpuPlan) -> None:
        """Hint every literal from ``plan`` (the greedy answer)."""
        m = self.m
        self.hinted = plan
        chosen: set[tuple[int, int, int, int, bool]] = set()
        for j, nodes in plan.as_mapping().items():
            down = set(plan.downgraded[j])
            for r, n in enumerate(nodes):
                v = self.view.position[n]
                for c in plan.chips[j][r]:
                    chosen.add((j, r, v, c, r in down))
        for j, var in enumerate(m.placed):
            m.model.add_hint(var, plan.nodes[j] is not None)
        for use in m.uses:
            m.model.add_hint(use.var, (use.job, use.rank, use.v, use.chip, use.downgraded)
                             in chosen)
        for (j, r, v), on in m.whole_rank.items():
            hosts = plan.nodes[j]
            m.model.add_hint(on, hosts is not None and self.view.nodes[v].node == hosts[r])
        for (j, v), host in m.image_host.items():
            hosts = plan.nodes[j]
            m.model.add_hint(host, hosts is not None and self.view.nodes[v].node in hosts)

    def read(self, solver: cp_model.CpSolver) -> VnpuPlan:
        """The solver's answer as a plan."""
        view = self.view
        plan = VnpuPlan.empty(view)
        picked: dict[tuple[int, int], tuple[int, list[int], bool]] = {}
        for use in self.m.uses:
            if solver.boolean_value(use.var):
                v, chips, down = picked.get((use.job, use.rank), (use.v, [], use.downgraded))
                chips.append(use.chip)
                picked[(use.job, use.rank)] = (v, chips, down)
        for j, job in enumerate(view.jobs):
            if not solver.boolean_value(self.m.placed[j]):
                # greedy's (upstream's) reason when greedy did not place it either
                hinted = self.hinted.reasons[j] if self.hinted is not None else None
                plan.reasons[j] = hinted or ("not placed by CP-SAT (capacity taken by better "
                                             "jobs)")
                continue
            ranks = [picked[(j, r)] for r in range(job.tasks)]
            plan.nodes[j] = [view.nodes[v].node for v, _, _ in ranks]
            plan.chips[j] = [tuple(sorted(chips)) for _, chips, _ in ranks]
            plan.downgraded[j] = [r for r, (_, _, down) in enumerate(ranks) if down]
        return plan


@dataclass
class VnpuOutcome:
    """CP-SAT's answer for the vNPU jobs."""

    plan: VnpuPlan | None
    objective: int | None
    bound: int | None
    status: Status | None
    wall_seconds: float
    notes: list[str] = field(default_factory=list)
    #: CP-SAT's deterministic time used (0 when the model was not searched)
    deterministic_seconds: float = 0.0


def solve_vnpu_cpsat(problem: Problem, weights: ResolvedWeights, hint: VnpuPlan, *,
                     time_limit: float, workers: int = 1, seed: int = 0,
                     deterministic_time: float | None = None) -> VnpuOutcome:
    """Solve the vNPU model warm-started from ``hint`` within ``time_limit`` seconds."""
    started = time.perf_counter()
    builder = VnpuModelBuilder(problem, weights)
    count = builder.literal_count()
    if count > MAX_LITERALS or count * SECONDS_PER_LITERAL > time_limit / 2:
        return VnpuOutcome(None, None, None, None, time.perf_counter() - started,
                           [f"vNPU model not built: {count} chip literals for a "
                            f"{time_limit:.3g} s budget (greedy's vNPU answer kept)"])
    # building is Python work that cannot be interrupted but at checkpoints: they raise
    # once the budget is spent, and greedy's answer stays
    try:
        with cancellable(CancelToken(started + time_limit)):
            built = builder.build()
            builder.hint(hint)
    except BuildCancelled:
        return VnpuOutcome(None, None, None, None, time.perf_counter() - started,
                           ["vNPU model: building was cancelled at the deadline (greedy's "
                            "vNPU answer kept)"])
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.max_time_in_seconds = max(0.001, time_limit - (time.perf_counter() - started))
    params.num_workers = max(1, workers)
    params.random_seed = seed
    # as the main model (solver.cpsat.search_parameters): identical nodes and chips make
    # symmetry detection and probing take seconds (20 nodes x 8 chips: no solution in 5 s
    # with them, optimal in about 1 s without)
    params.symmetry_level = 0
    params.catch_sigint_signal = False  # as search_parameters: Ctrl-C is Python's
    params.max_presolve_iterations = 1
    params.cp_model_probing_level = 0
    if deterministic_time is not None:
        params.max_deterministic_time = deterministic_time
    code = solver.solve(built.model)
    wall = time.perf_counter() - started
    used = float(solver.deterministic_time)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return VnpuOutcome(None, None, None, None, wall, ["vNPU model: no solution in time"],
                           used)
    status = Status.OPTIMAL if code == cp_model.OPTIMAL else Status.FEASIBLE
    return VnpuOutcome(builder.read(solver), round(solver.objective_value),
                       round(solver.best_objective_bound), status, wall,
                       deterministic_seconds=used)
