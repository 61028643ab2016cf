"""``npu-place serve``: the planning service for a scheduler daemon.

Modules: :mod:`~solver.service.app` (FastAPI application and routes),
:mod:`~solver.service.pool` (the solver worker processes seen from the serving process:
dispatch, deadlines, admission, killing and restarting workers),
:mod:`~solver.service.worker` (a worker process: parsing, stored clusters, the facade),
:mod:`~solver.service.messages` (the typed messages between the two),
:mod:`~solver.service.outcome` (a plan's answer from its worker's answers),
:mod:`~solver.service.cluster_log` (each stored cluster's replay log and versions),
:mod:`~solver.service.state` (stored clusters updated by deltas, in a worker),
:mod:`~solver.service.admission` (measured solve times),
:mod:`~solver.service.metrics` (Prometheus), :mod:`~solver.service.server` (uvicorn,
graceful shutdown), :mod:`~solver.service.client` (a small Python client) and
:mod:`~solver.service.extender` (Volcano's extender verbs).
"""
