"""Every engine obeys the upstream vNPU rules of the validator: handmade cases of each rule,
hypothesis-generated mixed-kind clusters checked with the validator, and CP-SAT's optimum
equal to the best valid plan found by enumerating every plan of small clusters."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from heuristics.vnpu import (
    Candidate,
    VnpuState,
    candidate,
    greedy_vnpu,
    node_scores,
    take,
)
from models.check import check
from models.compiled import Problem
from models.objective import resolve_weights
from models.placement import PlacementFile, Status
from models.vnpu import (
    ASCEND_310P,
    VnpuPlan,
    check_vnpu,
    compile_vnpu,
    downgraded,
    vnpu_job_placements,
    vnpu_objective,
)
from solver.facade import solve
from solver.model.vnpu import solve_vnpu_cpsat
from tests.models.builders import entry, node, problem
from tests.models.test_vnpu import doc, vjob, vnode_row

ENGINES = ("greedy", "cpsat", "auto")


def answer(data: dict[str, Any], engine: str) -> tuple[Problem, Any]:
    prob = problem(data)
    result = solve(prob, engine=engine, time_limit=10.0, workers=1, seed=0,
                   deterministic_time=2.0)
    assert check(prob, result.placement) == []
    # the facade's safety net (an invalid engine answer replaced by greedy's) never fires
    assert not [note for note in result.notes if "BUG" in note]
    return prob, {jp.name: jp for jp in result.placement.jobs}


# ------------------------------------------------------ handmade cases of each rule


@pytest.mark.parametrize("engine", ENGINES)
def test_request_checked_against_the_nodes_own_kind(engine: str) -> None:
    """A 24-core high-level task fits a whole 910B2 card by size, but 910B2 refuses level
    high, and the 310P node has too few chips: pending with upstream's reason."""
    data = doc([vnode_row("p310", npus=2), vnode_row("b2", kind="910B2", npus=8)],
               [vjob("a", cores=24, vnpu_level="high")])
    _, jobs = answer(data, engine)
    assert not jobs["a"].placed
    assert "npu is 910B2, but cpu level is:high" in (jobs["a"].reason or "")


@pytest.mark.parametrize("engine", ENGINES)
def test_dvpp_request_not_placed_on_a_kind_without_dvpp(engine: str) -> None:
    """A 10-core DVPP task: 910B4's only chip is used up, 910B3 refuses DVPP yes."""
    used = {"id": 0, "free-cores": 0, "free-cpus": 0, "segmented": True}
    data = doc([vnode_row("b4", kind="910B4", npus=1, chips=[used]),
                vnode_row("b3", kind="910B3", npus=1)], [vjob("a", cores=10, vnpu_dvpp="yes")])
    _, jobs = answer(data, engine)
    assert not jobs["a"].placed
    assert "npu is 910B3, but dvpp label is:yes" in (jobs["a"].reason or "")
    free = doc([vnode_row("b4", kind="910B4", npus=1), vnode_row("b3", kind="910B3", npus=1)],
               [vjob("a", cores=10, vnpu_dvpp="yes")])
    _, jobs = answer(free, engine)
    assert jobs["a"].placed and jobs["a"].ranks == {"0": "b4"}


@pytest.mark.parametrize("engine", ENGINES)
def test_no_downgrade_where_the_full_request_fits(engine: str) -> None:
    data = doc([vnode_row("p", npus=1)], [vjob("a", cores=2, vnpu_level="high")])
    _, jobs = answer(data, engine)
    assert jobs["a"].placed and jobs["a"].downgraded == []


@pytest.mark.parametrize("engine", ENGINES)
def test_no_downgrade_to_match_an_unfinished_template(engine: str) -> None:
    data = doc([vnode_row("p", npus=2, unfinished_templates=["vir02_1c"])],
               [vjob("a", cores=2, vnpu_level="high")])
    _, jobs = answer(data, engine)
    assert not jobs["a"].placed
    assert "is using p, and not rewrite" in (jobs["a"].reason or "")


@pytest.mark.parametrize("engine", ENGINES)
def test_downgrade_where_upstream_takes_it(engine: str) -> None:
    row = vnode_row("p", npus=1, chips=[{"id": 0, "free-cores": 2, "free-cpus": 1,
                                         "segmented": True}])
    _, jobs = answer(doc([row], [vjob("a", cores=2, vnpu_level="high")]), engine)
    assert jobs["a"].placed and jobs["a"].downgraded == ["0"]


