"""The ``prioritize`` fast path gives what a full parse gives, on random bodies in Go's
layout and not: escaped names, ``{"Name","Node"}`` objects nested elsewhere, duplicate
keys, truncated bodies and garbage after the task (malformed: 400 from both)."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.scenario import Family
from solver.service.extender import ExtenderConfig, ExtenderCore
from solver.service.extender.protocol import ABSTAIN
from solver.service.extender.session import JobPlan, Session

JOB = "ns/pg"
PLANNED = "node-1"
TASK = {"UID": "u1", "Job": JOB, "Pod": {"metadata": {"name": "p", "namespace": "ns",
                                                      "annotations": {"hccl/rankIndex": "0"}}}}


def _core() -> ExtenderCore:
    core = ExtenderCore(ExtenderConfig(engine="greedy"))
    session = Session(1, 0.0, 0)
    session.jobs[JOB] = JobPlan(Family.ORDINARY, None, {0: PLANNED}, frozenset({PLANNED}),
                                True)
    session.ready.set()
    core.session = session
    return core


def _full(core: ExtenderCore, raw: bytes) -> bytes:
    """The answer of a full parse (the reference): 400 for a body that is not JSON."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return b"400"
    return core.prioritize(data) if isinstance(data, dict) else ABSTAIN


def _fast(core: ExtenderCore, raw: bytes) -> bytes:
    try:
        return core.prioritize_raw(raw)
    except orjson.JSONDecodeError:
        return b"400"


scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12)
names = st.one_of(st.sampled_from([PLANNED, "node-2", "None", "1", "nöde-1"]),
                  st.text(max_size=6), st.integers(0, 3), st.none())


@st.composite
def node_texts(draw: st.DrawFn) -> str:
    """One candidate as JSON text: Go's ``{"Name":…,"Node":…}`` or another shape."""
    name = draw(names)
    name_text = json.dumps(name, ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()) and isinstance(name, str) and name:  # an escaped first letter
        name_text = json.dumps(name).replace(name[0], f"\\u{ord(name[0]):04x}", 1) \
            if ord(name[0]) < 0x10000 else name_text
    node = json.dumps(draw(values))
    nested = json.dumps({"Name": PLANNED, "Node": {}})
    shape = draw(st.integers(0, 5))
    if shape == 0:
        return f'{{"Name":{name_text},"Node":{node}}}'
    if shape == 1:  # the planned node's opening nested in another field
        return f'{{"Name":{name_text},"Node":{nested},"Other":{nested}}}'
    if shape == 2:  # a duplicate Name key
        return f'{{"Name":{name_text},"Node":{node},"Name":{json.dumps(PLANNED)}}}'
    if shape == 3:
        return f'{{"Node":{node},"Name":{name_text}}}'
    if shape == 4:
        return json.dumps(draw(values))
    return f'{{"Node":{node}}}'


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    task = TASK if draw(st.booleans()) else draw(values)
    if draw(st.booleans()):  # a task holding the nodes key's bytes inside a string
        task = {"x": ',"nodes":[{"Name":"node-1","Node":{}}]}', **TASK}
    nodes = ",".join(draw(st.lists(node_texts(), max_size=5)))
    layout = draw(st.integers(0, 4))
    if layout == 0:
        text = f'{{"task":{json.dumps(task, separators=(",", ":"))},"nodes":[{nodes}]}}'
    elif layout == 1:  # duplicate keys at the top
        text = (f'{{"task":{json.dumps(task)},"nodes":[{nodes}],'
                f'"nodes":[],"task":{json.dumps(TASK)}}}')
    elif layout == 2:  # the keys the other way round, with spaces
        text = f'{{ "nodes": [{nodes}], "task": {json.dumps(task)} }}'
    elif layout == 3:
        text = f'{{"task":{json.dumps(task, separators=(",", ":"))},"nodes":[{nodes}],"x":1}}'
    else:
        text = json.dumps(draw(values))
    raw = text.encode()
    damage = draw(st.integers(0, 3))
    if damage == 1:  # truncated
        raw = raw[:draw(st.integers(0, max(0, len(raw) - 1)))]
    elif damage == 2:  # garbage after the body
        raw += draw(st.sampled_from([b"x", b"}", b",", b" ]", b"\x00", b"{}"]))
    return raw


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_the_fast_path_answers_as_a_full_parse(raw: bytes) -> None:
    core = _core()
    assert _fast(core, raw) == _full(core, raw), raw


def test_the_examples_of_disagreement_agree_now() -> None:
    core = _core()
    task = json.dumps(TASK, separators=(",", ":"))
    node = '{"Name":"\\u006eode-1","Node":{}}'
    cases: list[tuple[bytes, Any]] = [
        (f'{{"task":{task},"nodes":[{node}]}}'.encode(), "steered"),  # escaped name
        (f'{{"task":{task},"nodes":[{{"Name":"node-2","Node":{{"Name":"node-1",'
         f'"Node":{{}}}}}}]}}'.encode(), "abstains"),  # nested opening
        (f'{{"task":{task},"nodes":[],"nodes":[{{"Name":"node-1","Node":{{}}}}]}}'.encode(),
         "steered"),  # duplicate nodes: the last counts
        (f'{{"task":{task},"nodes":[{{"Name":"node-1","Node":{{}}}}]'.encode(), "400"),
        (f'{{"task":{task},"nodes":[{{"Name":"node-1","Node":{{}}}}]}}xyz'.encode(), "400"),
    ]
    for raw, expected in cases:
        answer = _fast(core, raw)
        assert answer == _full(core, raw)
        shown = "400" if answer == b"400" else "abstains" if answer == ABSTAIN else "steered"
        assert shown == expected, (raw, answer)
