"""A list page read for what a resync compares (:mod:`models.kube.pages`): the same
identities and texts as the page parsed whole, and ``None`` (parse it whole) for
anything else."""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks.kube_api import LoopbackApiServer
from models.kube import pages

pytest.importorskip("msgspec")


def _page(limit: int = 3) -> bytes:
    server = LoopbackApiServer()
    for i in range(5):
        server.apply({"kind": "Pod", "metadata": {
            "name": f"p{i}", "namespace": "team", "uid": f"u{i}", "labels": {"a": "b"},
            "ownerReferences": [{"uid": "owner", "name": "job"}]},
            "spec": {"nodeName": "n", "containers": [{"name": "c"}]}})
    server.apply({"kind": "Pod", "metadata": {"name": "bare"}})
    _, data = server.list_json("pods", None, None, None, limit, None)
    return data


def test_identities_and_texts_are_those_of_the_whole_parse() -> None:
    data = _page()
    body = json.loads(data)
    read = pages.page_identities(data)
    assert read is not None
    listed, version, token = read
    assert listed == [((i["metadata"].get("namespace", ""), i["metadata"]["name"]),
                       i["metadata"].get("uid", ""), i["metadata"]["resourceVersion"])
                      for i in body["items"]]
    assert (version, token) == (body["metadata"]["resourceVersion"],
                                body["metadata"]["continue"])
    texts = pages.page_items(data, [0, 2])
    assert texts is not None
    assert [json.loads(text) for text in texts] == [body["items"][0], body["items"][2]]
    last = json.loads(_page(limit=0))
    assert "continue" not in last["metadata"]
    assert pages.page_identities(json.dumps(last).encode())[2] == ""  # type: ignore[index]


@pytest.mark.parametrize("body", [
    b"not json", b"[]", b'{"kind":"PodList"}', b'{"items":{}}', b'{"items":[1]}',
    b'{"items":[{"metadata":{"name":7}}]}',
    b'{"items":[{"metadata":{"name":"a","resourceVersion":5}}]}',
    b'{"items":[],"metadata":{"continue":null}}'])
def test_anything_else_is_parsed_whole(body: bytes) -> None:
    assert pages.page_identities(body) is None


def test_without_msgspec_every_page_is_parsed_whole(monkeypatch: pytest.MonkeyPatch
                                                    ) -> None:
    monkeypatch.setattr(pages, "_identity_decoder", None)
    monkeypatch.setattr(pages, "_raw_decoder", None)
    assert pages.page_identities(_page()) is None
    assert pages.page_items(_page(), [0]) is None


def test_texts_of_positions_past_the_page_are_refused() -> None:
    data = _page()
    items: Any = json.loads(data)["items"]
    assert pages.page_items(data, [len(items)]) is None
    assert pages.page_items(b'{"items":"x"}', [0]) is None
