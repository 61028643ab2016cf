"""npu-place solver: the CP-SAT model, the time-budgeted solve facade and the CLI.

OR-Tools' ``cp_model`` is imported without pandas when pandas is not loaded yet
(:class:`_CpModelWithoutPandas`): ``cp_model`` imports pandas at its top only for its
pandas helpers (``new_int_var_series`` and the like), which npu-place never calls, and
pandas was the largest single part of a ``plan`` process's start (0.30-0.39 s of CPU of
about 0.85 s of imports, 2026-12-07, load 19).  Nothing is imported here: the finder only
takes part when something imports ``cp_model`` (the CLI's quick commands import no
OR-Tools).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence
from typing import Any

_CP_MODEL = "ortools.sat.python.cp_model"


class _CpModelWithoutPandas(importlib.abc.MetaPathFinder):
    """Imports ``cp_model`` once with a stand-in for pandas, when pandas is not loaded.

    ``cp_model`` touches only ``pandas.Index`` and ``pandas.Series`` while it is imported
    (type aliases and annotations); the stand-in provides two empty classes of those names
    and leaves ``sys.modules`` right after, so a later ``import pandas`` anywhere in the
    process gets the real package.  ``cp_model``'s pandas helpers then do not work
    (npu-place does not use them).  When the stand-in does not satisfy this version of
    ``cp_model``, the module is executed again with the real pandas.
    """

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != _CP_MODEL:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)  # once per process
        if "pandas" in sys.modules:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _WithoutPandas(spec.loader)
        return spec


class _WithoutPandas(importlib.abc.Loader):
    def __init__(self, real: Any) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        created: types.ModuleType | None = self.real.create_module(spec)
        return created

    def exec_module(self, module: types.ModuleType) -> None:
        stand_in = types.ModuleType("pandas")
        stand_in.__dict__.update(Index=type("Index", (), {}), Series=type("Series", (), {}))
        sys.modules["pandas"] = stand_in
        try:
            self.real.exec_module(module)
        except Exception:  # this version needs more of pandas: the ordinary import
            del sys.modules["pandas"]
            self.real.exec_module(module)
        finally:
            if sys.modules.get("pandas") is stand_in:
                del sys.modules["pandas"]


if not any(isinstance(finder, _CpModelWithoutPandas) for finder in sys.meta_path):
    sys.meta_path.insert(0, _CpModelWithoutPandas())
