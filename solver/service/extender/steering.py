"""What the Ascend plugin does with a super-pod / 950 / multilevel job whose candidates the
extender's job-level predicate confined to the planned nodes (:func:`plugin_pins`), read
from the plugin's code (mind-cluster commit 22bb3d98, ``component/ascend-for-volcano``)."""

from __future__ import annotations

from models.scenario import Family, Job, Policy, family_of


def _multilevel(job: Job) -> bool:
    try:
        return family_of(Policy(job.policy)) is Family.MULTILEVEL
    except ValueError:
        return False


def plugin_pins(job: Job, ranks: dict[int, str], cached: dict[int, str] | None,
                prefer_previous: bool) -> tuple[dict[int, str] | None, str]:
    """The node the Ascend plugin pins each pending rank of ``job`` to when the job-level
    predicate has confined its candidates to the planned nodes ``ranks.values()``.

    Follows the plugin's ``ScoreBestNPUNodes`` (A3 ``ascend910a3/superpod/frame.go``, 850
    ``policy/chip8node8sp/frame.go``, 950 ``policy/chip8node8ra64sp/frame.go``, multilevel
    ``policy/multilevelscheduling/frame.go``; mind-cluster commit 22bb3d98): at the job's
    first scored task ``VerifyCachedSuperPods`` (``plugin/job.go``) keeps the job's cached
    selection ``job.SuperPods`` (carried from the previous session) when
    ``prefer-previous-node`` is on (multilevel: always) and every cached node either runs
    a task of the job or is a candidate; the ranks are then pinned by
    ``scoreNodeForReadyJob`` to the cached nodes.  Otherwise the plugin selects afresh from
    the candidates: ``getSuperPodTop`` groups them by physical super pod in a Go map, so
    which planned node of a physical super pod gets which rank is Go's map order, not
    something the plan can name.

    Parameters
    ----------
    job
        The pending job (``running-ranks``: the ranks still running).
    ranks
        The plan: pending rank -> node.
    cached
        The plugin's cached selection as rank -> node (where the job's ranks were last
        allocated), ``None`` when the job has none.
    prefer_previous
        The scheduler's ``prefer-previous-node``.

    Returns
    -------
    tuple
        ``(pins, "")`` when the cached selection is kept (``pins``: pending rank -> node),
        else ``(None, why)``: why the plugin selects afresh.
    """
    if not cached:
        return None, "it has no cached selection of the job"
    if not prefer_previous and not _multilevel(job):
        return None, "prefer-previous-node is off"
    running = set(job.running_ranks.values())
    candidates = set(ranks.values())
    stale = sorted({n for n in cached.values() if n not in running and n not in candidates})
    if stale:
        return None, (f"its cached selection names node {stale[0]}, neither a candidate nor "
                      "running the job")
    if any(rank not in cached or cached[rank] not in candidates for rank in ranks):
        return None, "its cached selection does not cover every pending rank"
    return {rank: cached[rank] for rank in ranks}, ""
