"""Property: whatever one field of a dump holds, the import either writes a scenario that
``validate`` accepts, or refuses with messages naming what is wrong; never another error.

Every kind of field of a small cluster's objects (nodes, pods, PodGroups, PriorityClasses,
device-info, scheduler and reschedule ConfigMaps) is replaced by each hostile value in
turn; then pairs of fields at random, and values inside the JSON strings of ConfigMaps and
annotations.  The importer runs in process
(``ClusterImport``), its scenario text is read back by the scenario reader and validated.
"""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.documents import parse_text
from models.errors import InputError
from models.io import scenario_from_data
from models.kube import ClusterImport, Diagnostics
from tests.models.kube.helpers import NOW, cluster

Path_ = tuple[Any, ...]


def _base() -> list[dict[str, Any]]:
    b = cluster(nodes=4, **{"reserve-nodes": "1"})
    b.priority_class("high", 100, default=True)
    b.job("ml", "run", 2, 8, policy="chip8-node8", bound={0: "node-0", 1: "node-1"},
          priority_class="high")
    b.job("ml", "wait", 1, 8, policy="chip8-node8")
    job_id = f"{b.podgroups[0]['metadata']['namespace']}/{b.podgroups[0]['metadata']['name']}"
    b.reschedule_record(job_id, NOW - 60, [(0, "node-0", "fault")])
    return b.objects()


BASE = _base()
#: ``BASE`` as JSON text: :func:`_fresh` copies it by parsing (the objects are plain JSON
#: values, so this equals ``copy.deepcopy(BASE)``, at a quarter of its cost).
_BASE_JSON = json.dumps(BASE)


def _fresh() -> list[dict[str, Any]]:
    """A new deep copy of ``BASE``."""
    objects: list[dict[str, Any]] = json.loads(_BASE_JSON)
    return objects


def _paths(value: Any, path: Path_ = ()) -> list[Path_]:
    """Every position in the objects (containers and leaves), the root excluded."""
    found = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_paths(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_paths(item, (*path, index)))
    return found


def _json_strings(value: Any, path: Path_ = ()) -> list[Path_]:
    """Positions of strings holding a JSON object or list (annotations, ConfigMap data)."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _json_strings(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _json_strings(v, (*path, i))]
    return []


def _shape(path: Path_) -> tuple[Any, ...]:
    """A position with list indices blurred: one representative per kind of field."""
    return (BASE[path[0]]["kind"], *("#" if isinstance(p, int) else p for p in path[1:]))


PATHS = _paths(BASE)
#: One position per kind of field (174 for this cluster): every one is tried below.
FIELDS = list({_shape(path): path for path in PATHS}.values())
JSON_STRINGS = _json_strings(BASE)

HOSTILE: list[Any] = [
    None, True, -1, 0, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63) + 1, 1e30, -0.5, "",
    "x" * 300, "a\x1b[31mred", "\u202eevil", "9" * 40, "-5", "1e30", "null",
    {"a": 1}, [1, 2], [], {}, [[[[[[[[[[[[]]]]]]]]]]]], {"kind": "Node"},
]
EMBEDDED: list[Any] = [
    None, 2**63 - 1, -(2**63) + 1, 1e300, "x" * 300, "\x1b", {"a": {"b": {"c": [1]}}},
    [1, "2", None], {"": -1}, {"DeviceInfo": 5}, {"RescheduleRecords": [{}]},
]


def _set(root: Any, path: Path_, value: Any) -> None:
    for part in path[:-1]:
        root = root[part]
    root[path[-1]] = value


def _get(root: Any, path: Path_) -> Any:
    for part in path:
        root = root[part]
    return root


def _check(objects: list[dict[str, Any]]) -> None:
    importer = ClusterImport(Diagnostics())
    try:
        for obj in objects:
            if isinstance(obj, dict):
                importer.add(obj)
        result = importer.build(now=NOW)
    except InputError as exc:
        assert exc.messages and all(m.strip() for m in exc.messages)
        return
    for fmt in ("yaml", "json"):
        text = result.render(fmt)
        data = parse_text(text, f"<{fmt}>", "json" if fmt == "json" else None)
        scenario = scenario_from_data(data, f"<{fmt}>")  # what ``validate`` runs
        assert len(scenario.nodes) == len(result.data["nodes"])


@pytest.mark.slow
@pytest.mark.parametrize("path", FIELDS, ids=["/".join(map(str, _shape(p))) for p in FIELDS])
def test_every_hostile_value_in_every_kind_of_field(path: Path_) -> None:
    """Exhaustive: every kind of field of every object kind, every hostile value."""
    for value in HOSTILE:
        objects = _fresh()
        _set(objects, path, copy.deepcopy(value))
        _check(objects)


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_two_hostile_fields_anywhere(data: st.DataObject) -> None:
    objects = _fresh()
    for _ in range(2):
        path = data.draw(st.sampled_from(PATHS), label="path")
        value = data.draw(st.sampled_from(HOSTILE), label="value")
        # the first change may have removed the second position
        with contextlib.suppress(KeyError, IndexError, TypeError):
            _set(objects, path, copy.deepcopy(value))
    _check(objects)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_one_hostile_value_inside_embedded_json(data: st.DataObject) -> None:
    objects = _fresh()
    path = data.draw(st.sampled_from(JSON_STRINGS), label="json string")
    inner = json.loads(_get(objects, path))
    inner_paths = _paths(inner)
    if inner_paths:
        inner_path = data.draw(st.sampled_from(inner_paths), label="inner path")
        value = data.draw(st.sampled_from(EMBEDDED), label="value")
        _set(inner, inner_path, copy.deepcopy(value))
    else:
        inner = data.draw(st.sampled_from(EMBEDDED), label="value")
    _set(objects, path, json.dumps(inner))
    _check(objects)
