"""The planning service's ASGI application (FastAPI on uvicorn).

Routes (all JSON, contract key names):

* ``POST /v1/plan`` — body: a scenario; query ``engine``, ``time-limit``, ``seed``,
  ``deterministic-time``; answer: the contract placement, on the wire within
  ``time-limit`` counted from receipt of the request.
* ``POST /v1/validate`` — body ``{"scenario": ..., "placement": ...}`` (placement
  optional); answer: ``valid``, input ``errors``, ``violations`` and ``metrics``.
* ``PUT /v1/clusters/{name}`` (a scenario), ``PATCH /v1/clusters/{name}`` (a
  :class:`~solver.service.state.ClusterDelta`), ``GET``/``DELETE /v1/clusters/{name}``,
  ``GET /v1/clusters/{name}/scenario`` and ``POST /v1/clusters/{name}/plan``.
* ``GET /healthz`` (the process answers), ``GET /readyz`` (warmed up, not draining),
  ``GET /metrics`` (Prometheus text).

FastAPI was chosen over bare Starlette for one reason: the OpenAPI document.  Request
bodies are read by the routes themselves (with a size limit) and parsed in the solver
worker processes (:mod:`solver.service.pool`) with the CLI's error messages; their schemas
are the contract's own pydantic models, injected into the document so that a Go client
can be generated from it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from typing import Any, Literal

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from models.limits import (
    MAX_ERRORS_SHOWN,
    LimitError,
    check_deterministic_time,
    check_seed,
    escape_text,
)
from models.placement import PlacementFile
from models.scenario import Scenario
from solver.service.auth import BearerAuth, HiddenToken
from solver.service.config import ServiceConfig
from solver.service.connections import FIRST_BYTE, ConnectionGuard
from solver.service.extender import ExtenderCore, PathToken, extender_router
from solver.service.extender.config import check_prefix
from solver.service.extender.forward import CacheEventForwarder
from solver.service.metrics import PROMETHEUS_CONTENT_TYPE, ServiceMetrics
from solver.service.outcome import PARSE_NOT_DONE, SOURCE_SOLVE, PlanOutcome, Saturated
from solver.service.parsing import (
    BadRequest,
    ValidateRequest,
    ValidateResponse,
    refuse_declared_length,
)
from solver.service.pool import WorkerPool
from solver.service.state import ClusterDelta, ClusterInfo

log = logging.getLogger("npu_place.service")

API_VERSION = "1"
#: The engines a plan call may ask for.
Engine = Literal["auto", "greedy", "cpsat"]
#: Cluster names: what a Kubernetes object name allows, bounded.
CLUSTER_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"


# --------------------------------------------------------------------------- bodies


class ErrorBody(BaseModel):
    """Every non-2xx answer: a short error and one message per problem."""

    error: str
    messages: list[str] = Field(default_factory=list)


class HealthBody(BaseModel):
    """Answer of ``/healthz`` and ``/readyz``."""

    model_config = ConfigDict(populate_by_name=True)
    status: str
    in_flight: int = Field(0, alias="in-flight")
    abandoned: int = 0
    capacity: int = 0


def _error(status: int, error: str, messages: list[str] | None = None,
           headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": error, "messages": messages or []}, status_code=status,
                        headers=headers)


# --------------------------------------------------------------------------- middleware


class _Timing:
    """Pure ASGI middleware: stamps the receipt time and records request metrics."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        # from the request's first byte when the connection stamped it (the answer
        # deadlines count from there), else from now
        received = min(state.get(FIRST_BYTE) or float("inf"), time.monotonic())
        state["received"] = received
        code = {"status": 500}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                code["status"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", "unmatched")
            self.metrics.requests.labels(path, scope.get("method", ""), str(code["status"])).inc()
            self.metrics.latency.labels(path).observe(time.monotonic() - received)


# --------------------------------------------------------------------------- service


def _known_query(request: Request) -> None:
    """Refuse query parameters the route does not take (422 naming them): a misspelt
    ``time-limt`` must not silently fall back to the default limit."""
    dependant = getattr(request.scope.get("route"), "dependant", None)
    if dependant is None:
        return
    allowed = sorted({param.alias for param in dependant.query_params})
    unknown = sorted(set(request.query_params) - set(allowed))
    if unknown:
        takes = ", ".join(f"'{name}'" for name in allowed) if allowed else "none"
        raise BadRequest(422, "invalid request", [
            f"query parameter '{escape_text(name, 80)}': unknown (this route takes {takes})"
            for name in unknown[:MAX_ERRORS_SHOWN]])


class PlanningService:
    """State shared by the routes: worker pool, metrics, readiness and draining."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.pool = WorkerPool(workers=config.workers, queue=config.queue,
                                 reply_margin=config.reply_margin,
                                 kill_grace=config.kill_grace, solve_path=config.solve,
                                 warmup=config.warmup, recycle_after=config.recycle_after)
        self.metrics = ServiceMetrics(lambda: self.pool.in_flight,
                                      lambda: self.pool.abandoned,
                                      lambda: len(self.pool.clusters),
                                      lambda: self.pool.killed,
                                      lambda: self.pool.restarts)
        self.pool.on_models = self.metrics.count_models
        self.connections = ConnectionGuard(config.max_connections, config.header_timeout)
        self.metrics.watch_connections(self.connections.waiting_count,
                                       lambda: self.connections.evicted,
                                       lambda: self.connections.timed_out)
        self.draining = False
        #: the Volcano extender's state when ``config.extender`` is set
        self.extender: ExtenderCore | None = None
        self._storing: dict[str, int] = {}  # names with a PUT in progress -> how many
        self._drain_event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def runner(self) -> WorkerPool:
        """The worker pool under its former name (kept for callers written against it;
        use :attr:`pool`)."""
        return self.pool

    @property
    def ready(self) -> bool:
        """Every worker started (and warmed up)."""
        return self.pool.ready

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start the workers (called at start-up, on the loop)."""
        self._loop = asyncio.get_running_loop()
        self._drain_event = asyncio.Event()
        self.pool.start()

    def begin_drain(self) -> None:
        """Graceful shutdown: refuse new plans, hurry in-flight ones (thread-safe)."""
        self.draining = True
        if self._loop is not None and self._drain_event is not None:
            self._loop.call_soon_threadsafe(self._drain_event.set)

    # ------------------------------------------------------------------ helpers
    @contextmanager
    def cluster_slot(self, name: str) -> Iterator[None]:
        """Hold a place for cluster ``name`` while its PUT is read and stored.

        A new name counts against ``max_clusters`` from the moment its PUT is admitted
        (before its body is read), so concurrent PUTs of new names cannot overshoot the
        bound; the place is released when the PUT ends (stored or refused).

        Raises
        ------
        BadRequest
            507 when the service holds (or is storing) ``max_clusters`` clusters and
            ``name`` is new.
        """
        clusters = self.pool.clusters
        limit = self.config.max_clusters
        if name not in clusters and name not in self._storing:
            held = len(clusters) + sum(1 for n in self._storing if n not in clusters)
            if held >= limit:
                raise BadRequest(507, "too many clusters", [
                    f"the service holds {limit} clusters already; delete one first"])
        self._storing[name] = self._storing.get(name, 0) + 1
        try:
            yield
        finally:
            self._storing[name] -= 1
            if not self._storing[name]:
                del self._storing[name]

    def plan_query(self, request: Request, time_limit: float | None, seed: int,
                   deterministic_time: float | None) -> tuple[float, float]:
        """Check a plan call's query (the CLI's bounds, :mod:`models.limits`); return
        ``(limit, deadline)``, the deadline counted from the request's receipt."""
        limit = self.config.default_time_limit if time_limit is None else time_limit
        if limit > self.config.max_time_limit:
            raise BadRequest(422, "invalid request", [
                f"query parameter 'time-limit': {limit} is above the service's maximum "
                f"({self.config.max_time_limit})"])
        try:
            check_seed(seed, "query parameter 'seed'")
            if deterministic_time is not None:
                check_deterministic_time(deterministic_time,
                                         "query parameter 'deterministic-time'")
        except LimitError as exc:
            raise BadRequest(422, "invalid request", [str(exc)]) from None
        if limit <= self.config.reply_margin:
            # the answer is sent by the deadline minus the margin: no time to plan at all
            raise BadRequest(422, "invalid request", [
                f"query parameter 'time-limit': {limit:g} s is not above the service's "
                f"reply margin ({self.config.reply_margin:g} s, kept for sending the "
                "answer): no plan can be made in it"])
        received = request.scope.get("state", {}).get("received", time.monotonic())
        return limit, received + limit

    def admit_early(self) -> None:
        """Refuse fast, before reading a body, when draining or saturated."""
        if self.draining:
            self.metrics.rejected.labels("draining").inc()
            raise BadRequest(503, "shutting down", ["the service is shutting down"],
                             {"Retry-After": "1", "Connection": "close"})
        if self.pool.saturated:
            self.metrics.rejected.labels("saturated").inc()
            raise BadRequest(503, "saturated", [
                f"{self.pool.in_flight} requests in flight (capacity "
                f"{self.pool.capacity}); retry later"], {"Retry-After": "1"})

    async def read_body(self, request: Request, deadline: float | None = None) -> bytes:
        """The request body, refused with 413 above ``max-body-mb``.

        The whole body must arrive within ``body_timeout`` seconds of the request's
        receipt (else 408), and before ``deadline`` (``time.monotonic``) minus the reply
        margin when given: a plan whose body is still arriving at its deadline gets its
        503 then, not when the client finishes sending.
        """
        limit = int(self.config.max_body_mb * 1024 * 1024)
        refuse_declared_length(request.headers.get("content-length"), limit,
                               f"the limit is {limit} bytes (--max-body-mb)")
        received = request.scope.get("state", {}).get("received", time.monotonic())
        cutoff = received + self.config.body_timeout
        by_deadline = deadline is not None and deadline - self.config.reply_margin < cutoff
        if deadline is not None and by_deadline:
            cutoff = deadline - self.config.reply_margin
        chunks = []
        size = 0
        try:
            async with asyncio.timeout(max(0.0, cutoff - time.monotonic())):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:
                        raise BadRequest(413, "body too large", [
                            f"request body: more than {limit} bytes (--max-body-mb)"])
                    chunks.append(chunk)
        except TimeoutError:
            self.metrics.rejected.labels("slow-body").inc()
            if by_deadline:
                raise BadRequest(503, "time limit passed while reading the body", [
                    f"request body: {size} bytes had arrived when the request's time limit "
                    "passed"], {"Retry-After": "1", "Connection": "close"}) from None
            raise BadRequest(408, "body too slow", [
                f"request body: {size} bytes had arrived after {self.config.body_timeout:g} s "
                "(ServiceConfig.body_timeout)"], {"Connection": "close"}) from None
        return b"".join(chunks)

    async def plan(self, request: Request, *, body: bytes | None, cluster: str | None,
                   engine: str, limit: float, deadline: float, seed: int,
                   deterministic_time: float | None) -> Response:
        """Solve in a worker and answer on time; records the plan metrics."""
        try:
            outcome = await self.pool.plan(body=body, cluster=cluster, engine=engine,
                                             deadline=deadline, seed=seed,
                                             deterministic_time=deterministic_time,
                                             hurry=self._drain_event)
        except Saturated as exc:
            self.metrics.rejected.labels(exc.reason).inc()
            error = "shutting down" if exc.reason == "draining" else "saturated"
            raise BadRequest(503, error, exc.messages,
                             {"Retry-After": str(exc.retry_after)}) from None
        except BadRequest as exc:
            if exc.status == 500:
                self.metrics.solve_errors.inc()
            elif exc.status == 503:
                self.metrics.rejected.labels(
                    "parse-deadline" if exc.error == PARSE_NOT_DONE else "plan-deadline").inc()
            raise
        if outcome.solve_failed:
            self.metrics.solve_errors.inc()
        self._record(outcome, engine)
        received = request.scope.get("state", {}).get("received", deadline - limit)
        elapsed = time.monotonic() - received
        self.metrics.deadline_slack.labels(_route(request)).observe(elapsed - limit)
        headers = {"X-Plan-Source": outcome.source, "X-Time-Limit": f"{limit:g}",
                   "X-Elapsed-Before-Send": f"{elapsed:.4f}"}
        if outcome.queued_seconds is not None:
            headers["X-Queue-Wait"] = f"{outcome.queued_seconds:.4f}"
            self.metrics.queue_wait.observe(outcome.queued_seconds)
        if outcome.models is not None:
            headers["X-Models-Reused"] = models_header(outcome.models)
        if outcome.cluster_version is not None:
            # the version the worker planned from, carried in its answer: the cluster's
            # record may already hold a later delta
            headers["X-Cluster-Version"] = str(outcome.cluster_version)
        return JSONResponse(outcome.placement, headers=headers)

    def _record(self, outcome: PlanOutcome, engine: str) -> None:
        placement = outcome.placement
        self.metrics.plans.labels(placement.get("status", ""), placement.get("engine", ""),
                                  outcome.source).inc()
        if (engine != "greedy" and outcome.source == SOURCE_SOLVE
                and outcome.greedy_objective is not None and outcome.objective is not None):
            gain = outcome.objective - outcome.greedy_objective
            self.metrics.gain.observe(max(0, gain) / max(1, abs(outcome.greedy_objective)))
            if gain > 0:
                self.metrics.improved.inc()


def models_header(models: dict[str, int]) -> str:
    """``X-Models-Reused``: ``N/M``, the CP-SAT models the solve handed back (kept from
    earlier plans of the cluster or repeated within the solve) of all it used."""
    reused = int(models.get("carried", 0)) + int(models.get("within", 0))
    return f"{reused}/{reused + int(models.get('built', 0))}"


def _route(request: Request) -> str:
    return getattr(request.scope.get("route"), "path", "unmatched")


# --------------------------------------------------------------------------- app


def _body_schema(name: str) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{name}"}}}}}


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "malformed JSON"},
    413: {"model": ErrorBody, "description": "body above --max-body-mb"},
    422: {"model": ErrorBody, "description": "invalid input; every message names the field"},
    503: {"model": ErrorBody, "description": "saturated, shutting down, or the time limit "
                                             "passed while parsing (see Retry-After)"},
}


