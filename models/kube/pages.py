"""A list page of the API server read for what a resync compares, without building it.

A 410 resync lists a resource again and keeps the objects it holds unchanged (the same
uid and ``resourceVersion``).  Parsing every page whole (orjson) built, and then freed,
every object of the cluster to read four strings of each: at 65,536 nodes that was most
of the resync's CPU.  :func:`page_identities` reads only those strings and the list's own
``resourceVersion`` and ``continue`` (``msgspec`` decodes into typed structures and skips
the other fields without building them); :func:`page_items` cuts out the text of the
items that are read whole after all.

Both return ``None`` when ``msgspec`` is not installed (the ``kube`` extra brings it) or
the page is not of the API server's shape with strings where it writes strings (the
caller then parses the page whole, and says what is wrong with it).
"""

from __future__ import annotations

from typing import Any

try:
    import msgspec
except ImportError:  # the ``kube`` extra brings it; without it every page is parsed whole
    msgspec = None  # type: ignore[assignment]

#: (namespace, name) of a listed object, its uid and its resourceVersion (strings as
#: :func:`page_identities` reads them; as they are in a parsed object otherwise).
Identity = tuple[tuple[str, str], Any, Any]

_identity_decoder: Any = None
_raw_decoder: Any = None

if msgspec is not None:

    class _ObjectMeta(msgspec.Struct):
        """The fields of an object's ``metadata`` a resync compares."""

        name: str = ""
        namespace: str = ""
        uid: str = ""
        resourceVersion: str = ""

    class _Listed(msgspec.Struct):
        metadata: _ObjectMeta = msgspec.field(default_factory=_ObjectMeta)

    class _ListMeta(msgspec.Struct):
        resourceVersion: str = ""
        next_page: str = msgspec.field(default="", name="continue")

    class _IdentityPage(msgspec.Struct):
        items: list[_Listed]
        metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)

    class _RawPage(msgspec.Struct):
        items: list[msgspec.Raw]

    _identity_decoder = msgspec.json.Decoder(_IdentityPage)
    _raw_decoder = msgspec.json.Decoder(_RawPage)


def page_identities(data: bytes) -> tuple[list[Identity], str, str] | None:
    """The identities of a list page's items (in the page's order), the list's
    ``resourceVersion`` and its ``continue`` token (``""``: the last page).

    ``None`` when msgspec is missing, the text is not JSON, or the page is not a list
    object whose items are objects with string metadata fields."""
    if _identity_decoder is None:
        return None
    try:
        page = _identity_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    listed = [((meta.namespace, meta.name), meta.uid, meta.resourceVersion)
              for meta in (item.metadata for item in page.items)]
    return listed, page.metadata.resourceVersion, page.metadata.next_page


def page_items(data: bytes, positions: list[int]) -> list[bytes] | None:
    """The JSON text of the page's items at ``positions`` (ascending), not parsed;
    ``None`` when msgspec is missing or the page does not read as a list object."""
    if _raw_decoder is None:
        return None
    try:
        page = _raw_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    items = page.items
    if positions and positions[-1] >= len(items):
        return None
    return [bytes(items[at]) for at in positions]