@pytest.mark.parametrize("engine", ENGINES)
def test_one_family_per_job(engine: str) -> None:
    """Two 10-core tasks: one whole 310P-10 chip and one 910B3 chip would take both kinds;
    every engine keeps the job in one family (greedy as upstream: the first task's)."""
    nodes = [vnode_row("p", npus=1, ai_cores=10), vnode_row("b3", kind="910B3", npus=1)]
    _, jobs = answer(doc(nodes, [vjob("a", tasks=2, cores=10)]), engine)
    assert not jobs["a"].placed or set(jobs["a"].ranks.values()) == {"b3"}
    _, jobs = answer(doc(nodes, [vjob("a", tasks=2, cores=10, ring_controller="ascend-910b")]),
                     engine)
    assert jobs["a"].placed and set(jobs["a"].ranks.values()) == {"b3"}
    _, jobs = answer(doc(nodes, [vjob("a", tasks=1, cores=10, ring_controller="ascend-310P")]),
                     engine)
    assert jobs["a"].placed and jobs["a"].ranks == {"0": "p"}
    # each family has room for one task only: only a job across both could be placed
    cut = vnode_row("b3", kind="910B3", npus=1, chips=[{"id": 0, "free-cores": 10,
                                                         "free-cpus": 3, "segmented": True}])
    _, jobs = answer(doc([nodes[0], cut], [vjob("a", tasks=2, cores=10)]), engine)
    assert not jobs["a"].placed


# ----------------------------------------------------------------- generated clusters

#: (chip kind, AI cores per chip, AI CPUs per chip, requests a job may make)
NODE_KINDS = [("Ascend310P", 8, 7, [1, 2, 4, 8]), ("Ascend310P", 10, 7, [1, 2, 4, 10]),
              ("910B2", 24, 6, [6, 12, 24]), ("910B3", 20, 6, [5, 10, 20]),
              ("910B4", 20, 6, [5, 10])]
#: 310P nodes whose requests are the downgradable vir02 / vir04 more often than not
DOWNGRADE_KINDS = [("Ascend310P", 8, 7, [1, 2, 2, 4, 4])]
#: a 310P-10 whole chip and a 910B3 slice both take 10 cores: the family rule decides
FAMILY_KINDS = [("Ascend310P", 10, 7, [10]), ("910B3", 20, 6, [10])]
FAMILIES = [None, None, "ascend-310P", "ascend-910b"]


@st.composite
def vnpu_clusters(draw: st.DrawFn, max_nodes: int = 3, max_chips: int = 2, max_jobs: int = 3,
                  max_tasks: int = 3, ordinary: bool = True,
                  kinds: list[tuple[str, int, int, list[int]]] | None = None,
                  cache: bool = False) -> dict[str, Any]:
    """Mixed-kind vNPU clusters: random chip states, unfinished templates, requests with
    random level, DVPP and family (and with ``cache`` an owner per job and cached nodes
    for some ranks)."""
    nodes: list[dict[str, Any]] = []
    sizes: set[int] = set()
    pool = kinds or NODE_KINDS
    for i in range(draw(st.integers(1, max_nodes))):
        kind, cores, cpus, requests = draw(st.sampled_from(pool))
        sizes.update(requests)
        chips = []
        for c in range(draw(st.integers(1, max_chips))):
            cut = draw(st.booleans())
            chips.append({
                "id": c, "free-cores": draw(st.integers(0, cores)) if cut else cores,
                "free-cpus": draw(st.integers(0, cpus)) if cut else cpus, "segmented": cut,
                "dvpp": draw(st.sampled_from(["yes", "null", "no"])) if cut else "yes",
                "unstable": draw(st.booleans()) if cut else False})
        extra: dict[str, Any] = {"ai_cores": cores}
        if kind == ASCEND_310P and draw(st.integers(0, 3)) == 0:
            extra["unfinished_templates"] = [draw(st.sampled_from(["vir02_1c", "vir02",
                                                                   "vir04_3c"]))]
        row = vnode_row(f"v{i}", kind=kind, npus=len(chips), chips=chips, **extra)
        row["health"] = draw(st.sampled_from(["healthy", "healthy", "healthy", "subhealthy"]))
        nodes.append(row)
    vjobs = []
    for j in range(draw(st.integers(1, max_jobs))):
        extra = {"vnpu_level": draw(st.sampled_from(["low", "high"])),
                 "vnpu_dvpp": draw(st.sampled_from(["null", "null", "yes", "no"]))}
        family = draw(st.sampled_from(FAMILIES))
        if family is not None:
            extra["ring_controller"] = family
        if cache:
            extra["owner_uid"] = f"u{j}"
        vjobs.append(vjob(f"j{j}", tasks=draw(st.integers(1, max_tasks)),
                          cores=draw(st.sampled_from(sorted(sizes) if kinds is None
                                                     else pool[0][3])),
                          priority=draw(st.integers(0, 1)), **extra))
    jobs = []
    if ordinary and draw(st.booleans()):
        nodes.append(node("o0", free=8))
        jobs.append({"name": "t", "tasks": 1, "npu": 4})
    entries = []
    if cache:
        names = [n["name"] for n in nodes]
        for item in vjobs:
            for r in range(item["tasks"]):
                if draw(st.booleans()):
                    entries.append(entry(item["owner-uid"], r, draw(st.sampled_from(names))))
    return doc(nodes, vjobs, jobs=jobs, cache=entries)


