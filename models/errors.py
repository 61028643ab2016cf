"""The error every input check raises: one message per problem found, and the
did-you-mean hint that names the closest known name of a misspelt one; the one "out of
time" of every engine."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class OutOfTime(Exception):
    """Work stopped because its time budget ran out (or it was told to stop).

    The one "out of time" of every engine: greedy's vNPU pass, the origin-first
    construction and its multilevel passes raise it as it is; CP-SAT's model building
    raises its subclass :class:`solver.model.cancel.BuildCancelled` (cancelled at a
    checkpoint, by the deadline or a stop request), and a neighbourhood step that finds
    no room to search :class:`solver.lns.StepNotStarted`.  Whoever catches it keeps the
    answer it had before the interrupted work started.
    """


class InputError(Exception):
    """Invalid input: carries every message found, each naming file, item and field."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("\n".join(messages))
        self.messages = messages


def closest_name(word: str, names: Iterable[str]) -> str | None:
    """The name of ``names`` a misspelt ``word`` most likely means (``fragmnt`` ->
    ``fragment``), or ``None`` when none is close (:func:`difflib.get_close_matches`,
    cutoff 0.6): the one did-you-mean of command-line options, sweep paths, scenario keys
    and ``--weights`` keys."""
    close = difflib.get_close_matches(word, list(names), n=1, cutoff=0.6)
    return close[0] if close else None
