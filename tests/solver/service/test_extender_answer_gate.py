"""``onSessionOpen`` is answered while the snapshot is still being parsed: the answer's
clock starts at the request's first byte, and from shortly before the answer is due the
plan thread starts no new GIL-holding stretch until the answer is sent.

No timed assertion: the parse is a stage the test stalls on an event, and the checks are
about order (which piece started before or after the answer)."""

from __future__ import annotations

import gc
import socket
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from benchmarks.generators import GenParams, generate_case
from benchmarks.volcano_session import cluster_from_scenario, volcano_snapshot
from solver.service.app import ServiceConfig
from solver.service.extender import ExtenderConfig
from solver.service.extender import core as core_module
from solver.service.extender.answer import AnswerGate
from tests.solver.service.conftest import running_server


def _cluster_and_devices(folder: Path) -> Any:
    case = generate_case(GenParams("ordinary", nodes=8, seed=2, jobs=2, occupancy=0.2,
                                   unhealthy=0.0, subhealthy=0.0))
    cluster = cluster_from_scenario(case.scenario, "ordinary")
    cluster.write_device_dump(folder)
    return cluster


def test_the_gate_waits_only_when_the_answer_is_due_and_unsent() -> None:
    now = [0.0]
    gate = AnswerGate(10.0, clock=lambda: now[0], longest_wait=30)
    gate.make_way()  # long before the answer: no wait
    assert gate.waits == 0
    now[0] = 10.0
    done = threading.Event()
    worker = threading.Thread(target=lambda: (gate.make_way(), done.set()))
    worker.start()
    assert not done.wait(0.2)  # due and not sent: the plan thread waits
    gate.sent()
    worker.join(30)
    assert done.is_set() and gate.waits == 1
    gate.make_way()  # sent: never waits again
    assert gate.waits == 1


class Probe:
    """An object put into the parsed snapshot, to see when and where it is."""


def _probed_parse(monkeypatch: pytest.MonkeyPatch, probe: Probe) -> None:
    """The session's parse puts ``probe`` into the parsed snapshot (under a key the
    import does not read), and keeps no other reference to it."""
    real_parse = core_module.parse_snapshot
    box = [probe]

    def parse(raw: bytes, between: Any) -> Any:
        data = real_parse(raw, between)
        data["Probe"] = box.pop()
        return data

    monkeypatch.setattr(core_module, "parse_snapshot", parse)


def test_a_sessions_cleanup_makes_way_for_a_newer_sessions_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Session 1's parsed snapshot is freed after its plan; session 2's answer is due
    (on a fake clock) and not sent.  The freeing of session 1 (a GIL-holding stretch per
    slice) waits until session 2's answer is sent, though session 1's own answer was
    never due: the gate is the process's, not the session's."""
    cluster = _cluster_and_devices(tmp_path)
    core = core_module.ExtenderCore(ExtenderConfig(configmaps=(str(tmp_path),),
                                                   engine="greedy", http_timeout=30.0),
                                    clock=lambda: cluster.now)
    probe = Probe()
    freed_while_sent: list[bool] = []
    consulted = threading.Event()
    plan_thread: list[threading.Thread] = []

    def fake_clock() -> float:  # session 2's clock: its quiet time has come
        if threading.current_thread() in plan_thread:
            consulted.set()  # the plan thread asked whether session 2's answer is due
        return 5.0

    newer = AnswerGate(1.0, clock=fake_clock, longest_wait=30)  # session 2's answer
    weakref.finalize(probe, lambda: freed_while_sent.append(newer.is_sent))
    _probed_parse(monkeypatch, probe)
    del probe
    body = orjson.dumps(volcano_snapshot(cluster))
    own = AnswerGate()  # session 1's own answer: never due
    session = core.begin()
    worker = threading.Thread(target=core.open_session,
                              args=(session, body, time.monotonic() + 30, own))
    plan_thread.append(worker)
    worker.start()
    done = session.ready
    while not (consulted.is_set() or (done.is_set() and not worker.is_alive())):
        consulted.wait(0.01)
    newer.sent()  # session 2's answer goes out
    worker.join(30)
    own.sent()
    assert session.error is None and session.jobs
    assert freed_while_sent == [True]  # freed, and only once session 2 had its answer
    assert session.counts["made-way-for-answer"] >= 1


def test_the_kept_snapshot_is_out_of_the_collectors_view_during_the_plan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the plan runs, the parsed snapshot is alive but frozen: no collection (an
    automatic one, or the solver's own of generation 0) scans its objects with the GIL
    held.  Afterwards it is freed and nothing stays frozen."""
    cluster = _cluster_and_devices(tmp_path)
    core = core_module.ExtenderCore(ExtenderConfig(configmaps=(str(tmp_path),),
                                                   engine="greedy", http_timeout=30.0),
                                    clock=lambda: cluster.now)
    probe = Probe()
    watch = weakref.ref(probe)
    _probed_parse(monkeypatch, probe)
    del probe
    seen: list[tuple[bool, bool]] = []  # (alive, in a generation the collector scans)
    plan = core._plan

    def planning(*args: Any) -> None:
        alive = watch()
        seen.append((alive is not None,
                     any(obj is alive for obj in gc.get_objects()) if alive else False))
        del alive
        plan(*args)

    monkeypatch.setattr(core, "_plan", planning)
    session = core.begin()
    own = AnswerGate()  # an answer not sent yet, as over HTTP when the plan is quick
    core.open_session(session, orjson.dumps(volcano_snapshot(cluster)),
                      time.monotonic() + 30, own)
    own.sent()
    assert session.error is None and session.jobs
    assert seen == [(True, False)]
    assert watch() is None and gc.get_freeze_count() == 0
    assert "free" in session.timings


