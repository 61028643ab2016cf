"""Solver worker processes seen from the serving process: dispatch, deadlines, admission,
killing overrunning work, and rebuilding stored clusters after a restart.

Why processes, not threads (measured; docs/service.md): in threads of
the serving process, parsing an 8,000-node body (pydantic holds the GIL for 0.1–0.3 s),
compiling, greedy and building the CP-SAT model all take the GIL from the event loop (a
thread sleeping 1 ms in a loop saw gaps of up to 0.155 s while one solve ran); in the
same 60 s load test the thread design sent 88 of 206 answers after their limit (worst
1.7 s late), the process design 2 of 117 (worst 0.04 s).  Workers run at a lower CPU
priority (``nice``), so on a saturated machine the serving process is scheduled first.
And a process, unlike a thread, can be killed: a solve still running ``kill_grace``
seconds after the deadline of the request it was abandoned by is killed, and its CPU comes
back at once.

Each worker serves one request at a time.  Stateless requests go to the worker expected
to be free first, avoiding workers that hold a stored cluster while another exists; a
stored cluster lives in one *home* worker, which also runs its plans.  The serving
process keeps, per cluster, a replay log (the last full scenario body and the deltas
applied since, compacted from time to time) and the cluster's versions
(:mod:`solver.service.cluster_log`), and replays them into a restarted worker, so a
killed or crashed worker loses no cluster.  That record changes when the worker answers,
in the worker's order (a ``DELETE`` behind a queued ``PUT`` deletes what the ``PUT``
stored), and every request for a name goes to one worker.  The messages to and from the
workers are :mod:`solver.service.messages`'s.

The event loop never waits on a worker process: each worker has a reader thread (which
also starts the process: a forkserver start takes 0.1 s on a loaded machine) and a writer
thread (writing a large body into the pipe waits until the worker has read it).

Why this file is long: (about 840 lines) dispatch, admission by expected time, the
deadline cut-off, killing overrunning workers and restarting them with their clusters
all act on the same per-worker queues and request records under the event loop; split
apart they would share those private structures across modules.  What does not share
them lives elsewhere: the replay log and versions (:mod:`solver.service.cluster_log`),
the messages (:mod:`solver.service.messages`), how a plan's answer is made from its
worker's answers (:mod:`solver.service.outcome`), admission's measured times
(:mod:`solver.service.admission`).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import logging
import math
import multiprocessing
import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from multiprocessing.connection import Connection
from typing import Any

from solver.service.admission import SolveTimes
from solver.service.cluster_log import ClusterLog, ClusterRecord
from solver.service.messages import (
    TERMINAL,
    Answer,
    Call,
    DeleteAnswer,
    DeleteCluster,
    DumpAnswer,
    DumpCluster,
    Exit,
    ExportCluster,
    Failure,
    FallbackAnswer,
    FinalAnswer,
    Parsed,
    PatchAnswer,
    PatchCluster,
    PlanRequest,
    PutAnswer,
    PutCluster,
    Ready,
    Reply,
    Request,
    ValidateRequest,
)
from solver.service.outcome import (
    PARSE_NOT_DONE,
    PLAN_NOT_STARTED,
    SOURCE_EMPTY,
    SOURCE_GREEDY,
    SOURCE_SOLVE,
    PlanOutcome,
    Saturated,
    plan_outcome,
)
from solver.service.parsing import BadRequest
from solver.service.worker import DEFAULT_SOLVE, worker_main

log = logging.getLogger("npu_place.service")

__all__ = ["PARSE_NOT_DONE", "PLAN_NOT_STARTED", "SOURCE_EMPTY", "SOURCE_GREEDY",
           "SOURCE_SOLVE", "PlanOutcome", "Saturated", "WorkerPool", "WorkerProcess"]

#: Expected seconds of a short request (greedy only, validate, cluster updates) when
#: estimating when a worker will be free; also the least time worth starting a plan with
#: (before its cut-off), and the wait assumed for a running request that has outlived its
#: deadline (it ends or is killed soon).
SHORT_SECONDS = 0.1



#: Seconds a retired worker (recycled, lost, or the pool closing) gets to exit after its
#: stop message before it is killed.
RETIRE_GRACE = 2.0

# Every worker process still running, so that interpreter exit never waits on one: the
# workers ignore SIGTERM (the serving process decides when they end), and multiprocessing
# joins its children at exit.  Registered after multiprocessing's own exit hook, so it runs
# first.
_LIVE_PROCESSES: weakref.WeakSet[Any] = weakref.WeakSet()


def _kill_live_processes() -> None:
    for process in list(_LIVE_PROCESSES):
        with contextlib.suppress(Exception):
            if process.is_alive():
                process.kill()
                process.join(1.0)


atexit.register(_kill_live_processes)


def _ask_to_exit(worker: WorkerProcess) -> None:
    """Queue a worker's stop message; its writer thread sends it and closes the pipe.

    Closing the pipe alone is not enough: the reader thread blocked in ``recv`` keeps the
    socket open, so the worker would never see end-of-file.
    """
    worker.outbox.put(Call(0, Exit()))
    worker.outbox.put(None)


def _reap(worker: WorkerProcess) -> None:
    """Wait :data:`RETIRE_GRACE` for a process asked to exit; kill it if it has not."""
    if not worker.started.wait(RETIRE_GRACE + 30.0):
        return  # never started (its start failed or hangs): nothing to reap
    process = worker.process
    if process.pid is None:
        return
    process.join(RETIRE_GRACE)
    if process.is_alive():
        process.kill()
        process.join(2.0)
    _LIVE_PROCESSES.discard(process)


def _retire(worker: WorkerProcess) -> None:
    """Ask a worker process to exit and reap it in a thread (never blocks the loop)."""
    _ask_to_exit(worker)
    threading.Thread(target=_reap, args=(worker,), daemon=True,
                     name=f"npu-place-reap-{worker.index}").start()




@dataclass(eq=False)
class _Request:
    """A request of the serving process and what its worker has answered so far."""

    rid: int
    request: Request
    deadline: float | None = None  # time.monotonic()
    start_by: float | None = None  # a plan not started by then is withdrawn (503)
    submitted: float = field(default_factory=time.monotonic)
    started: float | None = None  # sent to its worker
    withdrawn: bool = False  # taken out of the queue unstarted
    admitted: bool = False
    internal: bool = False
    on_reply: Callable[[Any], None] | None = None
    on_error: Callable[[], None] | None = None
    parsed: Parsed | None = None
    #: the last fallback plan the facade published (greedy's, or a better one)
    fallback: FallbackAnswer | None = None
    final: FinalAnswer | None = None
    reply: Any = None
    error: tuple[int, str, list[str]] | None = None
    terminal: bool = False
    abandoned: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def kind(self) -> str:
        """The request's kind (``plan``, ``put``, ...)."""
        return self.request.kind


