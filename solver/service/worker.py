"""A solver worker process: parses bodies, holds stored clusters, runs the facade.

The serving process (:mod:`solver.service.pool`) sends one request at a time over a pipe
and reads the answers; everything that holds the GIL for long (JSON and pydantic parsing
of 8,000-node bodies, compiling, greedy, building the CP-SAT model) happens here, so the
serving process's event loop stays free for health checks and other requests' deadlines.

The requests and answers are the dataclasses of :mod:`solver.service.messages`.  A plan
answers :class:`~solver.service.messages.Parsed` once the scenario is compiled (or the
stored cluster's snapshot taken: with its version), a
:class:`~solver.service.messages.FallbackAnswer` each time the facade publishes a fallback
(greedy's, then origin-first's or the kept answer's if better: the ``on_fallback`` hook of
:func:`solver.facade.solve`, so greedy runs once per plan), then one
:class:`~solver.service.messages.FinalAnswer`.  Every other request answers one
:class:`~solver.service.messages.Reply`: a patch its summary, the applied delta in compact
form and the time its cache events were stamped with (the replay log keeps both); an
export the scenario, version and cache states (log compaction); a delete whether the
cluster was held and its last version.  A ``put`` from a client carries the version the
serving process sets when the worker starts it.

Any failure answers :class:`~solver.service.messages.Failure`.  A started worker sends
:class:`~solver.service.messages.Ready`: how long its warm-up solve took (the first
measured solve time admission uses, :mod:`solver.service.admission`).  Exactly one
terminal answer ends every request.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import logging
import os
import signal
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from models.joblist import job_names
from models.validation import InputError
from solver.model.cancel import deferred_cleanup
from solver.reuse import SolveCache
from solver.service.messages import (
    Call,
    DeleteAnswer,
    DeleteCluster,
    DumpAnswer,
    DumpCluster,
    Exit,
    ExportAnswer,
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
from solver.service.parsing import BadRequest, capped, parse_delta, parse_problem, run_validate
from solver.service.state import ClusterDelta, ClusterStore, VersionConflict


def settle_heap() -> None:
    """Exempt the objects alive from the cyclic garbage collector, garbage collected first.

    A stored cluster is about a million long-lived objects at 65,536 nodes (its scenario's
    pydantic models); each full collection walks them all (0.1-0.2 s, landing on a random
    PATCH or plan).  Called after a ``PUT``: the objects frozen at the last call go back to
    the collector (``gc.unfreeze``), one full collection reclaims what became cyclic
    garbage since (a replaced cluster's CP-SAT models, say), and what is alive then moves
    to the permanent generation (``gc.freeze``), which collections skip.  Objects frozen
    here are still freed by reference counting when they are dropped; cyclic garbage among
    them waits for the next ``PUT``.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()


log = logging.getLogger("npu_place.service.worker")

#: The facade the workers call unless a test names another (``module:function``).
DEFAULT_SOLVE = "solver.facade:solve"

#: Scheduling priority of the workers relative to the serving process (``nice``).
WORKER_NICE = 5


def load_solve(path: str) -> Callable[..., Any]:
    """Import ``module:function``."""
    module, _, name = path.partition(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return fn


class PipeClosed(Exception):
    """The serving process closed the pipe: the worker ends without a traceback."""


class Worker:
    """The state and handlers of one worker process."""

    def __init__(self, conn: Connection, solve_path: str, solve_slack: float = 0.05) -> None:
        self.conn = conn
        self.solve = load_solve(solve_path)
        self.solve_slack = solve_slack
        self.clusters = ClusterStore(max_clusters=1 << 30)  # the serving process limits them
        #: per stored cluster, what its last plan leaves for the next (solver.reuse)
        self.solve_caches: dict[str, SolveCache] = {}

    def warm_up(self) -> float:
        """Exercise both engines (imports, OR-Tools start-up); return the seconds of a
        second, warm solve of the same small example (admission's first measurement)."""
        from models.compiled import compile_scenario
        from models.io import load_scenario
        from solver.doors import example_path

        problem = compile_scenario(load_scenario(example_path("ordinary-8npu")))
        self.solve(problem, engine="auto", time_limit=0.5)
        started = time.monotonic()
        self.solve(problem, engine="auto", time_limit=0.5)
        return time.monotonic() - started

    def send(self, message: Any) -> None:
        """Send one answer (a :mod:`~solver.service.messages` dataclass) to the serving
        process.

        Raises
        ------
        PipeClosed
            When the serving process has closed the pipe (it is shutting down, or it
            retired this worker): nothing is left to answer to.
        """
        try:
            self.conn.send(message)
        except (BrokenPipeError, EOFError, OSError) as exc:
            raise PipeClosed(str(exc)) from None

    def run(self) -> None:
        """Serve requests until the pipe closes (quietly: a closed pipe is a normal end)."""
        try:
            self._serve()
        except PipeClosed as exc:
            log.debug("the serving process closed the pipe (%s); the worker ends", exc)

    def _serve(self) -> None:
        while True:
            try:
                call: Call = self.conn.recv()
            except (EOFError, OSError):
                return
            rid, request = call.rid, call.request
            if isinstance(request, Exit):  # retired by the serving process
                return
            try:
                self.handle(rid, request)
            except PipeClosed:
                raise
            except BadRequest as exc:
                self.send(Failure(rid, exc.status, exc.error, exc.messages))
            except InputError as exc:
                self.send(Failure(rid, 422, "invalid input", capped(exc.messages)))
            except VersionConflict as exc:
                self.send(Failure(rid, 409, "version conflict", [str(exc)]))
            except Exception as exc:  # a crash is a 500 for this request only
                log.exception("request %s failed", type(request).__name__)
                self.send(Failure(rid, 500, "internal error",
                                  [f"{type(exc).__name__}: {exc}"]))

    def handle(self, rid: int, request: Request) -> None:
        """Dispatch one request."""
        if isinstance(request, PlanRequest):
            self.plan(rid, request)
            return
        self.send(Reply(rid, self.answer(request)))

    def answer(self, request: Request) -> Any:
        """The answer of a request other than a plan."""
        if isinstance(request, ValidateRequest):
            return run_validate(request.body).model_dump(by_alias=True, mode="json")
        if isinstance(request, PutCluster):
            problem = parse_problem(request.body)
            cluster, created = self.clusters.put(request.name, problem, request.version)
            self.solve_caches.pop(request.name, None)  # a new body: nothing to continue from
            settle_heap()
            if request.states is not None:  # a replay of a compacted cluster: its cache too
                cluster.restore_state(json.loads(request.states))
            return PutAnswer(cluster.info().model_dump(by_alias=True), created)
        if isinstance(request, PatchCluster):
            cluster = self._cluster(request.name)
            delta = parse_delta(request.body)
            info = cluster.apply(delta, request.stamp)
            return PatchAnswer(info.model_dump(by_alias=True), compact_delta(delta),
                               cluster.last_stamp)
        if isinstance(request, DumpCluster):
            cluster = self._cluster(request.name)
            data = cluster.snapshot.problem.scenario.to_dict()
            return DumpAnswer(json.dumps(data).encode(), cluster.snapshot.version)
        if isinstance(request, ExportCluster):  # compaction: the scenario plus cache states
            state = self._cluster(request.name).export_state()
            return ExportAnswer(
                json.dumps(state["scenario"], separators=(",", ":")).encode(),
                state["version"],
                json.dumps(state["cache-states"], separators=(",", ":")).encode())
        if isinstance(request, DeleteCluster):
            self.solve_caches.pop(request.name, None)
            held = self.clusters.get(request.name)
            return DeleteAnswer(self.clusters.delete(request.name),
                                None if held is None else held.snapshot.version)
        raise BadRequest(500, "internal error",
                         [f"unknown worker request {type(request).__name__}"])

    def _cluster(self, name: str) -> Any:
        cluster = self.clusters.get(name)
        if cluster is None:
            raise BadRequest(404, "no such cluster", [f"cluster '{name}' is not stored"])
        return cluster

    def plan(self, rid: int, request: PlanRequest) -> None:
        """The facade with the whole budget; its fallback answers (greedy, then
        origin-first or the kept answer) are sent as soon as they exist, then its final
        answer."""
        version: int | None = None
        if request.body is not None:
            problem = parse_problem(request.body)
        else:
            assert request.cluster is not None
            snapshot = self._cluster(request.cluster).refresh_clock()
            problem, version = snapshot.problem, snapshot.version
        # both kinds: the job names make the empty answer; the version is the one every
        # answer of this plan is valid for (a delta applied after it must not relabel it)
        self.send(Parsed(rid, job_names(problem.scenario), version))
        options: dict[str, Any] = {"seed": request.seed,
                                   "deterministic_time": request.deterministic_time}
        if request.cluster is not None:  # the last answer and models of a stored cluster
            options["cache"] = self.solve_caches.setdefault(request.cluster, SolveCache())
        deadline = request.deadline
        started = time.monotonic()
        if deadline <= started:
            self.send(FinalAnswer(rid))
            return
        if not request.full_solve:
            greedy = self.solve(problem, engine="greedy",
                                time_limit=max(0.001, deadline - started), **options)
            self.send(FallbackAnswer(rid, greedy.placement.to_dict(), greedy.objective))
            self.send(FinalAnswer(rid))
            return
        published: list[int] = []

        def publish(fallback: Any) -> None:
            # the facade's greedy (then origin-first) answer, sent as soon as it exists:
            # greedy runs once per plan
            self.send(FallbackAnswer(rid, fallback.placement.to_dict(), fallback.objective))
            published.append(fallback.objective)

        remaining = deadline - started
        budget = max(0.001, remaining - self.solve_slack - 0.05 * remaining)
        try:
            result = self.solve(problem, engine=request.engine, time_limit=budget,
                                on_fallback=publish, **options)
        except Exception as exc:
            if not published:
                raise  # no answer at all: a 500 for this request
            log.exception("solve failed after its fallback answer")
            self.send(FinalAnswer(rid, error=f"{type(exc).__name__}: {exc}"))
            return
        counts = getattr(result, "models", None)  # a test's facade may return less
        models = None
        if counts is not None:  # the solve's own count, as data (never read from a note)
            models = {"carried": counts.carried, "within": counts.within,
                      "built": counts.built}
        self.send(FinalAnswer(rid, result.placement.to_dict(), result.objective,
                              result.greedy_objective, models))


def compact_delta(delta: ClusterDelta) -> bytes:
    """The applied delta as compact JSON for the replay log: only the fields that were set,
    no whitespace, and no ``expect-version`` (a replay must not be refused)."""
    data = delta.model_dump(by_alias=True, exclude_unset=True, mode="json",
                            exclude={"expect_version"})
    return json.dumps(data, separators=(",", ":")).encode()


def worker_main(conn: Connection, solve_path: str, warmup: bool) -> None:
    """Entry point of a worker process."""
    # the serving process decides when workers end (it closes the pipe or kills them)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # Solving is batch work: on a saturated machine the serving process (health checks,
    # deadlines, sending answers) must get the CPU first.
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICE)
    worker = Worker(conn, solve_path)
    # the worker process is the service's own: answers on time, cleanup just after
    with deferred_cleanup():
        warmed: float | None = None
        if warmup:
            try:
                warmed = worker.warm_up()
            except Exception:  # best effort
                log.exception("warm-up failed")
        try:
            conn.send(Ready(warmed))
        except (BrokenPipeError, OSError):
            return
        worker.run()
