"""What each placement family requires of the topology: one :class:`FamilyRules` per family.

A family (:class:`models.scenario.Family`) says which hard rules a job's ranks follow.
The layers read those rules through one object per family, looked up once per job
(:func:`family_rules`, or :attr:`models.compiled.JobView.rules`), instead of testing which
family a job is in each place:

* this module (``models``): the facts every layer reads — whether a rank's node must sit
  in a super pod, a rack or a topotree, whether whole-node ranks are placed in topology
  groups, the size of the group a rank's window is checked in;
* :mod:`heuristics.families`: the family's greedy strategy and which inference paths serve
  it;
* :mod:`solver.families`: the CP-SAT model's group levels and fragment term, the reason an
  unplaced job cannot fit alone, and the check a remembered answer passes before reuse.

Adding a family is one rules object per layer, registered in that layer's table; each
table is checked to cover every :class:`~models.scenario.Family` by
``tests/test_families.py`` (see ``docs/development.md``, "Adding a rule family").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from models.scenario import Family


class GroupSizes(Protocol):
    """The group sizes of a job (:class:`models.compiled.JobView`, which reads its rules
    from here, so this module does not import it)."""

    @property
    def tasks(self) -> int:
        """Ranks of the job."""
        ...

    @property
    def sp_block(self) -> int:
        """Ranks per super-pod block."""
        ...

    @property
    def tp_block(self) -> int:
        """Ranks per rack window."""
        ...

    @property
    def levels(self) -> tuple[int, ...]:
        """Ranks per level group, level1 first (multilevel)."""
        ...


@dataclass(frozen=True)
class FamilyRules:
    """The topology rules of one family's jobs, as data the engines and checks read.

    Attributes
    ----------
    family
        The family these rules are of.
    grouped
        Whole-node ranks are placed in topology groups (super-pod blocks, rack windows,
        level groups); ``False``: rank by rank on any usable node (ordinary jobs).
    in_super_pod
        Every rank's node belongs to a super pod.
    in_rack
        Every rank's node belongs to a rack of its super pod (tpBlock windows).
    in_tree
        Every rank's node belongs to a topotree deep enough for the job's levels.
    """

    family: Family
    grouped: bool
    in_super_pod: bool = False
    in_rack: bool = False
    in_tree: bool = False

    def num_blocks(self, job: GroupSizes) -> int:
        """Logical blocks of ``job``: super pods, level1 groups, or 0 (not grouped)."""
        if self.in_tree:
            return job.tasks // job.levels[0]
        if self.in_super_pod:
            return job.tasks // job.sp_block
        return 0

    def window(self, job: GroupSizes) -> int:
        """Ranks of ``job`` that share one innermost domain: its tpBlock in a rack, else
        its spBlock (the origin-first construction and the origin-hit bound count
        windows of this size)."""
        return job.tp_block if self.in_rack else job.sp_block


_ALL: tuple[FamilyRules, ...] = (
    FamilyRules(Family.ORDINARY, grouped=False),
    FamilyRules(Family.SUPERPOD, grouped=True, in_super_pod=True),
    FamilyRules(Family.RACK, grouped=True, in_super_pod=True, in_rack=True),
    FamilyRules(Family.MULTILEVEL, grouped=True, in_tree=True),
)

#: The rules of every family (read-only).
FAMILY_RULES: Mapping[Family, FamilyRules] = MappingProxyType({r.family: r for r in _ALL})


def family_rules(family: Family) -> FamilyRules:
    """The :class:`FamilyRules` of ``family``."""
    return FAMILY_RULES[family]
