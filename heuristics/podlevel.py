"""Pod-level rescheduling: a partly running job repaired around its running ranks.

With ``pod-rescheduling=on`` (or ``process-recover-enable=on``) upstream's rescheduler
deletes only the fault pods; the other pods keep running and the job is repaired around
them (reference §2.3.3 steps 4–7, §2.5.5, §2.6.9, §4.4).  A scenario says so with a
pending job whose ``running-ranks`` hold the running ranks (``JobView.running``): they
never move and count for every hard constraint of the job; this module places the others.
Every path returns a node per rank for the *whole* job (running ranks on their nodes).

The stage (``pending-sessions``, upstream ``PendingSessionNum``) decides two things.  Which
pods are deleted (§4.4: super-pod jobs the whole logical super pod from 6 sessions,
950 jobs the rack window from 3 and the block from 6, multilevel jobs one level more per
6 sessions, everything at 12) is the rescheduler's step *between* sessions: ``simulate``
applies it, and an imported dump shows it (the deleted pods are pending).  Where the
pending pods may go is this module's, per family:

* **Ordinary** (§4.4 "placement after deletion"): the pending ranks are placed by the
  ordinary pipeline (``heuristics.ordinary``) on their own, with their cache entries and
  fault ranks; capacity is the only hard rule.
* **A3 / 850** (§2.3.3, ``selectForPodRescheduling`` + ``selectNodeFromOriginSuperPod`` /
  ``selectNodeForPodLevelRescheduling``): a block whose ranks all run is kept; a block with
  running ranks is completed inside the physical super pod of its running ranks (a
  hard-block job has no other choice): each pending rank takes its cached node when that
  node is free there, the other positions the pool of that super pod in the RFC's carving
  order (healthy nodes nobody mentions, sub-healthy, former fault nodes last), a fault rank
  off its old node when another node is left.  Too few free nodes in that super pod:
  upstream's "selectNodeFromOriginVSuperPod failed, unschedulable".  Blocks with no
  running rank then go through the normal selection (``heuristics.superpod``: RFC level 1
  back to their origin super pod, then the four passes).  The stage does not change this:
  A3 is pod-level whenever some pods run (``SchedulingTaskNum != len(Tasks)``), and 850's
  label test only decides what the rescheduler deletes.
* **950** (§2.5.5, ``selectNodesByRack``), pod level (``pod-rescheduling`` below 12
  sessions, or ``process-recover``):

  - ``pending-sessions < 3`` (``tpRescheduleStage``, ``getSameRackNodes``): every pending
    rank goes to a free node of the **same rack as its old node** (its cache entry; a
    window with running ranks: their rack).  No such node: upstream's "selected nodes
    ... is invalid" (the block would be short).
  - ``3 <= pending-sessions < 6`` (``spRescheduleStage``, ``getRackId`` +
    ``getAnotherRackNodes``): a window without running ranks goes to a rack of the
    block's super pod with room: the rack of its first old node when it still has room,
    else the smallest such rack (best fit, then rack id); none: "there is no enough nodes
    for whole rack schedule".  The super pod is hard when the block has running ranks and
    upstream's rule when it has none.
  - ``pending-sessions >= 6``, and jobs that are not pod-level: nothing is preselected; a
    block with running ranks is completed within the hard rules (its super pod; a window
    with running ranks in their rack, the others in the best-fit rack that holds their
    cached nodes first), blocks with no running rank go through the strategy chain.
* **Multilevel** (§2.6.9, ``rescheduleWithSuperPods`` with the running ranks pinned):
  see ``heuristics.multilevel.context`` (``Context._around_running``).

Inference jobs (``inferserviceid``; MindIE's ``app`` + ``jobID``) that are not partly
running go to :mod:`heuristics.inference`.

CP-SAT (``solver.cpsat``) models partly running ordinary jobs (their pending ranks as an
ordinary job) and those of the other families around their running ranks
(``solver.model.podscope``: the anchors above and the 950 stage rules restrict where each
group may go; ``solver.model.podlevel``), so the stage rules above hold for its answers
too; a job whose running ranks break its own group tree keeps this module's answer.

Deviations (the RFC's rule or a valid answer over upstream's code):

* Upstream's pod-level quirk (§2.3.3 step 7, §7 item 11: a fault position stays
  unreplaced when the first free node examined already belongs to the logical super pod)
  and 950's copy-of-the-free-map quirk (§2.5.5) are not reproduced: every pending rank
  gets exactly one node, never one already taken.
* Upstream waits 10 s for resources of a whole-job reschedule and checks
  ``IsMasterFault``/graceful deletion; a scenario has no such state: the job is planned.
* A fault rank prefers a node other than its old one (RFC) but may take it when nothing
  else is left in its rack / super pod / domain (upstream's same-rack rule may give the
  same node back, "reschedule-in-place").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from heuristics.base import JobOutcome
from heuristics.multilevel import place_multilevel
from heuristics.ordinary import place_ordinary_job
from heuristics.rack import _Selector
from heuristics.state import ClusterState
from heuristics.superpod import _Selection, superpod_candidates
from models.check import running_rank_reason
from models.compiled import JobView, Problem
from models.limits import listing
from models.scenario import Family
from models.validation import UB_MEM_RACKS, JobShape

#: Pending sessions from which 950 repairs leave the old rack (``tpRescheduleStage``).
TP_STAGE = 3
#: Pending sessions from which 950 repairs leave the old super pod (``spRescheduleStage``)
#: and super-pod / multilevel jobs lose their logical super pod / one more level.
SP_STAGE = 6
#: Pending sessions from which pod-level rescheduling stops (job-level).
JOB_STAGE = 12


def pod_level(job: JobView) -> bool:
    """Upstream's ``isPodLevelRescheduling``: ``pod-rescheduling`` below 12 pending
    sessions, or ``process-recover`` (its ``PendingSessionNum <= 12`` clause aside)."""
    return (job.pod_rescheduling and job.pending_sessions < JOB_STAGE) or job.process_recover


def rack_stage(job: JobView) -> int:
    """950 repair stage: 0 same rack, 3 same super pod, 6 anywhere (within hard rules)."""
    if not pod_level(job) or job.pending_sessions >= SP_STAGE:
        return SP_STAGE
    return TP_STAGE if job.pending_sessions >= TP_STAGE else 0


def place_pod_level(problem: Problem, j: int, state: ClusterState) -> JobOutcome:
    """Place the pending ranks of partly running job ``j`` around its running ranks.

    Returns
    -------
    JobOutcome
        A node per rank of the whole job (running ranks on their nodes), or a reason.
    """
    job = problem.jobs[j]
    broken = running_rank_reason(problem, j)
    if broken is not None:
        return JobOutcome.fail(broken)
    if not job.rules.grouped:
        out = _ordinary(problem, job, state)
    elif job.family is Family.SUPERPOD:
        out = _superpod(problem, job, state)
    elif job.rules.in_rack:
        out = _rack(problem, job, state)
    else:
        out = place_multilevel(problem, j, state)
    if out.nodes is not None:
        fixed = job.running >= 0
        if (out.nodes < 0).any() or (out.nodes[fixed] != job.running[fixed]).any():
            raise AssertionError(f"pod-level path moved a running rank of job '{job.name}' "
                                 "or left a rank without a node; this is a bug")
    return out


def _full(job: JobView) -> np.ndarray:
    return job.running.astype(np.int64).copy()


def _ordinary(problem: Problem, job: JobView, state: ClusterState) -> JobOutcome:
    pending = np.flatnonzero(job.to_place)
    view = replace(job, tasks=len(pending), origin=job.origin[pending],
                   fault=job.fault[pending], running=np.zeros(0, dtype=np.int32))
    found = place_ordinary_job(problem, view, state)
    if found.nodes is None:
        return found
    out = _full(job)
    out[pending] = found.nodes
    return JobOutcome(out)


def _majority(values: list[int]) -> int:
    """Most frequent value, ties to the smallest."""
    counts = Counter(values)
    return min(counts, key=lambda v: (-counts[v], v))


# --------------------------------------------------------------------------- A3 / 850


def _superpod(problem: Problem, job: JobView, state: ClusterState) -> JobOutcome:
    sel = _Selection(problem, job, superpod_candidates(problem, job, state))
    running = job.running.tolist()
    sel.fixed = {r for r in range(job.tasks) if running[r] >= 0}
    sp = sel.sp
    for b in range(sel.k):
        ranks = range(b * sp, (b + 1) * sp)
        held = [running[r] for r in ranks if running[r] >= 0]
        if not held:
            continue  # no running rank: the normal selection places the block
        pending = [r for r in ranks if running[r] < 0]
        pods = sorted({int(problem.super_pod[n]) for n in held})
        if len(pods) > 1 and not job.soft:
            return JobOutcome.fail(f"running ranks of block {b} of job '{job.name}' sit in "
                                   f"super pods {pods}: the block cannot be completed")
        s = _majority([int(problem.super_pod[n]) for n in held])
        out = [running[r] for r in ranks]
        have = len(sel.pods.get(s, []))
        if have >= len(pending):
            got = sel.carve(s, pending) if pending else []
        elif job.soft:  # the rest spills to the roomiest other super pods (soft only)
            got = sel.carve(s, pending[:have]) if have else []
            for other in sorted(sel.pod_ids, key=lambda x: (-len(sel.pods[x]), x)):
                need = len(pending) - len(got)
                take = min(need, len(sel.pods[other]))
                if other != s and take:
                    got += sel.carve(other, pending[len(got):len(got) + take])
            if len(got) < len(pending):
                return JobOutcome.fail(f"selectNodeFromOriginVSuperPod failed, unschedulable: "
                                       f"block {b} needs {len(pending)} nodes, "
                                       f"{len(got)} are free")
        else:
            return JobOutcome.fail(
                f"selectNodeFromOriginVSuperPod failed, unschedulable: block {b} of job "
                f"'{job.name}' has {len(pending)} pending ranks but its super pod {s} has "
                f"{have} free nodes")
        for r, n in zip(pending, got, strict=True):
            out[r - b * sp] = n
        sel.blocks[b] = out
    return sel.run()


# --------------------------------------------------------------------------- 950


def _rack(problem: Problem, job: JobView, state: ClusterState) -> JobOutcome:
    sel = _Selector(problem, job, state)
    running = job.running.tolist()
    origin = job.origin.tolist()
    sp_of, rack_of = sel.sp_of, sel.rack_of
    for r in range(job.tasks):
        if running[r] >= 0:
            sel.nodes[r] = running[r]
            sel.fixed.add(r)
    held_all = [running[r] for r in range(job.tasks) if running[r] >= 0]
    if sel.ub:  # the whole job stays in the UB-memory domain of its running ranks
        domains = {(sp_of[n], rack_of[n] // UB_MEM_RACKS) for n in held_all}
        if len(domains) > 1:
            return JobOutcome.fail(f"running ranks of UB-memory job '{job.name}' sit in "
                                   f"several UB-memory domains {listing(sorted(domains))}")
        (home_sp, home_dom), = domains
        for s in list(sel.racks):
            for k in list(sel.racks[s]):
                if s != home_sp or k // UB_MEM_RACKS != home_dom:
                    for n in sel.racks[s].pop(k):
                        sel.in_pool[n] = 0
            if not sel.racks[s]:
                del sel.racks[s]
    stage = rack_stage(job)
    for b in range(sel.blocks):
        ranks = list(sel._block_ranks(b))
        pending = [r for r in ranks if running[r] < 0]
        held = [running[r] for r in ranks if running[r] >= 0]
        if not pending:
            sel.done.add(b)
            continue
        if held:
            pods = sorted({sp_of[n] for n in held})
            if len(pods) > 1 and not job.soft:
                return JobOutcome.fail(f"running ranks of block {b} of job '{job.name}' sit "
                                       f"in super pods {pods}: the block cannot be completed")
            sp = _majority([sp_of[n] for n in held])
        else:
            old = [origin[r] for r in pending if origin[r] >= 0]
            if stage >= SP_STAGE or not old:
                continue  # the strategy chain places the whole block
            sp = _majority([sp_of[n] for n in old])
        error = _complete_block(sel, job, b, sp, stage)
        if error is not None:
            return JobOutcome.fail(error)
        sel.done.add(b)
        if stage < TP_STAGE:
            # same-rack stage: a fault rank left on its old node had no other node in its
            # rack (it chose first); the fault safety net must not move it to another rack
            sel.fixed.update(pending)
    err = sel.run()
    if err is not None:
        return JobOutcome.fail(err)
    sel.keep_faults_away()
    return JobOutcome(np.asarray(sel.nodes, dtype=np.int64))


def _complete_block(sel: _Selector, job: JobView, b: int, sp: int, stage: int) -> str | None:
    """Fill the pending ranks of block ``b`` inside super pod ``sp`` window by window."""
    running = job.running.tolist()
    origin = job.origin.tolist()
    racks = sel.racks.get(sp, {})
    for w in range(sel.windows):
        lo = b * sel.spb + w * sel.tpb
        window = list(range(lo, lo + sel.tpb))
        pending = [r for r in window if running[r] < 0]
        if not pending:
            continue
        held = [running[r] for r in window if running[r] >= 0]
        need = len(pending)
        if held:
            homes = sorted({sel.rack_of[n] for n in held})
            if len(homes) > 1 and not job.soft:
                return (f"running ranks of rack window {lo // sel.tpb} of job '{job.name}' "
                        f"sit in racks {homes}: the window cannot be completed")
            rk = _majority([sel.rack_of[n] for n in held])
        else:
            old = [origin[r] for r in pending if origin[r] >= 0 and sel.sp_of[origin[r]] == sp]
            first = sel.rack_of[old[0]] if old else -1
            if stage < TP_STAGE and first >= 0:
                rk = first  # getSameRackNodes: the rack of the old node
            else:
                roomy = [k for k in racks if len(racks[k]) >= need]
                if not roomy:
                    return ("there is no enough nodes for whole rack schedule (job "
                            f"'{job.name}', block {b}, super pod {sp})")
                if first in roomy:  # getRackId: the rack of the first fault node
                    rk = first
                else:
                    votes = sel._origin_counts(pending)
                    rk = min(roomy, key=lambda k: (-votes[(sp, k)], len(racks[k]), k))
        if len(racks.get(rk, [])) < need:
            shown = [sel.problem.node_names[sel.nodes[r]] if sel.nodes[r] >= 0 else "-"
                     for r in window]
            return (f"selected nodes {shown} is invalid: job '{job.name}' needs {need} free "
                    f"nodes in rack {rk} of super pod {sp} for rack window {lo // sel.tpb}, "
                    f"{len(racks.get(rk, []))} are free")
        sel._fill(sp, rk, pending)
    return None


def deleted_ranks(shape: JobShape, tasks: int, pending: set[int], sessions: int,
                  pod_rescheduling: bool, process_recover: bool) -> set[int]:
    """The ranks upstream's rescheduler has deleted after ``sessions`` pending sessions of
    a pod-level repair (reference §4.4, ``isNormalTaskCanBeDelete``): the ``pending`` ones
    plus the running ranks the escalation adds.

    * process-recover, or neither switch: only the pending (fault) pods;
    * ``pod-rescheduling`` from 12 sessions: every rank (job level);
    * A3/850 from 6: every rank of a logical super pod holding a pending rank;
    * 950 from 3: every rank of a rack window (tp-block) holding one; from 6: of a block;
    * multilevel: the pending rank's group widened by ``sessions // 6`` levels;
    * ordinary: only the pending pods until 12.
    """
    out = set(pending)
    if process_recover or not pod_rescheduling or not pending:
        return out
    if sessions >= JOB_STAGE:
        return set(range(tasks))
    size = 0
    if shape.family is Family.SUPERPOD and sessions >= SP_STAGE:
        size = shape.sp_block
    elif shape.family is Family.RACK:
        if sessions >= SP_STAGE:
            size = shape.sp_block
        elif sessions >= TP_STAGE:
            size = shape.tp_block
    elif shape.family is Family.MULTILEVEL and sessions >= SP_STAGE and shape.levels:
        level = min(sessions // SP_STAGE, len(shape.levels))
        size = shape.levels[level - 1]
    if size > 1:
        for r in pending:
            start = r - r % size
            out.update(range(start, min(tasks, start + size)))
    return out


__all__ = ["JOB_STAGE", "SP_STAGE", "TP_STAGE", "deleted_ranks", "place_pod_level",
           "pod_level", "rack_stage"]
