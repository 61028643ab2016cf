"""Set-ups of the in-process delta tests (ordinary and vNPU twins alike): a stored
cluster, a delta applied to it, and node updates applied by hand to a scenario document
(the full body a delta must agree with)."""

from __future__ import annotations

import copy
from typing import Any

from heuristics.lifecycle import CacheLifecycle
from models.compiled import Problem, compile_scenario
from models.io import load_scenario, scenario_from_data
from models.scenario import Scenario
from models.validation import InputError
from solver.doors import example_path
from solver.service.state import ClusterDelta, apply_delta

#: The keys of a node update that change a vNPU node's ``vnpu`` section.
VNPU_UPDATE_KEYS = ("vnpu-chips", "unfinished-templates")


def stored(scenario: Scenario) -> tuple[Problem, CacheLifecycle]:
    """A stored cluster as the service keeps it: the compiled problem and its cache."""
    return compile_scenario(scenario), CacheLifecycle.from_model(scenario.affinity_cache)


def stored_example(name: str) -> tuple[Problem, CacheLifecycle]:
    """The bundled example ``name`` as a stored cluster."""
    return stored(load_scenario(example_path(name)))


def apply(problem: Problem, delta: dict[str, Any]) -> Any:
    """``delta`` applied to ``problem`` with a lifecycle fresh from its scenario's cache
    (the :func:`~solver.service.state.apply_delta` answer)."""
    lifecycle = CacheLifecycle.from_model(problem.scenario.affinity_cache)
    return apply_delta(problem, lifecycle, ClusterDelta.model_validate(delta))


def by_hand(data: dict[str, Any], updates: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Node updates applied to a scenario document by hand; ``None`` where one cannot
    apply (a name that is not there or not a string, a vNPU key on a node without a
    ``vnpu`` section, no ``unfinished-templates`` list)."""
    out = copy.deepcopy(data)
    by_name = {node["name"]: node for node in out["nodes"]}
    for update in updates:
        node = by_name.get(update["name"]) if isinstance(update["name"], str) else None
        if node is None:
            return None
        for key, value in update.items():
            if key in VNPU_UPDATE_KEYS:
                if "vnpu" not in node:
                    return None
                field = "chips" if key == "vnpu-chips" else key
                if value is None:
                    node["vnpu"].pop(field, None)
                    if key == "unfinished-templates":
                        return None  # a list is required
                else:
                    node["vnpu"][field] = value
            elif key != "name":
                node[key] = value
    return out


def fully_valid(data: dict[str, Any]) -> bool:
    """Whether the scenario document passes full validation (as a full body would)."""
    try:
        scenario_from_data(data, "hand-applied")
    except InputError:
        return False
    return True
