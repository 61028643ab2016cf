"""``npu-place serve``: the planning service for a scheduler daemon.

Modules: :mod:`~solver.service.app` (FastAPI application and routes),
:mod:`~solver.service.runner` (deadline-bound solves in worker threads, admission),
:mod:`~solver.service.state` (stored clusters updated by deltas),
:mod:`~solver.service.metrics` (Prometheus), :mod:`~solver.service.server` (uvicorn,
graceful shutdown) and :mod:`~solver.service.client` (a small Python client).
"""
