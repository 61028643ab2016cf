"""Lean large-neighbourhood steps (solver/model/focus.py, batches above 16,384 nodes).

A lean step lets an explicitly placed block take, of the single-node cells, only its own
ranks' cached nodes and its current nodes.  These tests switch lean steps on for small
generated batches (the threshold patched to 0) and check, for the first steps of the
search from the origin-first start: every block's current and cached nodes stay allowed,
the incumbent is a solution of the lean model (so a step is always feasible and its hint
representable), the step's answer is a valid placement, and the lean model really is
smaller than the full step model.  CP-SAT: 1 worker, seed 0, deterministic limits.
"""

from __future__ import annotations

import numpy as np
import pytest
from ortools.sat.python import cp_model

from benchmarks.generators import GenParams, generate_case
from heuristics.greedy import greedy_plan
from models.check import check
from models.compiled import Problem, compile_scenario
from models.objective import resolve_weights
from models.placement import Status
from models.plan import Plan, to_placement
from models.scenario import Family
from solver.cpsat import BuiltModel, add_hint, build_model
from solver.lns import _blockers, job_potential, reachable_misses
from solver.model import focus
from solver.model import structure as structure_module
from solver.model.focus import neighbourhood_mask, unit_keys
from solver.model.recover import recover_plan
from solver.model.structure import POOLED_PARENT
from solver.phases import better_start
from tests.solver.answers import objective_fixed_to_hint

STEPS = 3


def _problem(family: str) -> Problem:
    return compile_scenario(generate_case(GenParams(family, nodes=512, seed=3,
                                                    jobs=6)).scenario)


def _step(problem: Problem, plan: Plan, position: int) -> BuiltModel:
    j = job_potential(problem, plan)[position][2]
    hood = [j, *_blockers(problem, plan, j)]
    fixed = {k: np.asarray(n) for k, n in enumerate(plan.nodes)
             if k not in hood and n is not None}
    skip = frozenset(k for k, n in enumerate(plan.nodes) if k not in hood and n is None)
    keep = neighbourhood_mask(problem, plan, hood, unit_keys(problem))
    return build_model(problem, resolve_weights(problem), plan, keep, fixed, skip)


def _start(problem: Problem) -> Plan:
    return better_start(problem, greedy_plan(problem), resolve_weights(problem))


def _assert_step_keeps_incumbent_and_answers_validly(problem: Problem, built: BuiltModel,
                                                    plan: Plan) -> None:
    expected = add_hint(built, plan)
    assert objective_fixed_to_hint(built) == expected
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = 0.5
    solver.parameters.max_time_in_seconds = 60.0
    code = solver.solve(built.model)
    assert code in (cp_model.OPTIMAL, cp_model.FEASIBLE), solver.status_name(code)
    assert solver.objective_value >= expected
    values = {v.index: int(solver.value(v)) for v in built.variables.reg.variables}
    answer = recover_plan(problem, built.structure, built.variables, values, built.pinned)
    placement = to_placement(problem, answer, engine="cpsat", status=Status.FEASIBLE)
    assert check(problem, placement, include_vnpu=False) == []


