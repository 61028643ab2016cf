"""The chips the running ranks hold per node, kept per compiled problem and moved with
each delta instead of counted again.

:func:`models.validation.running_chips` walks every running rank of a scenario (the
running jobs' and the pending jobs' running ranks): about 16 ms at 65,536 nodes, paid by
every ``PATCH`` that checks ``free`` against the running chips (a node value changed, a
job or running job submitted).  :func:`chips_after` gives the same count for the scenario
after a delta from the one before it, by the items the delta added and removed (compared
by identity: an item a delta did not touch is the same object in both scenarios), so a
pod event pays for its job's ranks, not for the cluster's.
``tests/solver/service/test_cache_incremental.py`` compares it with the full walk after
random delta sequences.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Iterable

from models.compiled import Problem
from models.scenario import Job, RunningJob, Scenario
from models.validation import running_chips

#: Per compiled problem, the chips its scenario's running ranks hold per node.
_CHIPS: weakref.WeakKeyDictionary[Problem, Counter[str]] = weakref.WeakKeyDictionary()


def chips_of(problem: Problem) -> Counter[str]:
    """``running_chips(problem.scenario)``, counted once per problem (do not change it)."""
    chips = _CHIPS.get(problem)
    if chips is None:
        chips = _CHIPS[problem] = running_chips(problem.scenario)
    return chips


def remember_chips(problem: Problem, chips: Counter[str]) -> None:
    """Record ``chips`` as ``problem``'s (its scenario's running ranks hold them)."""
    _CHIPS[problem] = chips


def carry_chips(problem: Problem, new: Problem) -> None:
    """Record ``problem``'s count, when it has one, as ``new``'s (whose scenario has the
    same running ranks)."""
    chips = _CHIPS.get(problem)
    if chips is not None:
        _CHIPS[new] = chips


def _add(chips: Counter[str], items: Iterable[Job | RunningJob], sign: int) -> None:
    for item in items:
        ranks = item.ranks if isinstance(item, RunningJob) else item.running_ranks
        for node in ranks.values():
            chips[node] += sign * item.npu_per_task


def chips_after(problem: Problem, scenario: Scenario) -> Counter[str]:
    """``running_chips(scenario)``, where ``scenario`` is ``problem.scenario`` with some
    pending and running jobs removed, added or replaced (the others the same objects):
    the problem's count moved by the items that differ."""
    old = problem.scenario
    chips = chips_of(problem)
    if old.jobs is scenario.jobs and old.running is scenario.running:
        return chips
    out = Counter(chips)
    for before, after in ((old.jobs, scenario.jobs), (old.running, scenario.running)):
        if before is after:
            continue
        kept = {id(item) for item in after}
        gone = [item for item in before if id(item) not in kept]
        was = {id(item) for item in before}
        _add(out, gone, -1)
        _add(out, (item for item in after if id(item) not in was), 1)
    return out  # (a node whose count went to 0 compares equal to one not counted)
