"""The ``onSessionOpen`` answer before everything else of the session.

The answer is sent by the event loop thread, which needs the GIL for it; the session's
reading, parsing and importing run in the plan thread and hold the GIL in stretches that
Python's switch interval cannot cut (one ``orjson.loads`` of a piece, a ``bytes.count``
or a join over the body, the freeing of a parsed tree, a full garbage collection).  One
such stretch started just before the answer is due delays the answer by its whole length
(an answer 2 ms past 0.8 × ``httpTimeout`` at load 18, a full collection of 0.4 s of CPU
after the plan at 1,024 real-size nodes).  :class:`AnswerGate` is the session's promise to
make way: from ``quiet_from`` until the answer is sent, the plan thread starts no new
stretch (:meth:`AnswerGate.make_way` waits, the GIL released), so the event loop thread
takes the GIL at once when its timer fires.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

#: Share of ``httpTimeout`` before the loop's answer time from which the plan thread starts
#: no new GIL-holding stretch until the answer is sent: about the longest stretch between
#: two :meth:`AnswerGate.make_way` calls (a 1 MB piece of orjson, 2-8 ms of CPU; the
#: importer's scenario validation, 30-70 ms at 1,024 real-size nodes), which then ends
#: well before the answer is due (the loop answers a tenth of ``httpTimeout`` early).
QUIET_SHARE = 0.05


class AnswerGate:
    """Whether the session's answer is sent, and when its plan thread must make way.

    Parameters
    ----------
    quiet_from
        ``clock()`` time from which :meth:`make_way` waits for the answer
        (``float("inf")``: never, a session nobody answers over HTTP).
    clock
        The clock of ``quiet_from`` (default :func:`time.monotonic`).
    longest_wait
        Seconds :meth:`make_way` waits at most (an answer that is never sent, such as a
        connection the client dropped, must not stop the plan for good).
    """

    def __init__(self, quiet_from: float = float("inf"),
                 clock: Callable[[], float] = time.monotonic,
                 longest_wait: float = 5.0) -> None:
        self.quiet_from = quiet_from
        self.clock = clock
        self.longest_wait = longest_wait
        self._sent = threading.Event()
        #: how many times :meth:`make_way` waited (the session's count)
        self.waits = 0
        self._kept: list[object] = []

    def free_later(self, value: object) -> None:
        """Keep ``value`` until :meth:`release` (after the answer): freeing a parsed
        snapshot is one deallocation that holds the GIL (80-110 ms at 1,024 real-size
        nodes), which must not run while the answer is due."""
        if self._sent.is_set():
            return  # answered already: the caller's reference goes now
        self._kept.append(value)

    def release(self) -> None:
        """Drop what :meth:`free_later` kept (call after the answer is sent)."""
        self._kept.clear()

    def sent(self) -> None:
        """The answer is sent (or will never be): the plan thread goes on."""
        self._sent.set()

    @property
    def is_sent(self) -> bool:
        """The answer is sent."""
        return self._sent.is_set()

    def make_way(self) -> None:
        """Call before a stretch that holds the GIL: returns at once, unless the answer is
        due soon (``clock() >= quiet_from``) and not sent yet; then waits (the GIL
        released) until it is sent, at most :attr:`longest_wait` seconds."""
        if self._sent.is_set() or self.clock() < self.quiet_from:
            return
        self.waits += 1
        self._sent.wait(self.longest_wait)

    def wait_sent(self) -> None:
        """Wait (at most :attr:`longest_wait` seconds) until the answer is sent, whatever
        the time: for work that may hold the GIL long, such as a full collection."""
        self._sent.wait(self.longest_wait)


#: The gate of a session nobody waits for (a direct call of the core, a benchmark).
def open_gate() -> AnswerGate:
    """A gate that never waits."""
    gate = AnswerGate()
    gate.sent()
    return gate