@pytest.mark.parametrize("family", ["950", "a3", "850", "multilevel"])
def test_a_lean_step_keeps_the_incumbent_and_answers_validly(
        family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = _problem(family)
    plan = _start(problem)
    full_takes = [len(_step(problem, plan, p).variables.cell_take) for p in range(STEPS)]
    monkeypatch.setattr(focus, "LEAN_ABOVE_NODES", 0)
    lean_takes = []
    for position in range(STEPS):
        built = _step(problem, plan, position)
        structure = built.structure
        assert structure.group_cells is not None
        lean_takes.append(len(built.variables.cell_take))
        # every block may take its current nodes and its ranks' cached nodes
        for j, js in structure.jobs.items():
            job = problem.jobs[j]
            current = plan.nodes[j]
            for gid in js.by_level[js.leaf_level]:
                for r in js.groups[gid].ranks:
                    nodes = [int(job.origin[r])]
                    if current is not None:
                        nodes.append(int(current[r]))
                    for n in nodes:
                        c = structure.cell_of.get(n)
                        if c is not None:
                            assert structure.may_take(j, gid, c), (j, gid, n)
        # the incumbent is a solution of the lean model (the step is always feasible), and
        # what the step answers is a valid placement of the whole problem
        _assert_step_keeps_incumbent_and_answers_validly(problem, built, plan)
    # the restriction is not a no-op: some step has fewer block-cell variables
    assert sum(lean_takes) < sum(full_takes), (lean_takes, full_takes)
    assert all(lean <= full for lean, full in zip(lean_takes, full_takes))


def test_a_lean_950_step_pools_its_blocks_windows_and_keeps_the_incumbent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a small batch with node-level jobs in its first neighbourhoods
    problem = compile_scenario(generate_case(GenParams("950", nodes=1024, seed=3,
                                                       jobs=8)).scenario)
    plan = _start(problem)
    full = [_step(problem, plan, p) for p in range(STEPS)]
    monkeypatch.setattr(focus, "LEAN_ABOVE_NODES", 0)
    fewer_counts = fewer_nodes = False
    for position in range(STEPS):
        built = _step(problem, plan, position)
        structure = built.structure
        full_built = full[position]
        assert structure.pooled_windows == frozenset(structure.jobs)
        # one count of anonymous windows per job and rack, none per block
        assert {pid for _, pid, _ in built.variables.child_count} <= {POOLED_PARENT}
        # node-level 950 jobs keep their own nodes among their candidates
        for j, ordinary in structure.ordinary.items():
            mine = plan.nodes[j]
            if mine is not None:
                assert {int(n) for n in mine} <= set(ordinary.nodes)
        # the incumbent is a solution of the lean model (the step is always feasible), and
        # what the step answers is a valid placement of the whole problem
        _assert_step_keeps_incumbent_and_answers_validly(problem, built, plan)
        counts = len(built.variables.child_count)
        assert counts <= len(full_built.variables.child_count)
        fewer_counts |= counts < len(full_built.variables.child_count)
        nodes = sum(len(o.nodes) for o in structure.ordinary.values())
        full_nodes = sum(len(o.nodes) for o in full_built.structure.ordinary.values())
        assert nodes <= full_nodes
        fewer_nodes |= nodes < full_nodes
    # the restrictions are not no-ops
    assert fewer_counts
    assert fewer_nodes


def test_pooled_windows_lose_no_solution(monkeypatch: pytest.MonkeyPatch) -> None:
    # a lean 950 step with pooled window counts reaches the optimum of the same step with
    # a count per block (pooling is a reformulation, not a restriction)
    problem = compile_scenario(generate_case(GenParams("950", nodes=512, seed=3,
                                                       jobs=6)).scenario)
    plan = _start(problem)
    monkeypatch.setattr(focus, "LEAN_ABOVE_NODES", 0)
    best = []
    for pooled in (False, True):
        if not pooled:
            monkeypatch.setattr(structure_module.Structure, "pools_windows",
                                lambda self, j: False)
        else:
            monkeypatch.undo()
            monkeypatch.setattr(focus, "LEAN_ABOVE_NODES", 0)
        built = _step(problem, plan, 0)
        assert bool(built.structure.pooled_windows) and (
            pooled == any(pid == POOLED_PARENT for _, pid, _ in built.variables.child_count))
        assert built.variables.child_count  # the step has explicit blocks' windows
        add_hint(built, plan)
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = 0
        solver.parameters.max_time_in_seconds = 120.0
        code = solver.solve(built.model)
        assert code == cp_model.OPTIMAL, solver.status_name(code)
        best.append(round(solver.objective_value))
    assert best[0] == best[1]


def _missed_super_pod_job(problem: Problem, plan: Plan) -> tuple[int, np.ndarray]:
    """A placed super-pod job and the ranks of its group with the most missed cached ranks."""
    best: tuple[int, int, np.ndarray] | None = None
    for job in problem.jobs:
        nodes = plan.nodes[job.index]
        if job.family is not Family.SUPERPOD or nodes is None or job.tasks % job.sp_block:
            continue
        missed = (job.origin >= 0) & ~job.fault & (np.asarray(nodes) != job.origin)
        for g in range(job.tasks // job.sp_block):
            ranks = np.arange(g * job.sp_block, (g + 1) * job.sp_block)
            if best is None or int(missed[ranks].sum()) > best[0]:
                best = (int(missed[ranks].sum()), job.index, ranks)
    assert best is not None and best[0] >= 2, "no super-pod group misses two cached nodes"
    return best[1], best[2]


@pytest.mark.parametrize("family", ["a3", "850"])
def test_reachable_misses_drop_a_group_whose_super_pod_has_no_room(family: str) -> None:
    problem = _problem(family)
    plan = greedy_plan(problem)
    j, ranks = _missed_super_pod_job(problem, plan)
    job = problem.jobs[j]
    nodes = np.asarray(plan.nodes[j])
    missed = (job.origin >= 0) & ~job.fault & (nodes != job.origin)
    everything = np.ones(problem.num_nodes, dtype=bool)
    same_npus = problem.npus[np.maximum(job.origin, 0)] == job.npu_per_task
    group_pods = np.unique(problem.super_pod[job.origin[ranks][job.origin[ranks] >= 0]])
    assert len(group_pods) == 1  # the generator caches a group in one super pod
    # every node usable: each missed rank on a node of the job's kind counts
    assert reachable_misses(problem, job, nodes, everything) == int((missed & same_npus).sum())
    # the group's super pod one node short of the group, its missed cached nodes kept
    # usable first: none of its missed ranks counts any more, not only the one left out
    lost_nodes = job.origin[ranks][missed[ranks]]
    pod_nodes = np.flatnonzero(problem.super_pod == group_pods[0])
    assert len(pod_nodes) >= job.sp_block
    others = pod_nodes[~np.isin(pod_nodes, lost_nodes)]
    short = everything.copy()
    short[pod_nodes] = False
    short[np.concatenate([lost_nodes, others])[:job.sp_block - 1]] = True
    lost = int((missed[ranks] & same_npus[ranks]).sum())
    assert lost >= 2
    assert reachable_misses(problem, job, nodes, short) <= (
        reachable_misses(problem, job, nodes, everything) - lost)
    # the lean search's potentials never exceed the plain ones
    ranked = {t[2]: t[1] for t in job_potential(problem, plan, reachable=True)}
    plain = {t[2]: t[1] for t in job_potential(problem, plan)}
    assert all(ranked[k] <= plain[k] for k in plain)