def loadable(data: dict[str, Any]) -> Problem | None:
    """The compiled scenario, None when its input is refused (no kind accepts a request)."""
    try:
        return problem(data)
    except Exception:  # an InputError: the generator drew a request no kind present takes
        return None


def vnpu_only(prob: Problem, plan: VnpuPlan) -> PlacementFile:
    return PlacementFile.model_construct(engine="t", jobs=vnpu_job_placements(prob, plan))


def score(prob: Problem, plan: VnpuPlan) -> int:
    w = resolve_weights(prob)
    return vnpu_objective(prob, plan, w.vnpu_placed, w.origin_hit, w.subhealthy)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.filter_too_much])
@given(data=st.one_of(vnpu_clusters(), vnpu_clusters(kinds=DOWNGRADE_KINDS),
                      vnpu_clusters(kinds=FAMILY_KINDS)))
def test_every_engine_answer_passes_the_validator(data: dict[str, Any]) -> None:
    prob = loadable(data)
    if prob is None:
        return
    greedy = greedy_vnpu(prob)
    assert check_vnpu(prob, vnpu_only(prob, greedy)) == []
    outcome = solve_vnpu_cpsat(prob, resolve_weights(prob), greedy, time_limit=10.0,
                               workers=1, seed=0, deterministic_time=1.0)
    assert outcome.plan is not None
    assert check_vnpu(prob, vnpu_only(prob, outcome.plan)) == []
    for engine in ENGINES:
        result = solve(prob, engine=engine, time_limit=10.0, workers=1, seed=0,
                       deterministic_time=1.0)
        assert check(prob, result.placement) == []
        assert not [note for note in result.notes if "BUG" in note]


def reference_greedy(prob: Problem) -> VnpuPlan:
    """The vNPU greedy written plainly: every node's predicate and every candidate's
    score for every rank (the engine keeps predicates per node and the last winner)."""
    view = compile_vnpu(prob)
    plan = VnpuPlan.empty(view)
    state = VnpuState.initial(view)
    natural = prob.natural_pos_list
    for j in view.queue:
        job = view.jobs[j]
        trial = state.copy()
        cached = [r for r in range(job.tasks) if job.origin[r] >= 0 and view.prefer_previous]
        order = cached + [r for r in range(job.tasks) if r not in cached]
        picks: dict[int, Candidate] = {}
        family = None
        for rank in order:
            cands = [c for v in range(len(view.nodes))
                     if isinstance(c := candidate(view, trial, j, v, family), Candidate)]
            if not cands:
                break
            scores = node_scores(prob, view, trial, j, rank, cands)
            best = max(range(len(cands)), key=lambda i: (
                scores[i], -natural[view.nodes[cands[i].position].node]))
            picks[rank] = cands[best]
            take(view, trial, cands[best])
            family = view.family(cands[best].position)
        if len(picks) < job.tasks:
            plan.reasons[j] = "not placed"
            continue
        state = trial
        plan.nodes[j] = [view.nodes[picks[r].position].node for r in range(job.tasks)]
        plan.chips[j] = [picks[r].chips for r in range(job.tasks)]
        plan.downgraded[j] = [r for r in range(job.tasks) if picks[r].downgraded]
    return plan


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.filter_too_much])
@given(data=st.one_of(vnpu_clusters(cache=True), vnpu_clusters(kinds=DOWNGRADE_KINDS),
                      vnpu_clusters(max_tasks=6, kinds=DOWNGRADE_KINDS, cache=True)))
