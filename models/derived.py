"""Values derived from one compiled problem alone, computed once: a typed per-problem cache.

A :class:`models.compiled.Problem` is never changed in place (every change builds a new
problem), so a value computed from it alone — a node order, the default objective weights,
the vNPU view, a model-reuse digest — stays valid as long as the problem lives.  Each kind
of such value is a :class:`Derived` declared next to the code that computes it, with the
type of its key and of its value; :class:`DerivedCache` (``Problem.derived``) holds them::

    LABEL_ORDER: Derived[tuple[str, int], np.ndarray] = Derived("label order")
    order = problem.derived.get_or_compute(LABEL_ORDER, (tree, depth), compute)

The cache is the only mutable part of a problem.  It is filled lazily by whoever needs a
value first (the engines, the CP-SAT worker thread); two threads asking at once may both
compute a value, and one of the equal answers is kept.  The values are shared: callers
must not change them (arrays are handed out read-only where it matters).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Derived(Generic[K, V]):
    """One kind of derived value: values of type ``V`` keyed by ``K`` (``None`` for a
    single value per problem).

    Parameters
    ----------
    name
        What the values are (for ``repr`` and :meth:`DerivedCache.sizes`).
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Derived({self.name!r})"


class DerivedCache:
    """The derived values of one problem, by :class:`Derived` kind and key."""

    __slots__ = ("_kinds",)

    def __init__(self) -> None:
        self._kinds: dict[Derived[Any, Any], dict[Any, Any]] = {}

    def get_or_compute(self, kind: Derived[K, V], key: K, compute: Callable[[], V]) -> V:
        """The value of ``kind`` for ``key``, computed by ``compute()`` the first time.

        A computed ``None`` is kept like any other value.
        """
        values = self._kinds.get(kind)
        if values is None:
            values = self._kinds.setdefault(kind, {})
        if key in values:
            found: V = values[key]
            return found
        value = compute()
        kept: V = values.setdefault(key, value)
        return kept

    def forget(self, kind: Derived[Any, Any]) -> None:
        """Drop every value of ``kind`` (for tests and benchmarks that time the
        computation itself)."""
        self._kinds.pop(kind, None)

    def sizes(self) -> dict[str, int]:
        """Values held per kind, by name."""
        return {kind.name: len(values) for kind, values in self._kinds.items()}
