"""Every pending answer before everything else of the process.

The verbs' answers are sent by the event loop thread, which needs the GIL for it; the
sessions' reading, parsing, importing and cleaning up run in the plan thread, and the
verbs' parses in the parse thread.  Pure Python code hands the GIL over every switch
interval, but one C call holds it until it returns (one ``orjson.loads`` of a piece, a
``bytes.count`` or a join over the body, the freeing of a parsed tree, a collection of
the cyclic garbage collector).  One such stretch started just before an answer is due
delays that answer by its whole length: at 1,024 real-size nodes an automatic collection
of generation 0 that met the kept parsed snapshot held the GIL for 0.26-0.32 s, a full
collection after the answer 0.27-0.53 s (it found 0-6 objects to free), one ``del`` of
the parsed snapshot 80-110 ms.

:class:`AnswerGate` is one answer's promise: from ``quiet_from`` until the answer is sent
no thread that calls :meth:`AnswerGate.make_way` (or :func:`make_way`) starts a new
stretch.  The gates are *process-wide*: a thread makes way for every pending answer of
the process, not only for its own session's, because the GIL is the process's (the late
plan or the cleanup of one session overlaps the next session's answer window, a
``prioritize`` arrives during a session's cleanup).  So the event loop thread takes the
GIL at once when its timer fires.
"""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

#: Share of ``httpTimeout`` before the loop's answer time from which the plan thread starts
#: no new GIL-holding stretch until the answer is sent: about the longest stretch between
#: two :meth:`AnswerGate.make_way` calls (a 1 MB piece of orjson, 2-8 ms of CPU; the
#: importer's scenario validation, 30-70 ms at 1,024 real-size nodes), which then ends
#: well before the answer is due (the loop answers a tenth of ``httpTimeout`` early).
QUIET_SHARE = 0.05

#: Items of a kept parsed snapshot freed between two :func:`make_way` calls (one item is
#: a node's or a job's tree: about 0.1 ms to free at real object sizes).
FREE_SLICE = 16

_pending: weakref.WeakSet[AnswerGate] = weakref.WeakSet()
_pending_lock = threading.Lock()
#: the pending gates as weak references, rebuilt when one is added or leaves: what
#: :func:`make_way` reads without the lock (it runs thousands of times a session)
_pending_view: tuple[weakref.ref[AnswerGate], ...] = ()


def _changed() -> None:
    """Rebuild :data:`_pending_view` (under ``_pending_lock``)."""
    global _pending_view
    _pending_view = tuple(weakref.ref(gate) for gate in _pending)


class AnswerGate:
    """Whether one answer is sent, and when every other stretch must make way for it.

    A gate is pending (every thread's :func:`make_way` respects it) from its creation
    until :meth:`sent`, or until it has been waited for :attr:`longest_wait` seconds.

    Parameters
    ----------
    quiet_from
        ``clock()`` time from which :meth:`make_way` waits for the answer
        (``float("inf")``: never, a session nobody answers over HTTP).
    clock
        The clock of ``quiet_from`` (default :func:`time.monotonic`).
    longest_wait
        Seconds the threads wait for this answer at most (an answer that is never sent,
        such as a connection the client dropped, must not stop the plan for good).
    """

    def __init__(self, quiet_from: float = float("inf"),
                 clock: Callable[[], float] = time.monotonic,
                 longest_wait: float = 5.0) -> None:
        self.quiet_from = quiet_from
        self.clock = clock
        self.longest_wait = longest_wait
        self._sent = threading.Event()
        self._waited = 0.0  # seconds threads have waited for this answer
        #: how many times the holder of this gate made way (for any pending answer)
        self.waits = 0
        with _pending_lock:
            _pending.add(self)
            _changed()

    def sent(self) -> None:
        """The answer is sent (or will never be): no thread waits for it any more."""
        self._sent.set()
        with _pending_lock:
            _pending.discard(self)
            _changed()

    @property
    def is_sent(self) -> bool:
        """The answer is sent."""
        return self._sent.is_set()

    def due(self) -> bool:
        """The answer is not sent, its quiet time has come and it has not been waited for
        :attr:`longest_wait` seconds yet."""
        return (not self._sent.is_set() and self._waited < self.longest_wait
                and self.clock() >= self.quiet_from)

    def _wait(self) -> None:
        started = time.monotonic()
        self._sent.wait(max(0.0, self.longest_wait - self._waited))
        self._waited += time.monotonic() - started
        if self._waited >= self.longest_wait:
            with _pending_lock:  # never sent: no one waits for it again
                _pending.discard(self)
                _changed()

    def make_way(self) -> None:
        """Call before a stretch that holds the GIL: returns at once unless an answer of
        the process (this gate's or any other pending one) is due; then waits (the GIL
        released) until each due answer is sent, at most its :attr:`longest_wait`."""
        if make_way():
            self.waits += 1

    def wait_sent(self) -> None:
        """Wait (at most :attr:`longest_wait` seconds) until the answer is sent, whatever
        the time."""
        self._sent.wait(self.longest_wait)


