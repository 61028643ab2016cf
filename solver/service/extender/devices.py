"""The device state Volcano does not send: ConfigMaps and PriorityClasses, from dumps or live."""

from __future__ import annotations

import functools
import logging
import threading
import time
from pathlib import Path
from typing import Any

from models.kube.source import Diagnostics, read_dumps
from models.validation import InputError
from solver.service.extender.config import ExtenderConfig

log = logging.getLogger("npu_place.extender")


class DeviceSource:
    """The objects Volcano's snapshot lacks: device-info / NodeD / switch ConfigMaps, the
    scheduler ConfigMap and PriorityClasses.

    From dump files (re-read when one changes; checked at most once a second), or from the
    cluster through the list calls of ``import --kubeconfig/--in-cluster``, re-listed in a
    background thread every ``refresh_seconds`` (not per session).
    """

    KINDS = frozenset({"ConfigMap", "PriorityClass"})

    def __init__(self, config: ExtenderConfig) -> None:
        self.config = config
        self._objects: list[tuple[dict[str, Any], str]] = []
        self._stamp: tuple[tuple[str, float, int], ...] = ()
        self._checked = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        if config.configmaps:
            self._reload_files(force=True)

    def _file_stamp(self) -> tuple[tuple[str, float, int], ...]:
        out = []
        for root in self.config.configmaps:
            path = Path(root)
            files = sorted(path.rglob("*")) if path.is_dir() else [path]
            for item in files:
                try:
                    stat = item.stat()
                except OSError:
                    continue
                if item.is_file():
                    out.append((str(item), stat.st_mtime, stat.st_size))
        return tuple(out)

    def _reload_files(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._checked < 1.0:
            return
        self._checked = now
        stamp = self._file_stamp()
        if not force and stamp == self._stamp:
            return
        objects: list[tuple[dict[str, Any], str]] = []
        diag = Diagnostics()

        def keep(obj: dict[str, Any], source: str) -> None:
            if obj.get("kind") in self.KINDS:
                objects.append((obj, source))

        try:
            read_dumps(list(self.config.configmaps), keep, diag)
        except InputError as exc:
            self.error = "; ".join(exc.messages[:3])
            log.warning("extender device source: %s", self.error)
            return
        with self._lock:
            self._objects, self._stamp, self.error = objects, stamp, None

    def start(self) -> None:
        """Start the background re-listing (live mode)."""
        if not self.config.live or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._relist_loop, name="extender-devices",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background re-listing."""
        self._stop.set()

    def _relist_loop(self) -> None:
        from models.kube.live import read_live

        while not self._stop.is_set():
            objects: list[tuple[dict[str, Any], str]] = []
            try:
                read_live(functools.partial(self._keep, objects), Diagnostics(),
                          kubeconfig=self.config.kubeconfig, in_cluster=self.config.in_cluster,
                          kinds=self.KINDS)
            except InputError as exc:
                self.error = "; ".join(exc.messages[:3])
                log.warning("extender device source: %s", self.error)
            else:
                with self._lock:
                    self._objects, self.error = objects, None
            self._stop.wait(self.config.refresh_seconds)

    def _keep(self, into: list[tuple[dict[str, Any], str]], obj: dict[str, Any],
              source: str) -> None:
        if obj.get("kind") in self.KINDS:
            into.append((obj, source))

    def objects(self) -> list[tuple[dict[str, Any], str]]:
        """The current objects with their sources."""
        if self.config.configmaps:
            self._reload_files()
        with self._lock:
            return list(self._objects)