def _watched(config: ServiceConfig, cluster: str) -> bool:
    """Whether ``serve --watch`` keeps ``cluster`` current."""
    return config.watch is not None and config.watch.cluster == cluster


def create_app(config: ServiceConfig | None = None) -> FastAPI:
    """Build the service application.

    Parameters
    ----------
    config
        Service settings (defaults: :class:`ServiceConfig`).
    """
    config = config or ServiceConfig()
    service = PlanningService(config)

    extender = None
    if config.extender is not None:
        ext = config.extender
        if config.token is not None and ext.path_token is None:
            ext = replace(ext, path_token=config.token)  # Volcano sends no header
        extender = ExtenderCore(ext)
        extender.on_event_dropped = lambda verb, field: \
            service.metrics.extender_events_dropped.labels(verb, field).inc()
        service.extender = extender
    # the own view's cache events, coalesced; a watched cluster sees the binds itself
    events = (CacheEventForwarder(service.pool, extender.config.cluster)
              if extender is not None and extender.config.cluster is not None
              and not _watched(config, extender.config.cluster) else None)
    watch = None
    if config.watch is not None:
        from solver.service.watcher import ServiceWatch  # the kubernetes client's side

        watch = ServiceWatch(config.watch, service.pool)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.start()
        if extender is not None:
            extender.start()
        if watch is not None:
            watch.start(asyncio.get_running_loop())
        yield
        service.begin_drain()
        if watch is not None:
            await asyncio.get_running_loop().run_in_executor(None, watch.stop)
        if events is not None:
            await asyncio.get_running_loop().run_in_executor(None, events.stop)
        if extender is not None:
            extender.close()
        await service.pool.close()

    app = FastAPI(title="npu-place planning service", version=API_VERSION,
                  description="Whole-session placement plans for Ascend NPU gang jobs: "
                              "greedy port of the Volcano Ascend plugin plus CP-SAT, "
                              "answering within the request's time limit.",
                  lifespan=lifespan, dependencies=[Depends(_known_query)])
    app.state.service = service
    app.state.extender = extender
    app.state.watch = watch
    if config.token is not None:  # inside the timing middleware: 401s are counted too
        app.add_middleware(BearerAuth, token=HiddenToken(config.token))
    if extender is not None:
        app.include_router(extender_router(extender, service.pool, events))
        if extender.config.path_token is not None:  # outside the bearer check
            app.add_middleware(PathToken, prefix=extender.config.prefix,
                               token=extender.config.path_token)
    app.add_middleware(_Timing, metrics=service.metrics)

    @app.exception_handler(BadRequest)
    async def _bad(request: Request, exc: BadRequest) -> JSONResponse:
        return _error(exc.status, exc.error, exc.messages, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        messages = []
        for err in exc.errors():
            loc = [str(p) for p in err.get("loc", ())]
            kind = {"query": "query parameter", "path": "path parameter"}.get(
                loc[0] if loc else "", loc[0] if loc else "request")
            field = ".".join(loc[1:]) or "(the request)"
            shown = f" (got {err['input']!r})" if "input" in err and err["input"] is not None \
                else ""
            messages.append(f"{kind} '{field}': {err.get('msg', 'invalid')}{shown}")
        return _error(422, "invalid request", messages)

    engine_q = Query("auto", description="greedy, cpsat, or auto (greedy then CP-SAT)")
    limit_q = Query(None, alias="time-limit", gt=0,
                    description="seconds from receipt of the request to the answer "
                                "(default: --default-time-limit)")
    seed_q = Query(0, description="random seed of the CP-SAT search")
    det_q = Query(None, alias="deterministic-time", gt=0,
                  description="CP-SAT deterministic time limit (reproducible answers)")
    validate_limit_q = Query(None, alias="time-limit", gt=0,
                             description="seconds from the body's arrival to the answer "
                                         "(default: ServiceConfig.validate_time_limit, 10 s); "
                                         "503 when it passes")
    name_p = Path(pattern=CLUSTER_NAME, description="cluster name")

    @app.post("/v1/plan", response_model=PlacementFile, responses=_ERRORS,
              openapi_extra=_body_schema("Scenario"), tags=["plan"],
              summary="Plan a whole session (body: a scenario)")
    async def plan(request: Request, engine: Engine = engine_q,
                   time_limit: float | None = limit_q, seed: int = seed_q,
                   deterministic_time: float | None = det_q) -> Response:
        limit, deadline = service.plan_query(request, time_limit, seed, deterministic_time)
        service.admit_early()
        body = await service.read_body(request, deadline)
        return await service.plan(request, body=body, cluster=None, engine=engine,
                                  limit=limit, deadline=deadline, seed=seed,
                                  deterministic_time=deterministic_time)

    @app.post("/v1/validate", response_model=ValidateResponse, responses=_ERRORS,
              openapi_extra=_body_schema("ValidateRequest"), tags=["plan"],
              summary="Check a scenario, and optionally a placement")
    async def validate(request: Request, time_limit: float | None = validate_limit_q
                       ) -> Response:
        limit = config.validate_time_limit if time_limit is None else time_limit
        if limit > config.max_time_limit:
            raise BadRequest(422, "invalid request", [
                f"query parameter 'time-limit': {limit} is above the service's maximum "
                f"({config.max_time_limit})"])
        service.admit_early()
        body = await service.read_body(request)
        try:  # the limit bounds the worker's time: it counts from the body's arrival
            result = await service.pool.validate(body, deadline=time.monotonic() + limit)
        except Saturated:
            service.metrics.rejected.labels("saturated").inc()
            raise BadRequest(503, "saturated", ["too many requests in flight; retry later"],
                             {"Retry-After": "1"}) from None
        return JSONResponse(result)

    def _known(name: str) -> Any:
        record = service.pool.clusters.get(name)
        if record is None:
            raise BadRequest(404, "no such cluster", [f"cluster '{name}' is not stored "
                                                      "(PUT it first)"])
        return record

    @app.put("/v1/clusters/{name}", response_model=ClusterInfo, responses=_ERRORS,
             openapi_extra=_body_schema("Scenario"), tags=["clusters"],
             summary="Store a cluster (body: a full scenario)")
    async def put_cluster(request: Request, name: str = name_p) -> Response:
        pool = service.pool
        with service.cluster_slot(name):  # --max-clusters holds under concurrent PUTs
            body = await service.read_body(request)
            # the bookkeeping runs as the reply arrives, in the worker's order
            reply = await pool.put_cluster(name, body)
        service.metrics.delta_tier.labels("full").inc()
        return JSONResponse(reply["info"], status_code=201 if reply["created"] else 200)

    @app.patch("/v1/clusters/{name}", response_model=ClusterInfo, responses=_ERRORS,
               openapi_extra=_body_schema("ClusterDelta"), tags=["clusters"],
               summary="Apply a delta to a stored cluster")
    async def patch_cluster(request: Request, name: str = name_p) -> Response:
        _known(name)
        body = await service.read_body(request)
        try:
            reply = await service.pool.patch_cluster(name, body)
        except BadRequest as exc:
            if exc.status == 422:
                exc.error = "invalid delta"
            raise
        info = reply["info"]
        service.metrics.delta_tier.labels(info["last-update"]).inc()
        return JSONResponse(info)

    @app.get("/v1/clusters/{name}", response_model=ClusterInfo, tags=["clusters"],
             responses={404: {"model": ErrorBody}})
    async def get_cluster(name: str = name_p) -> Response:
        return JSONResponse(_known(name).info)

    @app.get("/v1/clusters/{name}/scenario", response_model=Scenario, tags=["clusters"],
             responses={404: {"model": ErrorBody}},
             summary="The stored cluster as a full scenario")
    async def get_cluster_scenario(name: str = name_p) -> Response:
        _known(name)
        reply = await service.pool.dump_cluster(name)
        return Response(reply.scenario, media_type="application/json",
                        headers={"X-Cluster-Version": str(reply.version)})

    @app.delete("/v1/clusters/{name}", status_code=204, tags=["clusters"],
                responses={404: {"model": ErrorBody}})
    async def delete_cluster(name: str = name_p) -> Response:
        _known(name)
        # the serving process forgets the cluster when its worker has deleted it, in the
        # worker's order (a PUT queued before this DELETE is deleted too)
        if not await service.pool.delete_cluster(name):  # a DELETE queued before it won
            raise BadRequest(404, "no such cluster", [f"cluster '{name}' is not stored "
                                                      "(PUT it first)"])
        return Response(status_code=204)

    @app.post("/v1/clusters/{name}/plan", response_model=PlacementFile, responses=_ERRORS,
              tags=["clusters"], summary="Plan a stored cluster's pending jobs")
    async def plan_cluster(request: Request, name: str = name_p, engine: Engine = engine_q,
                           time_limit: float | None = limit_q, seed: int = seed_q,
                           deterministic_time: float | None = det_q) -> Response:
        limit, deadline = service.plan_query(request, time_limit, seed, deterministic_time)
        _known(name)
        service.admit_early()
        return await service.plan(request, body=None, cluster=name, engine=engine,
                                  limit=limit, deadline=deadline, seed=seed,
                                  deterministic_time=deterministic_time)

    @app.get("/healthz", response_model=HealthBody, tags=["ops"])
    async def healthz() -> Response:
        return _health("ok", 200)

    @app.get("/readyz", response_model=HealthBody, tags=["ops"],
             responses={503: {"model": HealthBody}})
    async def readyz() -> Response:
        if service.draining:
            return _health("draining", 503)
        if not service.ready:
            return _health("warming up", 503)
        return _health("ready", 200)

    def _health(status: str, code: int) -> Response:
        body = HealthBody(status=status, in_flight=service.pool.in_flight,
                          abandoned=service.pool.abandoned,
                          capacity=service.pool.capacity)
        return JSONResponse(body.model_dump(by_alias=True), status_code=code)

    @app.get("/metrics", tags=["ops"], response_class=Response,
             responses={200: {"content": {PROMETHEUS_CONTENT_TYPE: {}}}})
    async def metrics() -> Response:
        return Response(service.metrics.render(), media_type=PROMETHEUS_CONTENT_TYPE)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version,
                             description=app.description, routes=app.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for model in (Scenario, ValidateRequest, ClusterDelta):
            extra = model.model_json_schema(by_alias=True,
                                            ref_template="#/components/schemas/{model}")
            for key, value in extra.pop("$defs", {}).items():
                components.setdefault(key, value)
            components[model.__name__] = extra
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
    if extender is not None:  # the verbs' prefix must leave every other route alone
        check_prefix(extender.config.prefix, [
            str(getattr(route, "path", "")) for route in app.routes
            if getattr(getattr(route, "endpoint", None), "__module__", "")
            != extender_router.__module__])
    return app


__all__ = ["BadRequest", "PlanningService", "ServiceConfig", "create_app"]