def test_the_answer_leaves_while_the_parse_goes_on_and_no_piece_starts_in_its_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = _cluster_and_devices(tmp_path)
    config = ServiceConfig(warmup=False, extender=ExtenderConfig(
        configmaps=(str(tmp_path),), engine="greedy", http_timeout=1.0))
    release, parse_done = threading.Event(), threading.Event()
    gates: list[AnswerGate] = []
    # each piece: (started in the quiet window before the answer, answer sent by then)
    pieces: list[tuple[bool, bool]] = []
    collected: list[bool] = []
    real_parse = core_module.parse_snapshot

    def stalled_parse(raw: bytes, between: Any) -> Any:
        """A parse of many short pieces that goes on until the test releases it."""
        while not release.is_set():
            between()
            gate = gates[0]
            pieces.append((time.monotonic() >= gate.quiet_from, gate.is_sent))
            time.sleep(0.002)
        data = real_parse(raw, between)
        parse_done.set()
        return data

    monkeypatch.setattr(core_module, "parse_snapshot", stalled_parse)
    full_collection = core_module.gc.collect

    def collect(*generation: int) -> int:
        if not generation:  # the session's full collection
            collected.append(gates[0].is_sent)
        return full_collection(*generation)

    monkeypatch.setattr(core_module.gc, "collect", collect)
    with running_server(config) as (url, service), httpx.Client(timeout=30) as client:
        core = service.extender
        opened = core.open_session

        def open_session(session: Any, body: Any, deadline: float, gate: AnswerGate) -> Any:
            gates.append(gate)
            return opened(session, body, deadline, gate)

        monkeypatch.setattr(core, "open_session", open_session)
        answer = client.post(f"{url}/volcano/onSessionOpen",
                             content=orjson.dumps(volcano_snapshot(cluster)))
        assert answer.status_code == 200 and answer.json() == {}
        assert not parse_done.is_set()  # answered while the parse was still running
        session = core.session
        assert session is not None and not session.ready.is_set()
        assert session.counts["answered-before-plan"] == 1
        waited = time.monotonic() + 30
        while (True, True) not in pieces:  # the parse goes on after the answer
            assert time.monotonic() < waited, pieces[-3:]
            time.sleep(0.005)
        release.set()
        assert session.ready.wait(30)
        assert session.error is None and session.jobs  # the plan went on and was made
        # no piece started between the quiet time and the answer
        assert (True, False) not in pieces, pieces
        core.executor.submit(lambda: None).result(30)  # the session's thread is done
        assert collected == []  # no full collection (it freed nothing, held the GIL long)


def test_the_answer_clock_starts_at_the_first_byte(tmp_path: Path) -> None:
    """Headers sent in two parts with a pause between: the time before the route ran
    counts the pause (the clock started at the first byte, not once the headers were
    parsed)."""
    cluster = _cluster_and_devices(tmp_path)
    config = ServiceConfig(warmup=False, extender=ExtenderConfig(
        configmaps=(str(tmp_path),), engine="greedy", http_timeout=30.0))
    body = orjson.dumps(volcano_snapshot(cluster))
    pause = 0.3
    with running_server(config) as (url, service):
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(b"POST /volcano/onSessionOpen HTTP/1.1\r\nHost: test\r\n")
            stamped = time.monotonic() + 30
            while not any(getattr(p, "first_byte", None) for p in service.connections.open):
                assert time.monotonic() < stamped, "the first bytes were never read"
                time.sleep(0.005)
            time.sleep(pause)
            sock.sendall(b"Content-Type: application/json\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
        session = service.extender.session
        assert session is not None and session.timings["before-route"] >= pause
