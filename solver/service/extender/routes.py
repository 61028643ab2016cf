"""The extender's HTTP side: the verbs as FastAPI routes, the path token, bounded body reads.

:func:`extender_router` turns :class:`~solver.service.extender.core.ExtenderCore`'s verbs
into routes (and, in own-view mode, fetches the stored cluster's scenario and forwards
Volcano's allocate/deallocate events to it); :class:`PathToken` guards them.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.background import BackgroundTask
from starlette.types import ASGIApp, Receive, Scope, Send

from models.documents import paused_gc
from solver.service.auth import PATH_AUTHORIZED
from solver.service.extender.answer import QUIET_SHARE, AnswerGate, VerbTicket
from solver.service.extender.core import ExtenderCore, Session
from solver.service.extender.forward import CacheEventForwarder
from solver.service.extender.protocol import (
    ABSTAIN,
    EMPTY,
    EVENT_OK,
    FITS,
    SnapshotError,
    check_values,
)
from solver.service.parsing import BadRequest, refuse_declared_length

log = logging.getLogger("npu_place.extender")
#: Share of ``httpTimeout`` by which ``onSessionOpen`` stops waiting before its answer is
#: due (``answer_share``), so that the answer is sent by then: the event loop's timer fired
#: up to 50 ms late at load 13 on 2 cores (the process's threads wait for a core).
ANSWER_SLACK_SHARE = 0.1


class PathToken:
    """Pure ASGI middleware: the extender's verbs under ``<prefix>/<token>/<verb>``.

    Volcano's extender sends no credentials of its own; a token in ``urlPrefix`` is the
    one secret it can carry.  A request under the prefix with the right token has it
    removed from the path and is marked authorized (the bearer check lets it pass);
    any other request under the prefix gets 404, so the routes' names are not revealed.
    """

    def __init__(self, app: ASGIApp, prefix: str, token: str) -> None:
        self.app = app
        self.prefix = prefix.rstrip("/") + "/"
        self._token = token.encode()

    def __repr__(self) -> str:
        return "PathToken(token=<hidden>)"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path.startswith(self.prefix):
            given, _, rest = path[len(self.prefix):].partition("/")
            # a trailing '/' is no verb: the router's redirect to the path without it
            # would be built from the tokenless path (a Location the token check refuses)
            if (not rest or rest.endswith("/")
                    or not hmac.compare_digest(given.encode(), self._token)):
                await send({"type": "http.response.start", "status": 404,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", b"21")]})
                await send({"type": "http.response.body", "body": b'{"error":"not found"}'})
                return
            scope = dict(scope, path=self.prefix + rest,
                         raw_path=(self.prefix + rest).encode())
            scope[PATH_AUTHORIZED] = True
        await self.app(scope, receive, send)


def _json(content: bytes, status: int = 200, background: BackgroundTask | None = None,
          headers: dict[str, str] | None = None) -> Response:
    return Response(content, status_code=status, media_type="application/json",
                    background=background, headers=headers)


async def _read(request: Request, limit_mb: float, timeout: float) -> bytes:
    """The body, 413 above ``limit_mb`` (before reading when Content-Length says so), 408
    when it has not arrived within ``timeout`` seconds."""
    return b"".join(await _read_chunks(request, limit_mb, timeout))


async def _read_chunks(request: Request, limit_mb: float, timeout: float) -> list[bytes]:
    """The body as the chunks that arrived (joined by the plan thread: a join of 80 MB holds
    the GIL for 10-40 ms), with :func:`_read`'s refusals."""
    limit = int(limit_mb * 1024 * 1024)
    refuse_declared_length(request.headers.get("content-length"), limit,
                           f"the extender takes at most {limit} bytes", {"Connection": "close"})
    chunks: list[bytes] = []
    await _stream(request, limit, timeout, chunks)
    return chunks


async def _drain(request: Request, limit_mb: float, timeout: float) -> int:
    """Read the body and drop it (own-view mode): memory of one chunk; 413/408 as
    :func:`_read`.  Returns its size."""
    return await _stream(request, int(limit_mb * 1024 * 1024), timeout, None)


async def _stream(request: Request, limit: int, timeout: float,
                  chunks: list[bytes] | None) -> int:
    """Read the body chunk by chunk (into ``chunks`` when given): its size; 413 past
    ``limit`` bytes, 408 when it has not all arrived within ``timeout`` seconds."""
    size = 0
    try:
        async with asyncio.timeout(max(0.0, timeout)):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise BadRequest(413, "body too large", [
                        f"request body: more than {limit} bytes (the extender's limit)"],
                        {"Connection": "close"})
                if chunks is not None:
                    chunks.append(chunk)
    except TimeoutError:
        raise BadRequest(408, "body too slow", [
            f"request body: {size} bytes had arrived when the verb's time ran out"],
            {"Connection": "close"}) from None
    return size


