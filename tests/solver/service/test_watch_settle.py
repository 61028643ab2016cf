"""The watcher settles its process's heap after each whole ``PUT`` (the first stored
cluster, a cluster stored again), and ``npu-place watch`` and ``serve --watch`` ask it
to: the watched objects, alive from then on, leave the collector's full collections, as
the service's worker does after a ``PUT`` (:func:`solver.service.worker.settle_heap`)."""

from __future__ import annotations

import asyncio
import types
from typing import Any

import pytest

from models.kube.incremental import Changes
from models.validation import InputError
from solver.service import watcher as watcher_module
from solver.service.watcher import ClusterWatcher, Replaced, ServiceWatch, WatchConfig
from solver.service.worker import settle_heap


class _Watched:
    """Steps handed out in turn (``old`` ``None``: a whole import to ``PUT``)."""

    def __init__(self, steps: list[Any]) -> None:
        self.steps = steps
        self.on_change: Any = None

    def advance(self) -> Any:
        return self.steps.pop(0)

    def commit(self, step: Any) -> None:
        pass

    def abandon(self, step: Any) -> None:
        pass


class _Target:
    def __init__(self) -> None:
        self.version = 0
        self.conflict = False

    def put(self, scenario: dict[str, Any]) -> int:
        self.version += 1
        return self.version

    def patch(self, delta: dict[str, Any]) -> int:
        if self.conflict:
            raise Replaced("changed by someone else")
        self.version += 1
        return self.version


def _step(whole: bool, changes: Changes | None = None) -> Any:
    return types.SimpleNamespace(old=None if whole else object(), new=object(),
                                 changes=changes or Changes(), result=None,
                                 data=lambda: {})


def test_the_heap_is_settled_after_each_put_and_not_after_a_patch() -> None:
    settled: list[int] = []
    target = _Target()
    steps = [_step(True), _step(False), _step(False, Changes(now_moved=True)),
             _step(False, Changes(now_moved=True))]
    watcher = ClusterWatcher(_Watched(steps), target,  # type: ignore[arg-type]
                             settle=lambda: settled.append(target.version))
    watcher._send([])  # the first stored cluster: a PUT
    assert settled == [1]
    watcher._send([])  # nothing changed: no send
    steps[0].new = types.SimpleNamespace(now=5)
    watcher._send([])  # a PATCH
    assert settled == [1] and watcher.patches == 1
    target.conflict = True
    steps[0].new = types.SimpleNamespace(now=6)
    watcher._send([])  # refused by a changed cluster: stored again whole
    assert watcher.puts == 2 and settled == [1, 3]


def _refusing_start(seen: dict[str, Any]) -> Any:
    def start_watch(*args: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise InputError(["watch: stopped by the test"])
    return start_watch


def test_npu_place_watch_and_serve_watch_settle_the_heap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from solver.cli import watch as watch_command
    from solver.doors import CliError

    seen: dict[str, Any] = {}
    monkeypatch.setattr(watcher_module, "start_watch", _refusing_start(seen))
    config = types.SimpleNamespace(api=lambda: None, cluster="c", interval=0.1)
    args = types.SimpleNamespace(service="http://127.0.0.1:9", seconds=0.0, status_every=0.0)
    with pytest.raises(CliError):
        watch_command._watch(args, config, None)  # type: ignore[arg-type]
    assert seen.pop("settle") is settle_heap

    monkeypatch.setattr(WatchConfig, "api", lambda self: None)
    served = ServiceWatch(WatchConfig(cluster="c"), pool=None)
    served.start(asyncio.new_event_loop())
    assert served._thread is not None
    served._thread.join(10)
    assert served.error is not None and seen.pop("settle") is settle_heap
