"""At most one delta per interval: what the watcher and the extender's own view send.

A burst of thousands of events (a gang of pods bound, a rack of nodes failing) must become
a handful of ``PATCH`` es, not thousands, and must not queue without bound behind a stored
cluster that is busy.  :class:`Coalescer` is the one piece both writers share:

* :meth:`Coalescer.add` queues cache events (the extender's ``allocateFunc`` /
  ``deallocateFunc``), at most ``max_events`` of them: past that the newest are dropped
  and counted (:attr:`Coalescer.dropped`), never the memory of the service;
* :meth:`Coalescer.poke` says "something changed" without a payload (the watcher: its
  objects are the state, the delta is computed when sent);
* one thread sends: it waits for a change, sends what accumulated (one call of ``send``
  with the queued events), then waits until ``interval`` seconds after that send began
  before the next, so changes arriving meanwhile are coalesced into the next send.  At
  most one send is in flight at a time.

``send`` is called on the coalescer's thread with the events taken from the queue (empty
after a :meth:`~Coalescer.poke` alone); an exception from it is logged and counted, and
the events are not retried (a failed delta leaves the stored cluster unchanged: the next
send carries the next events).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("npu_place.coalesce")

#: Default seconds between two sends.
DEFAULT_INTERVAL = 0.1
#: Default bound of the queued events.
DEFAULT_MAX_EVENTS = 65_536


class Coalescer:
    """Coalesce changes into at most one ``send`` per ``interval`` seconds.

    Parameters
    ----------
    send
        Called with the events queued since the last send (a list, perhaps empty).
    interval
        Seconds from the start of one send to the start of the next, at least.
    max_events
        Events queued at most; more are dropped (counted in :attr:`dropped`).
    name
        The thread's name (logs).
    """

    def __init__(self, send: Callable[[list[dict[str, Any]]], None],
                 interval: float = DEFAULT_INTERVAL, max_events: int = DEFAULT_MAX_EVENTS,
                 name: str = "coalescer") -> None:
        if interval < 0:
            raise ValueError(f"interval must be at least 0, got {interval}")
        self.send = send
        self.interval = interval
        self.max_events = max_events
        self.name = name
        self._events: list[dict[str, Any]] = []
        self._dirty = False
        self._cond = threading.Condition()
        self._stopping = False
        self._busy = False
        self._thread: threading.Thread | None = None
        self.sends = 0
        self.failures = 0
        self.dropped = 0
        self.received = 0
        self.last_error: str | None = None

    def start(self) -> Coalescer:
        """Start the sending thread."""
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def add(self, event: dict[str, Any]) -> bool:
        """Queue one event; ``False`` when the queue is full (the event is dropped)."""
        with self._cond:
            self.received += 1
            if len(self._events) >= self.max_events:
                self.dropped += 1
                if self.dropped == 1 or self.dropped % 1000 == 0:
                    log.warning("%s: %d events queued already: %d dropped so far",
                                self.name, self.max_events, self.dropped)
                return False
            self._events.append(event)
            self._dirty = True
            self._cond.notify()
            return True

    def poke(self) -> None:
        """Note a change without a payload: the next send happens."""
        with self._cond:
            self._dirty = True
            self._cond.notify()

    @property
    def pending(self) -> int:
        """Events queued now."""
        with self._cond:
            return len(self._events)

    def idle(self) -> bool:
        """Nothing queued, nothing noted, nothing being sent."""
        with self._cond:
            return not self._dirty and not self._busy

    def wait_idle(self, timeout: float) -> bool:
        """Wait until :meth:`idle` (polling every 10 ms); whether it became idle."""
        ends = time.monotonic() + timeout
        while time.monotonic() < ends:
            if self.idle():
                return True
            time.sleep(0.01)
        return self.idle()

    def stop(self, flush: bool = True, timeout: float = 10.0) -> None:
        """Stop the thread; with ``flush`` what is queued is sent first."""
        with self._cond:
            self._stopping = True
            if not flush:
                self._events.clear()
                self._dirty = False
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        last = -float("inf")
        while True:
            with self._cond:
                while not self._dirty and not self._stopping:
                    self._cond.wait()
                if not self._dirty and self._stopping:
                    return
                wait = last + self.interval - time.monotonic()
                if wait > 0 and not self._stopping:
                    self._cond.wait(wait)  # more changes join this send meanwhile
                    continue
                events, self._events = self._events, []
                self._dirty = False
                self._busy = True
            last = time.monotonic()
            try:
                self.send(events)
                self.sends += 1
            except Exception as exc:  # a failed send: logged, the next one goes on
                self.failures += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("%s: send failed: %s", self.name, self.last_error)
            finally:
                with self._cond:
                    self._busy = False
