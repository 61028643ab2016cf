"""Measured solve times, for admission: how long will a worker's queue take?

A plan's time limit is an upper bound on its solve, not an estimate: small super-pod
scenarios prove optimality in ~50 ms of a 3 s limit, converged neighbourhoods stop early.
Admission that assumed every solve uses its whole limit refused 7 of a burst of 8 such
plans; this module keeps, per worker, a window of the seconds its recent requests actually
held it and answers with a high quantile of them, capped by each request's own budget.
"""

from __future__ import annotations

import math
from collections import deque

#: Requests kept per kind in the moving window.
WINDOW = 32
#: The quantile of the window used as the expected duration (high: waiting is estimated
#: on the pessimistic side, so that an admitted request rarely times out in the queue).
QUANTILE = 0.9
#: Expected seconds of a kind with no measurement yet: a full solve; a short request
#: (greedy only, validate, cluster updates); a plan's first answer (parsing and greedy).
PRIOR_SECONDS = {"solve": 0.5, "short": 0.1, "first": 0.1}


class SolveTimes:
    """Moving quantile of the seconds a worker's requests held it, per kind.

    Kinds are ``solve`` (a plan with engine ``auto`` or ``cpsat``), ``short``
    (everything else) and ``first`` (from a plan's start to greedy's answer: the least
    time worth starting a plan with).  :meth:`expect` caps the estimate by the request's
    budget: a solve never holds its worker much past its deadline (the facade stops
    there, and the pool kills a worker still busy ``kill_grace`` after it).
    """

    def __init__(self, window: int = WINDOW, quantile: float = QUANTILE) -> None:
        self.quantile = quantile
        self._seconds: dict[str, deque[float]] = {kind: deque(maxlen=window)
                                                  for kind in PRIOR_SECONDS}

    def record(self, kind: str, seconds: float) -> None:
        """Remember that a request of ``kind`` held its worker ``seconds``."""
        self._seconds[kind].append(max(0.0, seconds))

    def samples(self, kind: str) -> int:
        """Measurements of ``kind`` in the window."""
        return len(self._seconds[kind])

    def expect(self, kind: str, budget: float | None = None) -> float:
        """Expected seconds of a request of ``kind`` (at most ``budget`` when given)."""
        window = self._seconds[kind]
        if window:
            ordered = sorted(window)
            estimate = ordered[min(len(ordered) - 1, math.ceil(self.quantile * len(ordered)) - 1)]
        else:
            estimate = PRIOR_SECONDS[kind]
        return estimate if budget is None else max(0.0, min(budget, estimate))
