"""The snapshot is parsed in pieces (the event loop answers between them) and the pieces
are exactly the full parse, on Volcano's layout and on damaged or other bodies."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.generators import GenParams, generate_case
from benchmarks.volcano_session import cluster_from_scenario, volcano_snapshot
from solver.service.extender import protocol

_CASE = generate_case(GenParams("ordinary", nodes=12, seed=3, jobs=3, occupancy=0.4,
                                unhealthy=0.0, subhealthy=0.0))
BODY = orjson.dumps(volcano_snapshot(cluster_from_scenario(_CASE.scenario, "ordinary")))


def _reference(raw: bytes) -> object:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "error"


def _pieces(raw: bytes) -> object:
    try:
        return protocol.parse_snapshot(raw)
    except orjson.JSONDecodeError:
        return "error"


def test_volcano_layout_is_cut_into_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = orjson.loads

    def counted(raw: bytes) -> object:
        calls.append(len(raw))
        return real(raw)

    monkeypatch.setattr(protocol, "PIECE_BYTES", 2000)
    monkeypatch.setattr(protocol.orjson, "loads", counted)
    assert protocol.parse_snapshot(BODY) == real(BODY)
    assert len(calls) > 10 and max(calls) < len(BODY) // 4, calls


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(BODY)), st.integers(0, 5),
       st.sampled_from([b"", b"}", b"x", b'"', b"\\", b',"a":1', b'":{"Name":', b'":{"UID":']))
def test_pieces_equal_the_full_parse_on_damaged_bodies(at: int, cut: int, insert: bytes
                                                       ) -> None:
    protocol_bytes = protocol.PIECE_BYTES
    protocol.PIECE_BYTES = 700
    try:
        raw = BODY[:at] + insert + BODY[at + cut:]
        assert _pieces(raw) == _reference(raw)
    finally:
        protocol.PIECE_BYTES = protocol_bytes
