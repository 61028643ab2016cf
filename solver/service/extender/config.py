"""The extender's settings (:class:`ExtenderConfig`)."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field

from models.limits import escape_text
from solver.service.extender.protocol import DEFAULT_PREFIX


class PrefixOverlap(ValueError):
    """An extender prefix that overlaps a route of the service, or is not normalised."""


def _segments(path: str) -> list[str]:
    return [part for part in path.split("/") if part]


def _covers(prefix: list[str], route: list[str]) -> bool:
    """One path is a segment-wise prefix of the other (``{name}`` matches any segment)."""
    return all(a == b or (b.startswith("{") and b.endswith("}"))
               for a, b in zip(prefix, route, strict=False))


def check_prefix(prefix: str, routes: Iterable[str], option: str = "--extender-prefix"
                 ) -> None:
    """Refuse an extender prefix that overlaps one of the service's ``routes``.

    The verbs live under ``<prefix>/`` and, with a path token, every path under it is
    taken by the token check: a prefix equal to a route, above one (``/v1``) or below one
    would move or shadow that route (with a token the whole ``/v1`` API would answer only
    behind it).  The prefix is compared as written and normalised (``/volcano/../v1`` is
    ``/v1``); a prefix that is not normalised is refused too (a client or proxy may
    normalise it before it arrives).

    Raises
    ------
    PrefixOverlap
        Naming the prefix and the route.
    """
    shown = escape_text(prefix, 120)
    normal = posixpath.normpath(prefix) if prefix else prefix
    if normal.startswith("//"):
        normal = "/" + normal.lstrip("/")
    for path in routes:
        route = _segments(path)
        if not route:
            continue  # not a path route (a mount of the application's own)
        for form in dict.fromkeys((prefix, normal)):
            if _covers(_segments(form), route):
                also = f" (normalised: {normal})" if form != prefix else ""
                raise PrefixOverlap(f"{option} {shown}{also} overlaps the service's route "
                                    f"{path}: choose a prefix of the verbs' own, such as "
                                    f"{DEFAULT_PREFIX}")
    if normal != prefix.rstrip("/"):
        raise PrefixOverlap(f"{option} {shown}: not a normalised path (no '.', '..' or empty "
                            f"parts); did you mean {escape_text(normal, 120)}?")


@dataclass(frozen=True)
class ExtenderConfig:
    """Settings of the extender door (``npu-place serve --extender ...``).

    Attributes
    ----------
    prefix
        Route prefix; Volcano's ``extender.urlPrefix`` is ``<scheme>://<host>:<port><prefix>``.
    http_timeout
        Volcano's ``extender.httpTimeout`` in seconds (one timeout for every verb).
    answer_share
        ``onSessionOpen`` answers by this share of ``http_timeout`` after receipt.
    plan_share
        The plan's own time limit is at most this share of ``http_timeout`` (the rest of
        the answer time is left to reading, importing and answering).
    engine
        Facade engine: ``auto``, ``greedy`` or ``cpsat``.
    seed, deterministic_time
        CP-SAT's seed and deterministic time limit (reproducible plans).
    max_snapshot_mb
        Largest ``onSessionOpen`` body (413 above it, refused before reading when the
        ``Content-Length`` says so).
    max_verb_mb
        Largest body of the other verbs.
    max_nodes, max_tasks
        Most nodes and tasks in a snapshot (422 above them).
    max_values
        Most JSON values (counted as the body's ``,`` and ``:`` before parsing, 413 above
        it): what bounds the parse's memory, about 85 bytes a value, whatever the body is
        made of (a Kubernetes snapshot has one value per 11 bytes, a hostile ``[{},{},…]``
        one per 3).
    configmaps
        Dump files or directories (``kubectl get -o json``) holding the device-info,
        NodeD, switch and scheduler ConfigMaps and the PriorityClasses: read at start and
        again whenever a file changes (:class:`DeviceSource`).
    live, kubeconfig, in_cluster, refresh_seconds
        Read those objects from the cluster instead (``import --kubeconfig/--in-cluster``
        list calls), re-listed in a background thread every ``refresh_seconds``, never per
        session.
    path_token
        When set, the verbs are served only under ``<prefix>/<token>/<verb>`` (Volcano
        sends no headers of its own; the token rides in ``urlPrefix``).
    predicate_verb
        The scheduler ConfigMap sets ``extender.predicateVerb`` (Volcano v1.12 or later):
        the job-level ``predicate`` then confines the Ascend plugin's own selection of a
        super-pod / 950 / multilevel job to the planned nodes, and those jobs are steered
        (``docs/extender.md``, "Which jobs it steers").  Off: such a job is steered only
        when its plan equals the plugin's own greedy selection.
    cluster
        The service's own view: plan this stored cluster (``PUT``/``PATCH
        /v1/clusters/{name}``, kept current by whoever watches the cluster) instead of
        Volcano's snapshot, whose body is then read and dropped unparsed; Volcano's
        allocate/deallocate events become the cluster's cache events.
    """

    prefix: str = DEFAULT_PREFIX
    http_timeout: float = 1.0
    answer_share: float = 0.8
    plan_share: float = 0.5
    engine: str = "auto"
    seed: int = 0
    deterministic_time: float | None = None
    max_snapshot_mb: float = 256.0
    max_verb_mb: float = 64.0
    max_nodes: int = 65536
    max_tasks: int = 1_000_000
    max_values: int = 16_000_000
    configmaps: tuple[str, ...] = ()
    live: bool = False
    kubeconfig: str | None = None
    in_cluster: bool = False
    refresh_seconds: float = 30.0
    path_token: str | None = field(default=None, repr=False)
    predicate_verb: bool = False
    cluster: str | None = None

    @property
    def answer_seconds(self) -> float:
        """Seconds from receipt by which ``onSessionOpen`` answers."""
        return self.answer_share * self.http_timeout

    @property
    def plan_seconds(self) -> float:
        """The plan's time limit at most."""
        return self.plan_share * self.http_timeout
