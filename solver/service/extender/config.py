"""The extender's settings (:class:`ExtenderConfig`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from solver.service.extender.protocol import DEFAULT_PREFIX


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
        it): what bounds the parse's memory, about 110 bytes a value, whatever the body is
        made of (a Kubernetes snapshot has one value per 11 bytes, a hostile ``[{},{},…]``
        one per 3).
    max_verb_values
        Most JSON values of any other verb's body (``prioritize``, ``predicate``,
        ``allocateFunc``, ``deallocateFunc``, ``onSessionClose``), counted the same way
        before parsing (413 above it): 2 million values, at most about 210 MB once parsed;
        those bodies are parsed one at a time in one thread, so that is the most their
        parsing holds at once.  ``prioritize`` in Go's layout parses only its task, and
        only the task's values count.
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
    max_verb_values: int = 2_000_000
    configmaps: tuple[str, ...] = ()
    live: bool = False
    kubeconfig: str | None = None
    in_cluster: bool = False
    refresh_seconds: float = 30.0
    path_token: str | None = field(default=None, repr=False)
    cluster: str | None = None

    @property
    def answer_seconds(self) -> float:
        """Seconds from receipt by which ``onSessionOpen`` answers."""
        return self.answer_share * self.http_timeout

    @property
    def plan_seconds(self) -> float:
        """The plan's time limit at most."""
        return self.plan_share * self.http_timeout
