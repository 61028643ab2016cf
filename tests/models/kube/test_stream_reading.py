"""How the watcher reads the API server's answers: list bodies and watch lines.

``models.kube.stream._loads`` reads with orjson and falls back to the standard library
where orjson refuses a document; ``_lines`` cuts a chunked watch
answer into its events however the chunks fall.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from models.kube import stream


class Chunks:
    """A response whose ``stream`` yields the given chunks (urllib3's signature)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def stream(self, amt: int | None = None, decode_content: bool = False) -> Iterator[bytes]:
        yield from self.chunks


def test_a_document_reads_as_the_standard_library_reads_it() -> None:
    body = b'{"items": [{"metadata": {"name": "n\\u00e9", "x": 1.5}}], "a": [true, null]}'
    assert stream._loads(body) == json.loads(body)


def test_every_64_bit_integer_is_read_exactly() -> None:
    # the API server's integers are Go's int32/int64/uint64: each is read as that integer
    for number in (-2**63, 2**63 - 1, 2**64 - 1, 0, -1):
        body = b'{"metadata": {"generation": %d}}' % number
        value = stream._loads(body)["metadata"]["generation"]
        assert value == number and isinstance(value, int)


def test_a_broken_document_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        stream._loads(b'{"items": [')


@pytest.mark.parametrize("cut", [1, 2, 3, 5, 7, 11, 64])
def test_the_watch_lines_are_the_events_however_the_chunks_fall(cut: int) -> None:
    events = [json.dumps({"type": "ADDED", "object": {"n": i}}).encode() for i in range(9)]
    raw = b"\n".join(events) + b"\n\n" + events[0]  # an empty line, and a last line unended
    chunks = [raw[i:i + cut] for i in range(0, len(raw), cut)]
    assert list(stream._lines(Chunks(chunks))) == [*events, events[0]]


def test_one_chunk_of_many_events_gives_each_event() -> None:
    events = [b'{"type":"MODIFIED","object":{"i":%d}}' % i for i in range(1000)]
    assert list(stream._lines(Chunks([b"\n".join(events) + b"\n"]))) == events