def parse_verb_body(body: bytes, limit: int, verb: str) -> dict[str, Any]:
    """A verb's body as an object: 413 above ``limit`` JSON values (counted before
    parsing), 400 when it is not JSON, 422 when it is not an object."""
    try:
        check_values(body, limit, f"{verb} body")
    except SnapshotError as exc:
        raise BadRequest(413, "too many values", exc.messages, {"Connection": "close"}) \
            from None
    try:
        with paused_gc():
            data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(400, "malformed JSON", [f"request body: not JSON: {exc}"]) from None
    if not isinstance(data, dict):
        raise BadRequest(422, "invalid request", ["request body: expected an object"])
    return data


def extender_router(core: ExtenderCore, pool: Any = None,
                    events: CacheEventForwarder | None = None) -> APIRouter:
    """The verbs as routes under ``core.config.prefix``.

    ``pool`` is the service's :class:`~solver.service.pool.WorkerPool`, which holds the
    stored clusters (own-view mode, :attr:`ExtenderConfig.cluster`); ``events`` forwards
    the own view's cache events to it (``None``: not forwarded).
    """
    config = core.config
    router = APIRouter(prefix=config.prefix.rstrip("/"), tags=["volcano extender"])
    # every verb body other than the snapshot is parsed here, off the event loop and one
    # at a time: the memory of parsing is that of one body within the value bound
    parser = ThreadPoolExecutor(max_workers=1, thread_name_prefix="extender-parse")

    async def off_loop(function: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(parser, function, *args)

    async def stored_scenario(deadline: float) -> bytes:
        name = config.cluster
        record = pool.clusters.get(name) if pool is not None else None
        if record is None:
            raise SnapshotError(422, [f"stored cluster '{name}' does not exist (PUT "
                                      f"/v1/clusters/{name} first)"])
        try:
            reply = await pool.dump_cluster(name, deadline=deadline)
        except BadRequest as exc:
            raise SnapshotError(exc.status, exc.messages) from None
        return bytes(reply.scenario)

    def forward(event: dict[str, Any] | None) -> None:
        """Queue a cache event for the stored cluster (coalesced: at most one PATCH per
        interval, :mod:`solver.service.extender.forward`); nothing when the cluster is
        kept by a watch (the watch sees the binds)."""
        if events is not None and event is not None:
            events.start(asyncio.get_running_loop())
            events.add(event)

    async def small_body(request: Request, verb: str) -> dict[str, Any]:
        body = await _read(request, config.max_verb_mb, config.http_timeout)
        data: dict[str, Any] = await off_loop(parse_verb_body, body, config.max_verb_values,
                                              verb)
        return data

    @router.post("/onSessionOpen", summary="Volcano session open: snapshot in, plan made")
    async def on_session_open(request: Request) -> Response:
        # from the request's first byte (solver.service.connections stamps it)
        received = request.scope.get("state", {}).get("received", time.monotonic())
        # the answer is due at answer_seconds after arrival; the event loop stops waiting
        # a tenth of httpTimeout before it, the time to wake, take the GIL and send on a
        # loaded machine (measured 6-57 ms late at load 21-23 without it); the plan
        # thread makes way from a twentieth before that (answer.py)
        answer_by = received + config.answer_seconds - ANSWER_SLACK_SHARE * config.http_timeout
        gate = AnswerGate(answer_by - QUIET_SHARE * config.http_timeout,
                          longest_wait=config.http_timeout)
        session = core.begin()
        # the request's headers (and any wait for the event loop) before the route ran
        session.timings["before-route"] = time.monotonic() - received

        def after_answer() -> None:
            """The answer is on its way: the threads making way for it go on."""
            session.timings["sent"] = time.monotonic() - received
            gate.sent()

        try:
            if config.cluster is None:
                body: bytes | list[bytes] = await _read_chunks(
                    request, config.max_snapshot_mb, answer_by - time.monotonic())
            else:  # the service's own view: Volcano's snapshot is not parsed
                session.counts["snapshot-bytes-dropped"] = await _drain(
                    request, config.max_snapshot_mb, answer_by - time.monotonic())
                body = await stored_scenario(answer_by)
        except BadRequest as exc:
            session.error = exc.error
            session.timings["answered"] = time.monotonic() - received
            session.ready.set()
            after_answer()
            raise
        except SnapshotError as exc:
            session.error = "; ".join(exc.messages[:3])
            session.ready.set()
            after_answer()
            raise BadRequest(exc.status, "no stored cluster", exc.messages) from None
        future: Future[Session] = core.executor.submit(core.open_session, session, body,
                                                        answer_by - 0.02, gate)
        del body
        future.add_done_callback(lambda f: f.exception())  # a late refusal is only logged
        wrapped = asyncio.wrap_future(future)
        try:
            await asyncio.wait_for(asyncio.shield(wrapped),
                                   max(0.0, answer_by - time.monotonic()))
        except TimeoutError:
            session.count("answered-before-plan")
            # the plan is late: this session abstains until it is ready
            return _json(EMPTY, background=BackgroundTask(after_answer))
        except SnapshotError as exc:
            after_answer()
            raise BadRequest(exc.status, "snapshot refused", exc.messages) from None
        finally:
            session.timings["answered"] = time.monotonic() - received
        return _json(EMPTY, background=BackgroundTask(after_answer))

    @router.post("/onSessionClose", summary="Volcano session close")
    async def on_session_close(request: Request) -> Response:
        await _drain(request, config.max_verb_mb, config.http_timeout)  # never parsed
        return _json(core.close_session())

    def guarded(verb: str, answer: Callable[[], bytes], abstain: bytes) -> Response:
        """The verb's answer; a failure of the service's own code abstains (logged)."""
        try:
            return _json(answer())
        except (BadRequest, orjson.JSONDecodeError, SnapshotError):
            raise
        except Exception:
            log.exception("extender %s failed: abstaining", verb)
            return _json(abstain)

    async def on_time(request: Request, verb: str, work: Callable[[bytes, VerbTicket], bytes],
                      neutral: bytes) -> Response:
        """A per-task verb answered by :attr:`ExtenderConfig.answer_seconds` after its
        first byte, like ``onSessionOpen``: ``work`` (the body, a ticket) runs in the parse
        thread while every other thread makes way for the answer when it is due
        (:class:`AnswerGate`); a body that has not arrived, or a ``work`` not done, by then
        gets the ``neutral`` answer (Volcano's stock behaviour for the task) instead of a
        408 after Volcano's own timeout, and the job is left to Volcano for the session
        (:meth:`ExtenderCore.late_answer`), so its gang is not steered half-way."""
        received = request.scope.get("state", {}).get("received", time.monotonic())
        answer_by = received + config.answer_seconds - ANSWER_SLACK_SHARE * config.http_timeout
        gate = AnswerGate(answer_by - QUIET_SHARE * config.http_timeout,
                          longest_wait=config.http_timeout)
        ticket = VerbTicket()
        try:
            try:
                raw = await _read(request, config.max_verb_mb, answer_by - time.monotonic())
            except BadRequest as exc:
                if exc.status != 408:
                    raise
                core.late_answer(verb, ticket)
                return _json(neutral, headers={"Connection": "close"})
            wrapped = asyncio.get_running_loop().run_in_executor(
                parser, guarded, verb, functools.partial(work, raw, ticket), neutral)
            del raw
            try:
                answer: Response = await asyncio.wait_for(
                    asyncio.shield(wrapped), max(0.0, answer_by - time.monotonic()))
            except TimeoutError:
                wrapped.add_done_callback(lambda f: f.exception())
                core.late_answer(verb, ticket)
                return _json(neutral)
            return answer
        finally:
            gate.sent()

    def prioritize_work(raw: bytes, ticket: VerbTicket) -> bytes:
        try:
            return core.prioritize_raw(raw, ticket)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(400, "malformed JSON", [f"request body: not JSON: {exc}"]) \
                from None
        except SnapshotError as exc:
            raise BadRequest(exc.status, "too many values", exc.messages,
                             {"Connection": "close"}) from None

    def predicate_work(raw: bytes, ticket: VerbTicket) -> bytes:
        return core.predicate(parse_verb_body(raw, config.max_verb_values, "predicate"),
                              ticket)

    @router.post("/prioritize", summary="Scores: the planned node wins")
    async def prioritize(request: Request) -> Response:
        return await on_time(request, "prioritize", prioritize_work, ABSTAIN)

    @router.post("/predicate", summary="Job-level filter: nodes outside the planned set")
    async def predicate(request: Request) -> Response:
        return await on_time(request, "predicate", predicate_work, FITS)

    @router.post("/allocateFunc", summary="Volcano allocated a task")
    async def allocate(request: Request) -> Response:
        body = await small_body(request, "allocateFunc")
        if config.cluster is not None:
            forward(core.cache_event(body, None))
        return guarded("allocateFunc", lambda: core.allocate(body), EVENT_OK)

    @router.post("/deallocateFunc", summary="Volcano discarded or evicted a task")
    async def deallocate(request: Request) -> Response:
        body = await small_body(request, "deallocateFunc")
        if config.cluster is not None:
            task = body.get("task")
            forward(core.cache_event(body, task.get("Status") if isinstance(task, dict)
                                     else None) if isinstance(task, dict) else None)
        return guarded("deallocateFunc", lambda: core.deallocate(body), EVENT_OK)

    @router.get("/sessions", summary="The last sessions: timings, counts, errors")
    async def sessions() -> Response:
        return _json(orjson.dumps(core.history))

    return router
