"""The greedy engine's hooks of each placement family (the ``heuristics`` layer's part of
:mod:`models.families`).

One :class:`GreedyFamily` per :class:`~models.scenario.Family`, in :data:`GREEDY_FAMILIES`:
which strategy places a pending job of the family, and which inference paths (the
infer-service and MindIE selections of :mod:`heuristics.inference`) serve it.
:func:`heuristics.greedy.place_job` looks the job's family up once and dispatches through
it.  A family's strategy module is imported when a job of that family is first placed: a
batch of one family loads that family's module only (``npu-place plan --engine greedy``
starts faster).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from heuristics.base import Strategy
from models.compiled import Problem
from models.scenario import Family


@dataclass(frozen=True)
class GreedyFamily:
    """How the greedy engine places one family's pending jobs.

    Attributes
    ----------
    family
        The family.
    load_strategy
        Imports the family's strategy module and returns its strategy.
    infer_service
        Infer-service jobs (``inferserviceid``) of the family take
        :func:`heuristics.inference.place_infer_service`.
    mindie
        MindIE jobs of the family take :func:`heuristics.inference.place_mindie`.
    origin_first
        The origin-first construction (:mod:`heuristics.origin_first`) re-places the
        family's jobs, so a batch holding one is worth constructing for.
    """

    family: Family
    load_strategy: Callable[[], Strategy]
    infer_service: bool = False
    mindie: bool = False
    origin_first: bool = False


def _ordinary() -> Strategy:
    from heuristics.ordinary import place_ordinary

    return place_ordinary


def _superpod() -> Strategy:
    from heuristics.superpod import place_superpod

    return place_superpod


def _rack() -> Strategy:
    from heuristics.rack import place_rack

    return place_rack


def _multilevel() -> Strategy:
    from heuristics.multilevel import place_multilevel

    return place_multilevel


_ALL: tuple[GreedyFamily, ...] = (
    GreedyFamily(Family.ORDINARY, _ordinary, origin_first=True),
    GreedyFamily(Family.SUPERPOD, _superpod, infer_service=True, mindie=True,
                 origin_first=True),
    GreedyFamily(Family.RACK, _rack, infer_service=True, origin_first=True),
    GreedyFamily(Family.MULTILEVEL, _multilevel, origin_first=True),
)

#: The greedy hooks of every family (read-only).
GREEDY_FAMILIES: Mapping[Family, GreedyFamily] = MappingProxyType({g.family: g for g in _ALL})


def greedy_family(family: Family) -> GreedyFamily:
    """The :class:`GreedyFamily` of ``family``."""
    return GREEDY_FAMILIES[family]


def has_origin_first_jobs(problem: Problem) -> bool:
    """Whether a job of ``problem`` is of a family the origin-first construction re-places."""
    return any(GREEDY_FAMILIES[job.family].origin_first for job in problem.jobs)