def test_greedy_equals_the_plain_greedy(data: dict[str, Any]) -> None:
    """The greedy's shortcuts (one predicate per node and job, the last winner kept, the
    winner found in one pass without the RFC bonus) change no answer."""
    prob = loadable(data)
    if prob is None:
        return
    fast, plain = greedy_vnpu(prob), reference_greedy(prob)
    assert (fast.nodes, fast.chips, fast.downgraded) == (plain.nodes, plain.chips,
                                                         plain.downgraded)


def rank_options(prob: Problem, j: int) -> list[tuple[int, tuple[int, ...], bool]]:
    """Every (node index, chips, downgraded) one rank of vNPU job ``j`` could be given."""
    view = compile_vnpu(prob)
    out = []
    for v, vnode in enumerate(view.nodes):
        request = view.request(j, v)
        if request is None or not vnode.usable:
            continue
        ids = [c.id for c in vnode.chips]
        if request.is_whole:
            out.extend((vnode.node, combo, False)
                       for combo in itertools.combinations(ids, request.whole_chips))
            continue
        can_drop = vnode.kind == ASCEND_310P and downgraded(request) is not None
        for c in ids:
            out.append((vnode.node, (c,), False))
            if can_drop:
                out.append((vnode.node, (c,), True))
    return out


def best_valid_objective(prob: Problem) -> int:
    """The best vNPU objective over every plan the validator accepts (enumerated)."""
    view = compile_vnpu(prob)
    per_job: list[list[tuple[tuple[int, tuple[int, ...], bool], ...] | None]] = []
    for j, job in enumerate(view.jobs):
        options = rank_options(prob, j)
        per_job.append([None, *itertools.product(options, repeat=job.tasks)])
    best = None
    for combo in itertools.product(*per_job):
        plan = VnpuPlan.empty(view)
        for j, ranks in enumerate(combo):
            if ranks is None:
                plan.reasons[j] = "not placed"
                continue
            plan.nodes[j] = [n for n, _, _ in ranks]
            plan.chips[j] = [chips for _, chips, _ in ranks]
            plan.downgraded[j] = [r for r, (_, _, down) in enumerate(ranks) if down]
        if check_vnpu(prob, vnpu_only(prob, plan)):
            continue
        value = score(prob, plan)
        best = value if best is None else max(best, value)
    assert best is not None  # placing nothing is always valid
    return best


SMALL = {"max_nodes": 2, "max_chips": 2, "max_jobs": 2, "max_tasks": 2, "ordinary": False}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.filter_too_much])
@given(data=st.one_of(vnpu_clusters(**SMALL), vnpu_clusters(**SMALL, kinds=DOWNGRADE_KINDS),
                      vnpu_clusters(**{**SMALL, "max_chips": 1}, kinds=FAMILY_KINDS)))
def test_cpsat_optimum_is_the_best_valid_plan(data: dict[str, Any]) -> None:
    """Small generated clusters: CP-SAT proves optimal exactly the best objective among the
    plans the validator accepts (so it neither takes an upstream-illegal downgrade nor
    misses a legal one)."""
    prob = loadable(data)
    if prob is None:
        return
    view = compile_vnpu(prob)
    sizes = [len(rank_options(prob, j)) + 1 for j in range(len(view.jobs))]
    plans = 1
    for j, job in enumerate(view.jobs):
        plans *= (sizes[j] - 1) ** job.tasks + 1
    if plans > 3000:
        return  # too many to enumerate here
    outcome = solve_vnpu_cpsat(prob, resolve_weights(prob), greedy_vnpu(prob),
                               time_limit=20.0, workers=1, seed=0, deterministic_time=10.0)
    assert outcome.plan is not None and outcome.status is Status.OPTIMAL
    assert check_vnpu(prob, vnpu_only(prob, outcome.plan)) == []
    assert outcome.objective == score(prob, outcome.plan) == best_valid_objective(prob)
