"""Volcano's own extender protocol: npu-place plans inside a stock Volcano scheduler.

Volcano's ``extender`` plugin (``pkg/scheduler/plugins/extender``) calls an outside service
from every scheduling session with ``POST <urlPrefix>/<verb>`` and one timeout for every
verb (``extender.httpTimeout``, default 1 s).  This module answers those verbs under a path
prefix of ``npu-place serve`` (default ``/volcano``), with the verb names of Volcano's
documentation as route names:

``onSessionOpen``
    Body: the session snapshot, ``{"Jobs": {jobID: JobInfo}, "Nodes": {name: NodeInfo},
    ...}`` with Go field names (Volcano's ``JobInfo``/``TaskInfo``/``NodeInfo`` carry no
    JSON tags) and the Kubernetes ``Pod``/``Node``/``PodGroup`` objects inside.  The
    objects go through the importer of ``npu-place import`` (:mod:`models.kube`) together
    with the device state Volcano does not send (the device-info, NodeD and switch
    ConfigMaps, the scheduler ConfigMap, PriorityClasses; :class:`DeviceSource`); the
    previous-node cache is kept across sessions by :class:`heuristics.lifecycle.
    CacheLifecycle` from what each snapshot shows; the session is planned by the facade
    (:func:`solver.facade.solve`) within :attr:`ExtenderConfig.plan_seconds`.  The answer
    is sent by :attr:`ExtenderConfig.answer_seconds` after receipt, whether the plan is
    ready or not (a plan that is not ready makes the session abstain, never answer late).
``prioritize``
    ``{"task": TaskInfo, "nodes": [NodeInfo]}`` → ``{"nodeScore": {planned node:
    PLANNED_SCORE}, "errorMessage": ""}``; an empty ``nodeScore`` map abstains.  Only the
    task is parsed (:meth:`ExtenderCore.prioritize_raw`).
``predicate`` (optional)
    Job level only: a node outside the job's planned node set is refused (code 2,
    Unschedulable).  Never per rank: Volcano caches a refusal per job and task role.
``allocateFunc`` / ``deallocateFunc``
    What Volcano allocated, discarded (task status Pending) or evicted (Releasing) in the
    session: recorded in the cache lifecycle.
``onSessionClose``
    Ends the session: later verbs abstain until the next ``onSessionOpen``.

The service's own view (:attr:`ExtenderConfig.cluster`): the session is planned from a
stored cluster of the service instead; Volcano's snapshot is read and dropped unparsed, and
its allocate/deallocate events become the stored cluster's cache events.

Safety: an unknown task or job abstains; every answer is a 200 with an abstaining body
except a snapshot that is too large (413), malformed or of an unknown shape (400/422);
Volcano must be configured with ``extender.ignorable: true`` so that any failure leaves its
stock behaviour (docs/extender.md).

Which jobs are steered (docs/extender.md, "Which jobs it steers"): every job whose
family the Ascend plugin does not select nodes for by itself (ordinary policies, vNPU) is
steered rank by rank.  Super-pod (A3/850), 950 and multilevel jobs are steered only while
the plan agrees with the plugin's own selection, which the greedy port reproduces: the
plugin adds up to 1e10 to the nodes it selected and writes ``super-pod-rank`` from that
selection, so a plan that places such a job elsewhere would end with an empty annotation.

Modules
-------
:mod:`~solver.service.extender.protocol`
    Verb names, codes and canned answers; the snapshot's objects; a task's identity.
:mod:`~solver.service.extender.config`
    :class:`ExtenderConfig`.
:mod:`~solver.service.extender.devices`
    :class:`DeviceSource`: the device state Volcano does not send.
:mod:`~solver.service.extender.core`
    :class:`ExtenderCore`: sessions, the plan, the verbs' answers (no HTTP).
:mod:`~solver.service.extender.routes`
    The verbs as routes (:func:`extender_router`) and :class:`PathToken`.

The names others use are re-exported here.
"""

from solver.service.extender.config import ExtenderConfig
from solver.service.extender.core import ExtenderCore
from solver.service.extender.devices import DeviceSource
from solver.service.extender.protocol import (
    CODE_SUCCESS,
    CODE_UNSCHEDULABLE,
    DEFAULT_PREFIX,
    PLANNED_SCORE,
    STATUS_PENDING,
    STATUS_RELEASING,
    VERBS,
    SnapshotError,
    snapshot_objects,
    task_identity,
)
from solver.service.extender.routes import PathToken, extender_router
from solver.service.extender.session import SELECTING_FAMILIES, JobPlan, Session

__all__ = ["CODE_SUCCESS", "CODE_UNSCHEDULABLE", "DEFAULT_PREFIX", "PLANNED_SCORE",
           "SELECTING_FAMILIES", "STATUS_PENDING", "STATUS_RELEASING", "VERBS", "DeviceSource",
           "ExtenderConfig", "ExtenderCore", "JobPlan", "PathToken", "Session", "SnapshotError",
           "extender_router", "snapshot_objects", "task_identity"]
