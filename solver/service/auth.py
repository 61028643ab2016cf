"""Access control of the planning service: a bearer token, and who may listen where.

Loopback by default is right for a sidecar (the pod's loopback is shared by its
containers only).  A service reachable from the network needs a token:
``npu-place serve --token-file FILE`` makes every route except ``/healthz`` and
``/readyz`` (the probes) answer 401 unless the request carries ``Authorization: Bearer
<token>``; the comparison is constant-time (:func:`hmac.compare_digest`).  A non-loopback
``--host`` without a token file is refused unless ``--insecure`` says it is meant.  The
token is kept out of reprs, logs and metrics.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import ssl
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from models.documents import read_bytes
from models.errors import InputError
from models.limits import MAX_PEM_FILE_BYTES, MAX_SECRET_FILE_BYTES

#: Scope key :class:`solver.service.extender.PathToken` sets on a request whose path held
#: the token (Volcano's extender cannot send a header).
PATH_AUTHORIZED = "npu_place.extender_authorized"

#: Routes open without a token (Kubernetes probes carry no secret).
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
#: Longest token accepted (it travels in a header).
MAX_TOKEN_CHARS = 4096


class AccessSetupError(ValueError):
    """A token file or host setting that cannot be used; the message names the option."""


def load_token(path: str | Path) -> str:
    """The token in ``path``: its content without surrounding whitespace.

    At most :data:`~models.limits.MAX_SECRET_FILE_BYTES` are read, whatever the file is
    (:func:`models.documents.read_bytes`): ``/dev/zero`` is refused one byte past the
    limit, a named pipe without a writer reads as empty (refused as empty).

    Raises
    ------
    AccessSetupError
        The file cannot be read, is empty, too long, or holds characters a header
        cannot carry (the message names the file, never the content).
    """
    try:
        raw = read_bytes(path, MAX_SECRET_FILE_BYTES)
    except InputError as exc:
        raise AccessSetupError(f"--token-file {'; '.join(exc.messages)}") from None
    try:
        token = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise AccessSetupError(f"--token-file {path}: the token must be ASCII") from None
    if not token:
        raise AccessSetupError(f"--token-file {path}: the file is empty")
    if len(token) > MAX_TOKEN_CHARS:
        raise AccessSetupError(f"--token-file {path}: the token is longer than "
                               f"{MAX_TOKEN_CHARS} characters")
    if any(not (33 <= ord(ch) <= 126) for ch in token):
        raise AccessSetupError(f"--token-file {path}: the token must be one word of "
                               "printable characters (no spaces or control characters)")
    return token


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_exposure(host: str, has_token: bool, insecure: bool) -> None:
    """Refuse to listen beyond loopback without a token unless ``insecure``.

    Raises
    ------
    AccessSetupError
        For a non-loopback ``host`` with neither a token nor ``insecure``.
    """
    if is_loopback(host) or has_token or insecure:
        return
    raise AccessSetupError(
        f"--host {host}: listening beyond loopback lets anyone who can reach the port "
        "replace a cluster; give --token-file FILE (a bearer token), or --insecure if "
        "the network is protected otherwise")


class _PassphraseNeeded(Exception):
    """The TLS key is encrypted: OpenSSL asked for its passphrase."""


def _refuse_passphrase() -> bytes:
    """OpenSSL's password callback: never prompt, say the key needs one."""
    raise _PassphraseNeeded


def check_tls(certfile: str | None, keyfile: str | None) -> None:
    """Both TLS files or neither; each a readable regular PEM file of at most
    :data:`~models.limits.MAX_PEM_FILE_BYTES`; the key without a passphrase.

    OpenSSL (and uvicorn after it) open the files again by name, so they must be regular
    files (a pipe would be empty the second time, a device endless).  The pair is loaded
    once here with a password callback that refuses: an encrypted key is named at once
    instead of OpenSSL prompting on the terminal (or failing without one).

    Raises
    ------
    AccessSetupError
        Naming the option and the file.
    """
    if (certfile is None) != (keyfile is None):
        raise AccessSetupError("--ssl-certfile and --ssl-keyfile go together: give both")
    for option, path in (("--ssl-certfile", certfile), ("--ssl-keyfile", keyfile)):
        if path is None:
            continue
        try:
            read_bytes(path, MAX_PEM_FILE_BYTES, regular_only="OpenSSL reads it by name")
        except InputError as exc:
            raise AccessSetupError(f"{option} {'; '.join(exc.messages)}") from None
    if certfile is not None and keyfile is not None:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(
                certfile, keyfile, password=_refuse_passphrase)
        except _PassphraseNeeded:
            raise AccessSetupError(
                f"--ssl-keyfile {keyfile}: the private key is encrypted with a passphrase; "
                "the service never prompts for one: give the key without a passphrase "
                "(e.g. `openssl pkey -in KEY -out plain.key`, kept readable by the "
                "service's user only)") from None
        except (ssl.SSLError, ValueError, OSError) as exc:
            raise AccessSetupError(f"--ssl-certfile {certfile} / --ssl-keyfile {keyfile}: "
                                   f"not a PEM certificate and its key ({exc})") from None


class HiddenToken:
    """A token whose ``repr`` and ``str`` do not show it (safe in any log line)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value.encode("ascii")

    def matches(self, given: bytes) -> bool:
        """Constant-time comparison with ``given``."""
        return hmac.compare_digest(given, self._value)

    def __repr__(self) -> str:
        return "HiddenToken(<hidden>)"

    __str__ = __repr__


class BearerAuth:
    """Pure ASGI middleware: 401 unless ``Authorization: Bearer <token>`` matches.

    ``/healthz`` and ``/readyz`` stay open.  The token is compared with
    :func:`hmac.compare_digest` (time independent of where a guess differs).
    """

    def __init__(self, app: ASGIApp, token: HiddenToken) -> None:
        self.app = app
        self._token = token

    def __repr__(self) -> str:
        return "BearerAuth(token=<hidden>)"

    def allowed(self, scope: Scope) -> bool:
        """True when the request may pass (open path, or the right token)."""
        if scope.get("path") in OPEN_PATHS or scope.get(PATH_AUTHORIZED):
            return True  # probes; Volcano's extender verbs carry the token in the path
        header = b""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                header = value
                break
        scheme, _, given = header.partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        return self._token.matches(given.strip())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.allowed(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "unauthorized", "messages": [
            "this service needs 'Authorization: Bearer <token>' (the token of its "
            "--token-file)"]}).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'Bearer realm="npu-place"')]})
        await send({"type": "http.response.body", "body": body})