def pending_gates() -> list[AnswerGate]:
    """The gates whose answers are not sent yet (any session's, any verb's)."""
    with _pending_lock:
        return list(_pending)


def make_way() -> bool:
    """Wait until no pending answer of the process is due (see :class:`AnswerGate`):
    call before a stretch that holds the GIL.  Returns whether it waited."""
    waited = False
    while True:
        due = [gate for gate in (ref() for ref in _pending_view)
               if gate is not None and gate.due()]
        if not due:
            return waited
        waited = True
        for gate in due:
            gate._wait()


def free_in_slices(values: list[Any], between: Callable[[], Any] = make_way) -> None:
    """Free parsed JSON trees a few items at a time, with ``between()`` before each slice.

    One ``del`` of a parsed snapshot is one deallocation of millions of objects that
    holds the GIL all along (80-110 ms at 1,024 real-size nodes); popped item by item,
    each deallocation is one node's or job's tree and the Python loop between them hands
    the GIL over.  Empties ``values``.
    """
    stack: list[Any] = []
    while values:
        stack.append(values.pop())
        while stack:
            top = stack[-1]
            if isinstance(top, dict) and top:
                between()
                for _ in range(min(FREE_SLICE, len(top))):
                    _, item = top.popitem()
                    if isinstance(item, (dict, list)) and len(item) > FREE_SLICE:
                        stack.append(item)  # a large map inside: freed in slices too
                    del item
            elif isinstance(top, list) and top:
                between()
                for _ in range(min(FREE_SLICE, len(top))):
                    item = top.pop()
                    if isinstance(item, (dict, list)) and len(item) > FREE_SLICE:
                        stack.append(item)
                    del item
            else:
                stack.pop()


def free_parsed(kept: list[Any]) -> None:
    """Free a session's parsed snapshot (frozen by ``gc.freeze`` until then) in slices,
    making way for every pending answer, then put the frozen objects back in the
    collector's view.

    No full collection follows: at 1,024 real-size nodes one held the GIL for 0.27-0.53 s
    and found 0-6 objects to free (the parse and the import make no cycles); the automatic
    collections free what the session left."""
    free_in_slices(kept, make_way)
    gc.unfreeze()
class VerbTicket:
    """One ``prioritize`` or ``predicate`` call: whether its answer went out neutral
    because it was late (:meth:`~solver.service.extender.core.ExtenderCore.late_answer`),
    and the steered job it concerns once that is known (both read and written under the
    core's lock)."""

    def __init__(self) -> None:
        self.late = False
        self.job: str | None = None


#: The gate of a session nobody waits for (a direct call of the core, a benchmark).
def open_gate() -> AnswerGate:
    """A gate that never waits."""
    gate = AnswerGate()
    gate.sent()
    return gate