@dataclass(eq=False)
class WorkerProcess:
    """One worker process as the serving process sees it: its pipe, queue, the request
    it runs and its measured solve times."""

    index: int
    process: Any
    conn: Connection
    #: messages for the worker, sent by its writer thread (``None``: close the pipe)
    outbox: queue.SimpleQueue[Call | None] = field(
        default_factory=queue.SimpleQueue)
    #: set once ``process.start()`` has returned (or failed), in the worker's thread
    started: threading.Event = field(default_factory=threading.Event)
    queue: deque[_Request] = field(default_factory=deque)
    current: _Request | None = None
    ready: bool = False
    dead: bool = False
    served: int = 0
    times: SolveTimes = field(default_factory=SolveTimes)








def _time_kind(req: _Request) -> str:
    """The :class:`SolveTimes` kind of a request: a full solve or a short request."""
    request = req.request
    return "solve" if isinstance(request, PlanRequest) and request.full_solve else "short"


class WorkerPool:
    """The solver worker processes.

    Parameters
    ----------
    workers
        Worker processes (requests solved at once).
    queue
        Further plan/validate requests that may wait; beyond ``workers + queue`` in flight
        :meth:`plan` raises :class:`Saturated`.
    reply_margin
        Seconds kept between the cut-off and the deadline for sending the answer.
    kill_grace
        A worker still busy this long after the deadline of a request it was abandoned on
        is killed (and restarted).
    solve_path
        ``module:function`` of the facade the workers call (tests name failing ones).
    warmup
        Workers run a small solve before they report ready.
    recycle_after
        A worker is replaced by a fresh one after serving this many requests (0: never),
        which bounds the memory a long-running worker can accumulate.
    """

    def __init__(self, workers: int = 1, queue: int = 2, reply_margin: float = 0.05,
                 kill_grace: float = 1.0, solve_path: str = DEFAULT_SOLVE,
                 warmup: bool = True, recycle_after: int = 0) -> None:
        self.size = workers
        self.capacity = workers + queue
        self.reply_margin = reply_margin
        self.kill_grace = kill_grace
        self.solve_path = solve_path
        self.warmup = warmup
        self.in_flight = 0
        self.abandoned = 0
        self.killed = 0
        self.restarts = 0
        self.recycled = 0
        self.recycle_after = recycle_after
        #: called with the model counts of every final answer of a plan and whether it
        #: planned a stored cluster (metrics)
        self.on_models: Callable[[dict[str, int], bool], None] | None = None
        #: the stored clusters as their home workers hold them (replay logs, versions):
        #: every change is recorded when the worker's answer arrives, in the order the
        #: worker applied it
        self.clusters = ClusterLog()
        #: names with a PUT sent or queued -> (its worker, how many): every request for a
        #: name goes to one worker, so that worker's order is the name's order
        self._pinned: dict[str, tuple[int, int]] = {}
        self._workers: list[WorkerProcess] = []
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(["solver.service.worker", "solver.facade",
                                          "solver.engine"])

    # ------------------------------------------------------------------ processes
    def start(self) -> None:
        """Start the workers (on the serving loop)."""
        self._loop = asyncio.get_running_loop()
        self._workers = [self._spawn(i) for i in range(self.size)]

    @property
    def ready(self) -> bool:
        """True once every worker has started (and warmed up) at least once."""
        return bool(self._workers) and all(w.ready for w in self._workers)

    @property
    def workers(self) -> tuple[WorkerProcess, ...]:
        """The worker processes by index (a restarted worker replaces its entry; read
        them, the pool changes them)."""
        return tuple(self._workers)

    @property
    def saturated(self) -> bool:
        """True when a new plan or validate request would be refused."""
        return self.in_flight >= self.capacity

    def _spawn(self, index: int) -> WorkerProcess:
        """A new worker; its process is started in its reader thread, never on the loop
        (a forkserver start took 0.1-0.2 s on a loaded machine: every deadline of the
        serving process waited that long)."""
        assert self._loop is not None
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=worker_main, name=f"npu-place-worker-{index}",
                                    args=(child, self.solve_path, self.warmup), daemon=True)
        worker = WorkerProcess(index, process, parent)
        threading.Thread(target=self._start_and_read, args=(worker, child, self._loop),
                         daemon=True, name=f"npu-place-reader-{index}").start()
        return worker

    def _start_and_read(self, worker: WorkerProcess, child: Connection,
                        loop: asyncio.AbstractEventLoop) -> None:
        """Start the worker's process and its writer thread, then read its answers."""
        try:
            worker.process.start()
        except Exception as exc:  # fork failed (memory, process limit)
            worker.started.set()
            log.error("cannot start solver worker %d: %s", worker.index, exc)
            def retry() -> None:  # a second later: no busy loop while forks fail
                loop.call_later(1.0, self._lost, worker,
                                "the solver worker process could not start")

            with contextlib.suppress(RuntimeError):  # the loop is closed
                loop.call_soon_threadsafe(retry)
            return
        _LIVE_PROCESSES.add(worker.process)
        child.close()
        worker.started.set()
        threading.Thread(target=self._writer, args=(worker, loop), daemon=True,
                         name=f"npu-place-writer-{worker.index}").start()
        self._reader(worker, loop)

    def _writer(self, worker: WorkerProcess, loop: asyncio.AbstractEventLoop) -> None:
        """Send the worker's queued messages (a thread per worker: writing a 6.7 MB body
        into the pipe waits for the worker to read it, 0.03-0.14 s measured on a loaded
        machine, which on the loop delayed every other request's answer)."""
        while True:
            message = worker.outbox.get()
            if message is None:
                with contextlib.suppress(Exception):
                    worker.conn.close()
                return
            try:
                worker.conn.send(message)
            except Exception:  # the worker died, or the pipe was closed
                with contextlib.suppress(RuntimeError):  # the loop is closed
                    loop.call_soon_threadsafe(
                        self._lost, worker, "the solver worker process ended unexpectedly")
                return

    def _reader(self, worker: WorkerProcess, loop: asyncio.AbstractEventLoop) -> None:
        """Blocking reads of one worker's answers, handed to the loop (a thread per worker:
        the pipe stays blocking, and the GIL is free while it waits)."""
        while True:
            try:
                message = worker.conn.recv()
            except Exception:  # EOF, or the pipe closed by _lost/close
                with contextlib.suppress(RuntimeError):  # the loop is closed
                    loop.call_soon_threadsafe(
                        self._lost, worker, "the solver worker process ended unexpectedly")
                return
            try:
                loop.call_soon_threadsafe(self._on_message, worker, message)
            except RuntimeError:
                return

    def _on_message(self, worker: WorkerProcess, message: Answer) -> None:
        if worker.dead:
            return
        if isinstance(message, Ready):
            worker.ready = True
            if message.seconds is not None:
                worker.times.record("solve", float(message.seconds))
            self._next(worker)
            return
        req = worker.current
        if req is None or req.rid != message.rid:
            return  # an answer to a request that is gone
        if isinstance(message, Parsed):
            req.parsed = message
        elif isinstance(message, FallbackAnswer):
            req.fallback = message
            if req.started is not None:
                worker.times.record("first", time.monotonic() - req.started)
        elif isinstance(message, FinalAnswer):
            req.final = message
            if message.models is not None and self.on_models is not None:
                # every solve's count, also one whose request was answered without it
                request = req.request
                self.on_models(message.models, isinstance(request, PlanRequest)
                               and request.cluster is not None)
        elif isinstance(message, Reply):
            req.reply = message.value
        elif isinstance(message, Failure):
            req.error = (message.status, message.error, message.messages)
        req.wake.set()
        if isinstance(message, TERMINAL):
            worker.current = None
            if req.started is not None:
                worker.times.record(_time_kind(req), time.monotonic() - req.started)
            self._finish(req)
            if not req.internal:
                worker.served += 1
            if self.recycle_after and worker.served >= self.recycle_after:
                self.recycled += 1
                self._lost(worker, "recycled", restart_count=False)
                return
            self._next(worker)

    def _finish(self, req: _Request) -> None:
        req.terminal = True
        req.wake.set()
        if isinstance(req.request, PutCluster) and not req.internal:
            self._unpin(req.request.name)
        if req.admitted:
            self.in_flight -= 1
            if req.abandoned:
                self.abandoned -= 1
        if req.on_reply is not None and req.error is None:
            try:
                req.on_reply(req.reply)
            except Exception:  # bookkeeping must never break the reader
                log.exception("cluster bookkeeping failed")
        if req.internal and req.error is not None:
            log.error("internal %s failed: %s", req.kind, req.error)
        if req.on_error is not None and req.error is not None:
            req.on_error()

    def _next(self, worker: WorkerProcess) -> None:
        while worker.current is None and worker.ready and worker.queue and not self._closed:
            req = worker.queue.popleft()
            if req.terminal:
                continue  # withdrawn while queued
            if (isinstance(req.request, (PlanRequest, ValidateRequest))
                    and req.deadline is not None and req.deadline <= time.monotonic()):
                self._finish(req)  # its answer was already sent: skip the work
                continue
            if isinstance(req.request, PutCluster) and not req.internal:
                # the version is taken when the worker starts the PUT: every earlier
                # request for the name (same worker, in order) has answered by then
                req.request = replace(req.request,
                                      version=self.next_version(req.request.name))
            worker.current = req
            req.started = time.monotonic()
            worker.outbox.put(Call(req.rid, req.request))  # sent by its writer thread

    def _lost(self, worker: WorkerProcess, why: str, restart_count: bool = True) -> None:
        """A worker died, was killed or is recycled: fail its request (if any), start a new
        one, and replay its clusters into it."""
        if worker.dead:
            return
        worker.dead = True
        _retire(worker)
        req = worker.current
        worker.current = None
        if req is not None:
            req.error = (500, "internal error", [why])
            self._finish(req)
        if self._closed:
            return
        if restart_count:
            self.restarts += 1
        fresh = self._spawn(worker.index)
        fresh.queue = worker.queue
        fresh.times = worker.times  # the measured solve times stay valid
        replay = [self._request(request, internal=True)
                  for record in self.clusters.held_by(worker.index)
                  for request in record.replay()]
        fresh.queue.extendleft(reversed(replay))
        self._workers[worker.index] = fresh

    def _maybe_kill(self, index: int, req: _Request) -> None:
        worker = self._workers[index] if index < len(self._workers) else None
        if worker is None or worker.dead or worker.current is not req or self._closed:
            return
        log.warning("killing worker %d: still busy %.2f s after a request's deadline",
                    index, self.kill_grace)
        self.killed += 1
        worker.process.kill()
        self._lost(worker, "the solve overran its deadline and its worker was restarted")

    async def close(self) -> None:
        """Stop the workers (pipes closed, then killed if they do not exit)."""
        self._closed = True
        for worker in self._workers:
            if not worker.dead:
                worker.dead = True
                _ask_to_exit(worker)
        await asyncio.gather(*(asyncio.to_thread(_reap, worker) for worker in self._workers))

    # ------------------------------------------------------------------ dispatch
    def _request(self, request: Request, **kw: Any) -> _Request:
        return _Request(next(self._ids), request, **kw)

    def _pick(self) -> WorkerProcess:
        homes = {i: 0 for i in range(len(self._workers))}
        for record in self.clusters.values():
            homes[record.home] = homes.get(record.home, 0) + 1
        # a stored cluster's worker is kept for that cluster's per-session calls while
        # another worker exists: its PATCH and plan must not queue behind a stranger's solve
        return min(self._workers, key=lambda w: (homes[w.index] > 0, round(self._eta(w), 2),
                                                 len(w.queue), homes[w.index], w.index))

    def _eta(self, worker: WorkerProcess) -> float:
        """When ``worker`` is expected to be free for a new request (``time.monotonic``).

        From measured durations (:class:`~solver.service.admission.SolveTimes`), not
        limits: the running request ends at its start plus its expected duration (at its
        deadline once it has run longer than expected); each queued request adds its
        expected duration, capped by what its deadline leaves, and nothing when it would
        start after its ``start_by`` (it will be withdrawn).
        """
        now = time.monotonic()
        eta = now if worker.ready else now + 1.0
        current = worker.current
        if current is not None:
            started = current.started if current.started is not None else now
            budget = None if current.deadline is None else current.deadline - started
            end = started + worker.times.expect(_time_kind(current), budget)
            if end <= now:  # longer than expected: a plan runs until its deadline at most
                end = (current.deadline if current.deadline is not None
                       and current.deadline > now else now + SHORT_SECONDS)
            eta = max(eta, end)
        for req in worker.queue:
            if req.terminal:
                continue
            if req.start_by is not None and eta > req.start_by:
                continue  # will be withdrawn unstarted
            budget = None if req.deadline is None else max(0.0, req.deadline - eta)
            eta += worker.times.expect(_time_kind(req), budget)
        return eta

    def _withdraw(self, req: _Request) -> None:
        """Answer an unstarted plan that can no longer start in time with a 503."""
        for worker in self._workers:
            with contextlib.suppress(ValueError):
                worker.queue.remove(req)
        req.withdrawn = True
        self._finish(req)

    def _submit(self, req: _Request, home: int | None) -> int:
        worker = self._workers[home] if home is not None else self._pick()
        worker.queue.append(req)
        self._next(worker)
        return worker.index

    def home_for(self, name: str) -> int:
        """The worker a (new or existing) cluster lives in: its stored cluster's, else the
        one a PUT of the name is sent to already, else the one with fewest clusters."""
        record = self.clusters.get(name)
        if record is not None:
            return record.home
        if name in self._pinned:
            return self._pinned[name][0]
        counts = [0] * len(self._workers)
        for rec in self.clusters.values():
            counts[rec.home] += 1
        for pinned, _ in self._pinned.values():
            counts[pinned] += 1
        return min(range(len(counts)), key=lambda i: (counts[i], i))

    def _unpin(self, name: str) -> None:
        home, count = self._pinned[name]
        if count > 1:
            self._pinned[name] = (home, count - 1)
        else:
            del self._pinned[name]

    def next_version(self, name: str) -> int:
        """The version a full body for ``name`` gets
        (:meth:`~solver.service.cluster_log.ClusterLog.next_version`)."""
        return self.clusters.next_version(name)

    async def put_cluster(self, name: str, body: bytes) -> dict[str, Any]:
        """Store (or replace) cluster ``name`` in its home worker; the worker's
        :class:`~solver.service.messages.PutAnswer` as a dict (``info``, ``created``).

        The record of the serving process changes when the worker's answer arrives, so it
        follows the worker's order whatever else is queued for the name (a DELETE sent
        before this PUT deletes the old cluster, one sent after it the new one).

        Raises
        ------
        BadRequest
            With the worker's status and messages when the body is refused.
        """
        home = self.home_for(name)
        _, count = self._pinned.get(name, (home, 0))
        self._pinned[name] = (home, count + 1)  # released when the request ends (_finish)
        reply: PutAnswer = await self.call(
            PutCluster(name, body), home=home,
            on_reply=lambda r: self.record_put(name, home, body, r.info))
        return asdict(reply)

    async def delete_cluster(self, name: str) -> bool:
        """Delete cluster ``name`` in its home worker; whether the worker held it.

        The record is dropped (and its version remembered) when the worker's answer
        arrives, in the worker's order: a PUT queued before the DELETE is deleted with it,
        and a deleted cluster is never replayed into a restarted worker.
        """
        record = self.clusters.get(name)
        if record is None:
            return False
        reply: DeleteAnswer = await self.call(
            DeleteCluster(name), home=record.home,
            on_reply=lambda r: self.record_delete(name, r))
        return reply.deleted

    async def patch_cluster(self, name: str, body: bytes) -> dict[str, Any]:
        """Apply a delta to cluster ``name`` in its home worker; the worker's
        :class:`~solver.service.messages.PatchAnswer` as a dict (``info``, ``log``,
        ``stamp``).

        Raises
        ------
        BadRequest
            404 when the cluster is not stored (also when a DELETE queued before the delta
            removed it), 409/422 when the worker refuses the delta.
        """
        record = self.clusters.get(name)
        if record is None:
            raise BadRequest(404, "no such cluster", [f"cluster '{name}' is not stored "
                                                      "(PUT it first)"])
        reply: PatchAnswer = await self.call(
            PatchCluster(name, body), home=record.home,
            on_reply=lambda r: self.record_patch(name, r))
        return asdict(reply)

    async def dump_cluster(self, name: str, deadline: float | None = None) -> DumpAnswer:
        """Cluster ``name`` as its home worker holds it: scenario JSON and version.

        Raises
        ------
        BadRequest
            404 when the cluster is not stored; 503 when ``deadline``
            (``time.monotonic``) passed first.
        """
        record = self.clusters.get(name)
        if record is None:
            raise BadRequest(404, "no such cluster", [f"cluster '{name}' is not stored "
                                                      "(PUT it first)"])
        reply: DumpAnswer = await self.call(DumpCluster(name), home=record.home,
                                            deadline=deadline)
        return reply

    async def validate(self, body: bytes, deadline: float) -> dict[str, Any]:
        """Check a ``{"scenario", "placement"}`` body in a worker (admitted as a plan is);
        the validation document.

        Raises
        ------
        BadRequest
            With the worker's status and messages, or 503 when ``deadline`` passed.
        Saturated
            When the pool is saturated.
        """
        result: dict[str, Any] = await self.call(ValidateRequest(body), admit=True,
                                                 deadline=deadline)
        return result

    async def call(self, request: Request, *, home: int | None = None,
                   admit: bool = False, on_reply: Callable[[Any], None] | None = None,
                   deadline: float | None = None) -> Any:
        """Run a non-plan request in a worker and return its reply (the request's answer
        kind, :mod:`solver.service.messages`).

        With a ``deadline`` (``time.monotonic``) the request is given up at that time: it
        is skipped if it has not started, and its worker is killed (and its clusters
        replayed) if it is still running ``kill_grace`` seconds later, as for a plan.

        Raises
        ------
        BadRequest
            With the worker's status and messages when it failed; 503 when the deadline
            passed first.
        Saturated
            When ``admit`` and the pool is saturated.
        """
        if admit:
            self._admit()
        kind = request.kind
        req = self._request(request, admitted=admit, on_reply=on_reply, deadline=deadline)
        index = self._submit(req, home)
        while not req.terminal:
            req.wake.clear()
            if deadline is None:
                await req.wake.wait()
                continue
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(req.wake.wait(), timeout)
        if not req.terminal:
            assert deadline is not None and self._loop is not None
            req.abandoned = True
            if req.admitted:
                self.abandoned += 1
            self._loop.call_later(max(0.0, deadline + self.kill_grace - time.monotonic()),
                                  self._maybe_kill, index, req)
            raise BadRequest(503, "time limit passed", [
                f"the {kind} request did not finish within its time limit; retry later "
                "(or split the request)"], {"Retry-After": "1"})
        if req.error is not None:
            raise BadRequest(*req.error)
        return req.reply

    def _admit(self) -> None:
        if self.in_flight >= self.capacity:
            raise Saturated()
        self.in_flight += 1

    async def plan(self, *, body: bytes | None, cluster: str | None, engine: str,
                   deadline: float, seed: int, deterministic_time: float | None,
                   hurry: asyncio.Event | None = None) -> PlanOutcome:
        """Plan a body or a stored cluster and answer by ``deadline`` (``time.monotonic``).

        Raises
        ------
        Saturated
            At once when ``workers + queue`` requests are in flight, or when the chosen
            worker is expected (from measured solve times) to be busy past the request's
            last useful start (``Retry-After``: the expected wait); before the deadline
            (reason ``queue-timeout``) when a queued request could not start by then.
        BadRequest
            400/422 for a bad body, 404 for an unknown cluster, 500 for a crash before
            any answer existed, 503 when the deadline passed before the body was parsed.
        """
        cutoff = deadline - self.reply_margin
        worker = (self._workers[self.clusters[cluster].home] if cluster is not None
                  else self._pick())
        # started later than this, greedy's answer is not expected by the cut-off
        start_by = cutoff - max(SHORT_SECONDS, worker.times.expect("first"))
        eta = self._eta(worker)
        now = time.monotonic()
        if eta > now + 0.001 and eta > start_by:
            # the worker is expected to be busy past the last useful start: refuse now
            raise Saturated(retry_after=max(1, math.ceil(eta - now)), messages=[
                f"the solver is expected to be busy for {eta - now:.2f} s, past this "
                "request's time limit; retry later"])
        self._admit()
        req = self._request(PlanRequest(body, cluster, engine, deadline, seed,
                                        deterministic_time), deadline=deadline,
                            start_by=start_by, admitted=True)
        index = self._submit(req, worker.index)
        hurry_task = asyncio.ensure_future(hurry.wait()) if hurry is not None else None
        try:
            while not req.terminal:
                hurrying = hurry is not None and hurry.is_set()
                if hurrying and req.fallback is not None:
                    break
                now = time.monotonic()
                if req.started is None and (hurrying or now >= start_by):
                    self._withdraw(req)
                    break
                timeout = (cutoff if req.started is not None else start_by) - now
                if timeout <= 0:
                    break
                req.wake.clear()
                waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(req.wake.wait())}
                if hurrying:
                    timeout = min(timeout, 0.01)
                elif hurry_task is not None:
                    waiters.add(hurry_task)
                _, pending = await asyncio.wait(waiters, timeout=timeout,
                                                   return_when=asyncio.FIRST_COMPLETED)
                for w in pending:
                    if w is not hurry_task:
                        w.cancel()
        finally:
            if hurry_task is not None and not hurry_task.done():
                hurry_task.cancel()
            if not req.terminal and req.started is None:
                self._withdraw(req)  # its waiter is gone (cancelled): drop the work
            if not req.terminal:
                req.abandoned = True
                self.abandoned += 1
                assert self._loop is not None
                self._loop.call_later(max(0.0, deadline + self.kill_grace - time.monotonic()),
                                      self._maybe_kill, index, req)
        if req.withdrawn:
            if hurry is not None and hurry.is_set():
                raise Saturated(reason="draining", messages=["the service is shutting down"])
            wait = self._eta(self._workers[index]) - time.monotonic()
            raise Saturated(retry_after=max(1, math.ceil(wait)), reason="queue-timeout",
                            messages=[f"waited {time.monotonic() - req.submitted:.2f} s in "
                                      "the queue and could not start before this request's "
                                      "time limit; retry later"])
        assert isinstance(req.request, PlanRequest)
        outcome = plan_outcome(req.request, parsed=req.parsed, fallback=req.fallback,
                               final=req.final, error=req.error, terminal=req.terminal)
        if req.started is not None:
            outcome.queued_seconds = req.started - req.submitted
        return outcome

    # ------------------------------------------------------------------ clusters
    def record_put(self, name: str, home: int, body: bytes, info: dict[str, Any]) -> None:
        """Remember a stored cluster's full body (the replay base); a large body that is
        mostly whitespace is replaced by the worker's compact scenario at once."""
        record = self.clusters.put(name, home, body, info)
        if self.clusters.compact_at_put(body):
            self._compact(record)

    def record_delete(self, name: str, reply: DeleteAnswer) -> None:
        """Forget a deleted cluster and remember its last version."""
        self.clusters.deleted(name, reply)

    def record_patch(self, name: str, reply: PatchAnswer) -> None:
        """Remember an applied delta; compact the cluster's log when it is long enough."""
        record = self.clusters.patched(name, reply)
        if record is not None and self.clusters.needs_compaction(record):
            self._compact(record)

    def _compact(self, record: ClusterRecord) -> None:
        """Replace a cluster's replay base and log by the worker's current scenario and
        cache states (compact JSON)."""
        if record.compacting:
            return
        record.compacting = True

        def failed() -> None:  # the worker was lost: the full log replays instead
            record.compacting = False

        req = self._request(ExportCluster(record.name), internal=True,
                            on_reply=record.compacted, on_error=failed)
        self._submit(req, record.home)
