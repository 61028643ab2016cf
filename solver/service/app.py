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
bodies are read and parsed by the routes themselves (off the event loop, with a size
limit, with the CLI's error messages), and their schemas are the contract's own pydantic
models, injected into the document so that a Go client can be generated from it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from fastapi import FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from models.check import check
from models.compiled import Problem, compile_scenario
from models.io import model_from_data, pydantic_messages
from models.objective import evaluate
from models.placement import MetricsModel, PlacementFile
from models.scenario import Scenario
from models.validation import InputError
from solver.facade import solve
from solver.service.metrics import PROMETHEUS_CONTENT_TYPE, ServiceMetrics
from solver.service.runner import SOURCE_SOLVE, Answer, Saturated, SolveFn, SolveRunner
from solver.service.state import (
    ClusterDelta,
    ClusterInfo,
    ClusterStore,
    VersionConflict,
)

log = logging.getLogger("npu_place.service")

API_VERSION = "1"
#: The engines a plan call may ask for.
Engine = Literal["auto", "greedy", "cpsat"]
#: Cluster names: what a Kubernetes object name allows, bounded.
CLUSTER_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"


@dataclass(frozen=True)
class ServiceConfig:
    """Settings of one service instance (``npu-place serve`` options).

    Attributes
    ----------
    workers
        Solves running at once (threads).
    queue
        Solves that may wait for a worker; beyond ``workers + queue`` in flight the
        service answers 503 with ``Retry-After``.
    max_body_mb
        Largest request body accepted (413 above it).
    default_time_limit
        Time limit of a plan call without ``time-limit``.
    max_time_limit
        Largest ``time-limit`` accepted.
    reply_margin
        Seconds kept before the deadline for serialising and sending the answer.
    max_clusters
        Stored clusters at most.
    warmup
        Run a small solve at start-up (``/readyz`` answers 503 until it is done).
    """

    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1
    queue: int = 2
    max_body_mb: float = 64.0
    default_time_limit: float = 1.0
    max_time_limit: float = 300.0
    reply_margin: float = 0.05
    max_clusters: int = 16
    warmup: bool = True
    graceful_seconds: float = 30.0


# --------------------------------------------------------------------------- bodies


class ErrorBody(BaseModel):
    """Every non-2xx answer: a short error and one message per problem."""

    error: str
    messages: list[str] = Field(default_factory=list)


class ValidateRequest(BaseModel):
    """Body of ``POST /v1/validate``."""

    model_config = ConfigDict(extra="forbid")
    scenario: Scenario
    placement: PlacementFile | None = None


class ViolationModel(BaseModel):
    """One hard-constraint violation found by the validator."""

    rule: str
    job: str | None = None
    node: str | None = None
    message: str


class ValidateResponse(BaseModel):
    """Answer of ``POST /v1/validate``."""

    model_config = ConfigDict(populate_by_name=True)
    valid: bool
    errors: list[str] = Field(default_factory=list, description="input errors of the scenario")
    violations: list[ViolationModel] = Field(default_factory=list)
    metrics: MetricsModel | None = None
    nodes: int = 0
    jobs: int = 0


class HealthBody(BaseModel):
    """Answer of ``/healthz`` and ``/readyz``."""

    model_config = ConfigDict(populate_by_name=True)
    status: str
    in_flight: int = Field(0, alias="in-flight")
    abandoned: int = 0
    capacity: int = 0


class BadRequest(Exception):
    """A request refused with ``status`` and messages naming the field."""

    def __init__(self, status: int, error: str, messages: list[str] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.messages = messages or []
        self.headers = headers


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
        received = time.perf_counter()
        scope.setdefault("state", {})["received"] = received
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
            self.metrics.latency.labels(path).observe(time.perf_counter() - received)


# --------------------------------------------------------------------------- parsing


def _loads(body: bytes, what: str) -> Any:
    try:
        return json.loads(body)
    except UnicodeDecodeError:
        raise BadRequest(400, "malformed body", [f"{what}: not UTF-8 text"]) from None
    except json.JSONDecodeError as exc:
        raise BadRequest(400, "malformed body", [
            f"{what}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ]) from None


def parse_problem(body: bytes, what: str = "request body") -> Problem:
    """Parse, validate and compile a scenario body (raises :class:`BadRequest`)."""
    data = _loads(body, what)
    try:
        scenario = model_from_data(Scenario, data, what)
        return compile_scenario(scenario, what)
    except InputError as exc:
        raise BadRequest(422, "invalid scenario", exc.messages) from None


def parse_delta(body: bytes) -> ClusterDelta:
    """Parse a cluster delta body (raises :class:`BadRequest`)."""
    data = _loads(body, "delta")
    try:
        return model_from_data(ClusterDelta, data, "delta")
    except InputError as exc:
        raise BadRequest(422, "invalid delta", exc.messages) from None


def run_validate(body: bytes) -> ValidateResponse:
    """``POST /v1/validate``: check a scenario and optionally a placement."""
    data = _loads(body, "request body")
    if not isinstance(data, dict):
        raise BadRequest(422, "invalid body", ["request body: expected an object with "
                                               "'scenario' and optionally 'placement'"])
    unknown = sorted(set(data) - {"scenario", "placement"})
    if unknown:
        raise BadRequest(422, "invalid body", [f"request body: field '{k}': unknown field "
                                               "(expected 'scenario', 'placement')"
                                               for k in unknown])
    if "scenario" not in data:
        raise BadRequest(422, "invalid body", ["request body: field 'scenario': missing"])
    placement = None
    if data.get("placement") is not None:
        try:
            placement = PlacementFile.model_validate(data["placement"])
        except ValidationError as exc:
            raise BadRequest(422, "invalid placement",
                             pydantic_messages(exc, data["placement"], "placement")) from None
    try:
        problem = compile_scenario(model_from_data(Scenario, data["scenario"], "scenario"),
                                   "scenario")
    except InputError as exc:
        return ValidateResponse(valid=False, errors=exc.messages)
    out = ValidateResponse(valid=True, nodes=problem.num_nodes, jobs=len(problem.jobs))
    if placement is None:
        return out
    violations = check(problem, placement)
    out.violations = [ViolationModel(rule=v.rule.value, job=v.job, node=v.node,
                                     message=v.message) for v in violations]
    out.valid = not violations
    if not violations:
        out.metrics = evaluate(problem, placement).to_model()
    return out


# --------------------------------------------------------------------------- service


class PlanningService:
    """State shared by the routes: runner, clusters, metrics, readiness and draining."""

    def __init__(self, config: ServiceConfig, solve_fn: SolveFn = solve) -> None:
        self.config = config
        self.runner = SolveRunner(workers=config.workers, queue=config.queue,
                                  reply_margin=config.reply_margin, solve_fn=solve_fn)
        self.clusters = ClusterStore(config.max_clusters)
        self.metrics = ServiceMetrics(lambda: self.runner.in_flight,
                                      lambda: self.runner.abandoned,
                                      lambda: len(self.clusters))
        self.ready = not config.warmup
        self.draining = False
        self._drain_event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ lifecycle
    def bind_loop(self) -> None:
        """Remember the serving loop (called at start-up, on the loop)."""
        self._loop = asyncio.get_running_loop()
        self._drain_event = asyncio.Event()

    def begin_drain(self) -> None:
        """Graceful shutdown: refuse new plans, hurry in-flight ones (thread-safe)."""
        self.draining = True
        if self._loop is not None and self._drain_event is not None:
            self._loop.call_soon_threadsafe(self._drain_event.set)

    def warm_up(self) -> None:
        """Import and exercise both engines once so the first request pays nothing extra."""
        try:
            from models.io import load_scenario
            from solver.cli import example_path

            problem = compile_scenario(load_scenario(example_path("ordinary-8npu")))
            self.runner.solve_fn(problem, engine="auto", time_limit=0.5)
        except Exception:  # warm-up is best effort
            log.exception("warm-up failed")
        self.ready = True

    # ------------------------------------------------------------------ helpers
    def deadline(self, request: Request, time_limit: float | None) -> tuple[float, float]:
        """``(limit, deadline)`` of a plan call, counted from the request's receipt."""
        limit = self.config.default_time_limit if time_limit is None else time_limit
        if limit > self.config.max_time_limit:
            raise BadRequest(422, "invalid request", [
                f"query parameter 'time-limit': {limit} is above the service's maximum "
                f"({self.config.max_time_limit})"])
        received = request.scope.get("state", {}).get("received", time.perf_counter())
        return limit, received + limit

    def admit_early(self) -> None:
        """Refuse fast, before reading a body, when draining or saturated."""
        if self.draining:
            self.metrics.rejected.labels("draining").inc()
            raise BadRequest(503, "shutting down", ["the service is shutting down"],
                             {"Retry-After": "1", "Connection": "close"})
        if self.runner.saturated:
            self.metrics.rejected.labels("saturated").inc()
            raise BadRequest(503, "saturated", [
                f"{self.runner.in_flight} solves in flight (capacity "
                f"{self.runner.capacity}); retry later"], {"Retry-After": "1"})

    async def read_body(self, request: Request) -> bytes:
        """The request body, refused with 413 above ``max-body-mb``."""
        limit = int(self.config.max_body_mb * 1024 * 1024)
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise BadRequest(413, "body too large", [
                f"request body: {declared} bytes; the limit is {limit} bytes (--max-body-mb)"])
        chunks = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BadRequest(413, "body too large", [
                    f"request body: more than {limit} bytes (--max-body-mb)"])
            chunks.append(chunk)
        return b"".join(chunks)

    async def parse_by(self, body: bytes, deadline: float) -> Problem:
        """Parse a scenario body off the loop; 503 if the deadline passes first.

        Parsing and validating an 8,000-node body costs 0.1–0.4 s of CPU (more on a loaded
        machine); when it has not finished by the reply cut-off there is no scenario to
        answer for, so the request gets a 503 with ``Retry-After`` at its deadline rather
        than a late answer.  The parse thread finishes in the background.
        """
        task = asyncio.ensure_future(anyio.to_thread.run_sync(parse_problem, body))
        timeout = deadline - self.config.reply_margin - time.perf_counter()
        done, _ = await asyncio.wait({task}, timeout=max(0.0, timeout))
        if task in done:
            return task.result()
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        self.metrics.rejected.labels("parse-deadline").inc()
        raise BadRequest(503, "time limit passed while parsing", [
            "the request's time limit passed before its body was parsed and checked "
            "(the service is loaded; large clusters should use PUT/PATCH "
            "/v1/clusters/{name} and plan the stored cluster)"], {"Retry-After": "1"})

    async def plan(self, request: Request, problem: Problem, *, engine: str, limit: float,
                   deadline: float, seed: int, deterministic_time: float | None,
                   solver_cache: Any = None, headers: dict[str, str] | None = None) -> Response:
        """Solve and answer on time; records the plan metrics."""
        try:
            answer = await self.runner.plan(problem, engine=engine, deadline=deadline,
                                            seed=seed, deterministic_time=deterministic_time,
                                            solver_cache=solver_cache, hurry=self._drain_event)
        except Saturated as exc:
            self.metrics.rejected.labels("saturated").inc()
            raise BadRequest(503, "saturated", ["too many solves in flight; retry later"],
                             {"Retry-After": str(exc.retry_after)}) from None
        except Exception as exc:
            self.metrics.solve_errors.inc()
            log.exception("plan failed")
            return _error(500, "internal error", [f"{type(exc).__name__}: {exc}"])
        self._record(answer, engine)
        received = request.scope.get("state", {}).get("received", deadline - limit)
        elapsed = time.perf_counter() - received
        self.metrics.deadline_slack.labels(_route(request)).observe(elapsed - limit)
        out = {"X-Plan-Source": answer.source, "X-Time-Limit": f"{limit:g}",
               "X-Elapsed-Before-Send": f"{elapsed:.4f}", **(headers or {})}
        return JSONResponse(answer.placement.to_dict(), headers=out)

    def _record(self, answer: Answer, engine: str) -> None:
        placement = answer.placement
        self.metrics.plans.labels(placement.status.value, placement.engine, answer.source).inc()
        if (engine != "greedy" and answer.source == SOURCE_SOLVE
                and answer.greedy_objective is not None and placement.objective is not None):
            gain = placement.objective - answer.greedy_objective
            self.metrics.gain.observe(max(0.0, gain) / max(1, abs(answer.greedy_objective)))
            if gain > 0:
                self.metrics.improved.inc()


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
    503: {"model": ErrorBody, "description": "saturated or shutting down (see Retry-After)"},
}


def create_app(config: ServiceConfig | None = None, solve_fn: SolveFn = solve) -> FastAPI:
    """Build the service application.

    Parameters
    ----------
    config
        Service settings (defaults: :class:`ServiceConfig`).
    solve_fn
        The facade to call (tests inject one that fails).
    """
    config = config or ServiceConfig()
    service = PlanningService(config, solve_fn)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.bind_loop()
        warm = None
        if config.warmup:
            warm = asyncio.ensure_future(anyio.to_thread.run_sync(service.warm_up))
        yield
        service.begin_drain()
        if warm is not None and not warm.done():
            warm.cancel()
        service.runner.shutdown()

    app = FastAPI(title="npu-place planning service", version=API_VERSION,
                  description="Whole-session placement plans for Ascend NPU gang jobs: "
                              "greedy port of the Volcano Ascend plugin plus CP-SAT, "
                              "answering within the request's time limit.",
                  lifespan=lifespan)
    app.state.service = service
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
    name_p = Path(pattern=CLUSTER_NAME, description="cluster name")

    @app.post("/v1/plan", response_model=PlacementFile, responses=_ERRORS,
              openapi_extra=_body_schema("Scenario"), tags=["plan"],
              summary="Plan a whole session (body: a scenario)")
    async def plan(request: Request, engine: Engine = engine_q,
                   time_limit: float | None = limit_q, seed: int = seed_q,
                   deterministic_time: float | None = det_q) -> Response:
        limit, deadline = service.deadline(request, time_limit)
        service.admit_early()
        body = await service.read_body(request)
        problem = await service.parse_by(body, deadline)
        ready = time.perf_counter() - (deadline - limit)
        return await service.plan(request, problem, engine=engine, limit=limit,
                                  deadline=deadline, seed=seed,
                                  deterministic_time=deterministic_time,
                                  headers={"X-Parsed-After": f"{ready:.4f}"})

    @app.post("/v1/validate", response_model=ValidateResponse, responses=_ERRORS,
              openapi_extra=_body_schema("ValidateRequest"), tags=["plan"],
              summary="Check a scenario, and optionally a placement")
    async def validate(request: Request) -> Response:
        body = await service.read_body(request)
        result = await anyio.to_thread.run_sync(run_validate, body)
        return JSONResponse(result.model_dump(by_alias=True, mode="json"))

    @app.put("/v1/clusters/{name}", response_model=ClusterInfo, responses=_ERRORS,
             openapi_extra=_body_schema("Scenario"), tags=["clusters"],
             summary="Store a cluster (body: a full scenario)")
    async def put_cluster(request: Request, name: str = name_p) -> Response:
        body = await service.read_body(request)
        problem = await anyio.to_thread.run_sync(parse_problem, body)
        try:
            cluster, created = service.clusters.put(name, problem)
        except OverflowError as exc:
            raise BadRequest(507, "too many clusters", [str(exc)]) from None
        service.metrics.delta_tier.labels("full").inc()
        return JSONResponse(cluster.info().model_dump(by_alias=True),
                            status_code=201 if created else 200)

    def _cluster(name: str) -> Any:
        cluster = service.clusters.get(name)
        if cluster is None:
            raise BadRequest(404, "no such cluster", [f"cluster '{name}' is not stored "
                                                      "(PUT it first)"])
        return cluster

    @app.patch("/v1/clusters/{name}", response_model=ClusterInfo, responses=_ERRORS,
               openapi_extra=_body_schema("ClusterDelta"), tags=["clusters"],
               summary="Apply a delta to a stored cluster")
    async def patch_cluster(request: Request, name: str = name_p) -> Response:
        cluster = _cluster(name)
        body = await service.read_body(request)
        delta = await anyio.to_thread.run_sync(parse_delta, body)
        try:
            info = await anyio.to_thread.run_sync(cluster.apply, delta)
        except InputError as exc:
            raise BadRequest(422, "invalid delta", exc.messages) from None
        except VersionConflict as exc:
            raise BadRequest(409, "version conflict", [str(exc)]) from None
        service.metrics.delta_tier.labels(info.last_update).inc()
        return JSONResponse(info.model_dump(by_alias=True))

    @app.get("/v1/clusters/{name}", response_model=ClusterInfo, tags=["clusters"],
             responses={404: {"model": ErrorBody}})
    async def get_cluster(name: str = name_p) -> Response:
        return JSONResponse(_cluster(name).info().model_dump(by_alias=True))

    @app.get("/v1/clusters/{name}/scenario", response_model=Scenario, tags=["clusters"],
             responses={404: {"model": ErrorBody}},
             summary="The stored cluster as a full scenario")
    async def get_cluster_scenario(name: str = name_p) -> Response:
        cluster = _cluster(name)
        data = await anyio.to_thread.run_sync(
            cluster.snapshot.problem.scenario.to_dict)
        return JSONResponse(data, headers={"X-Cluster-Version": str(cluster.snapshot.version)})

    @app.delete("/v1/clusters/{name}", status_code=204, tags=["clusters"],
                responses={404: {"model": ErrorBody}})
    async def delete_cluster(name: str = name_p) -> Response:
        if not service.clusters.delete(name):
            _cluster(name)
        return Response(status_code=204)

    @app.post("/v1/clusters/{name}/plan", response_model=PlacementFile, responses=_ERRORS,
              tags=["clusters"], summary="Plan a stored cluster's pending jobs")
    async def plan_cluster(request: Request, name: str = name_p, engine: Engine = engine_q,
                           time_limit: float | None = limit_q, seed: int = seed_q,
                           deterministic_time: float | None = det_q) -> Response:
        limit, deadline = service.deadline(request, time_limit)
        cluster = _cluster(name)
        service.admit_early()
        snapshot = await anyio.to_thread.run_sync(cluster.refresh_clock)
        return await service.plan(request, snapshot.problem, engine=engine, limit=limit,
                                  deadline=deadline, seed=seed,
                                  deterministic_time=deterministic_time,
                                  solver_cache=snapshot.solver_cache,
                                  headers={"X-Cluster-Version": str(snapshot.version)})

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
        body = HealthBody(status=status, in_flight=service.runner.in_flight,
                          abandoned=service.runner.abandoned,
                          capacity=service.runner.capacity)
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
    return app


__all__ = ["BadRequest", "PlanningService", "ServiceConfig", "create_app"]

