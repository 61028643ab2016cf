"""The live path against a fake Kubernetes API server on loopback (no client mocks).

The server is ``http.server`` in a thread, serving recorded JSON lists (the bundled dumps)
for the paths the official client calls, with label/field selectors and ``limit`` /
``continue`` pagination; it records every request so the tests can check that the
importer only lists.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from benchmarks.kube_dump import EXAMPLE_NOW
from models.kube import import_dumps
from solver.cli import main
from solver.doors import EXIT_INVALID, EXIT_OK

EXAMPLES = Path(str(resources.files("models") / "kube" / "examples"))


class FakeApi:
    """Recorded objects served as Kubernetes list endpoints."""

    def __init__(self, objects: list[dict[str, Any]], missing: frozenset[str] = frozenset(),
                 tls: tuple[Path, Path] | None = None):
        self.objects = objects
        self.missing = missing
        self.requests: list[tuple[str, str]] = []
        self.headers: list[str] = []
        server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        server.daemon_threads = True
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(certfile=str(tls[0]), keyfile=str(tls[1]))
            server.socket = context.wrap_socket(server.socket, server_side=True)
        self.server = server
        self.thread = threading.Thread(target=server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _select(self, path: str, query: dict[str, list[str]]) -> list[dict[str, Any]] | None:
        parts = path.strip("/").split("/")
        namespace = None
        if parts[:2] == ["api", "v1"]:
            rest = parts[2:]
            if len(rest) == 3 and rest[0] == "namespaces":
                namespace, rest = rest[1], rest[2:]
            kind = {"nodes": "Node", "pods": "Pod", "configmaps": "ConfigMap"}.get(rest[0])
        elif path == "/apis/scheduling.volcano.sh/v1beta1/podgroups":
            kind = "PodGroup"
        elif path == "/apis/scheduling.k8s.io/v1/priorityclasses":
            kind = "PriorityClass"
        else:
            return None
        if kind is None or kind in self.missing:
            return None
        items = [o for o in self.objects if o["kind"] == kind]
        if namespace:
            items = [o for o in items if o["metadata"].get("namespace") == namespace]
        for selector in query.get("labelSelector", []):
            key, _, value = selector.partition("=")
            items = [o for o in items if (o["metadata"].get("labels") or {}).get(key) == value]
        for selector in query.get("fieldSelector", []):
            key, _, value = selector.partition("=")
            assert key == "metadata.name"
            items = [o for o in items if o["metadata"]["name"] == value]
        return items

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True  # no 40-ms wait for a delayed ACK per answer

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                url = urlparse(self.path)
                query = parse_qs(url.query)
                api.requests.append(("GET", self.path))
                api.headers.append(self.headers.get("Authorization", ""))
                items = api._select(url.path, query)
                if items is None or "watch" in query:
                    body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                       "reason": "NotFound", "code": 404}).encode()
                    self.send_response(404)
                else:
                    start = int(query.get("continue", ["0"])[0])
                    limit = int(query.get("limit", ["0"])[0]) or len(items)
                    page = items[start:start + limit]
                    meta: dict[str, Any] = {"resourceVersion": "4242"}
                    if start + limit < len(items):
                        meta["continue"] = str(start + limit)
                    stripped = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")}
                                for o in page]  # list items carry no kind, as the API server
                    body = json.dumps({"kind": "List", "apiVersion": "v1", "metadata": meta,
                                       "items": stripped}).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                api.requests.append(("POST", self.path))
                self.send_response(405)
                self.end_headers()

            do_PUT = do_PATCH = do_DELETE = do_POST

        return Handler


def _objects(folder: Path) -> list[dict[str, Any]]:
    objects = []
    for file in sorted(folder.glob("*.json")):
        objects.extend(json.loads(file.read_text())["items"])
    return objects


@pytest.fixture
def serve() -> Iterator[Any]:
    started: list[FakeApi] = []

    def start(objects: list[dict[str, Any]], missing: frozenset[str] = frozenset(),
              tls: tuple[Path, Path] | None = None) -> FakeApi:
        api = FakeApi(objects, missing, tls)
        api.thread.start()
        started.append(api)
        return api

    yield start
    for api in started:
        api.server.shutdown()
        api.server.server_close()
        api.thread.join(timeout=5)


def _kubeconfig(tmp_path: Path, url: str) -> Path:
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "broken",
        "clusters": [{"name": "fake", "cluster": {"server": url}},
                     {"name": "nowhere", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "reader", "user": {"token": "read-only-token"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "reader"}},
                     {"name": "broken", "context": {"cluster": "nowhere", "user": "reader"}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("example", ["rack-950", "multilevel"])
def test_live_import_equals_the_dump_import(example: str, tmp_path: Path, serve: Any,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("models.kube.live.PAGE_SIZE", 7)  # several pages per list
    folder = EXAMPLES / example
    api = serve(_objects(folder))
    out = tmp_path / "live.json"
    code = main(["import", "--kubeconfig", str(_kubeconfig(tmp_path, api.url)),
                 "--context", "fake", "--now", str(EXAMPLE_NOW), "--output", str(out)])
    assert code == EXIT_OK
    expected = import_dumps([str(folder)], now=EXAMPLE_NOW).data
    assert json.loads(out.read_text()) == json.loads(json.dumps(expected))
    assert {method for method, _ in api.requests} == {"GET"}
    assert not any("watch" in path for _, path in api.requests)
    assert sum("/api/v1/nodes" in path for _, path in api.requests) > 1  # paginated
    assert main(["validate", str(out)]) == EXIT_OK


def test_missing_podgroup_crd_is_a_warning(tmp_path: Path, serve: Any,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    api = serve(_objects(EXAMPLES / "multilevel"), missing=frozenset({"PodGroup"}))
    code = main(["import", "--kubeconfig", str(_kubeconfig(tmp_path, api.url)),
                 "--context", "fake", "--now", str(EXAMPLE_NOW), "--format", "json"])
    assert code == EXIT_OK
    err = capsys.readouterr().err
    assert "podgroups.scheduling.volcano.sh" in err and "HTTP 404" in err


def test_missing_nodes_list_and_unreachable_server_exit_2(
        tmp_path: Path, serve: Any, capsys: pytest.CaptureFixture[str]) -> None:
    api = serve([], missing=frozenset({"Node"}))
    config = str(_kubeconfig(tmp_path, api.url))
    assert main(["import", "--kubeconfig", config, "--context", "fake"]) == EXIT_INVALID
    assert "API list of nodes: HTTP 404" in capsys.readouterr().err
    assert main(["import", "--kubeconfig", config, "--context", "nope"]) == EXIT_INVALID
    assert "cannot load the cluster configuration" in capsys.readouterr().err
    monkey_retries = main(["import", "--kubeconfig", config])  # current-context: nowhere
    assert monkey_retries == EXIT_INVALID
    assert "cannot reach the API server" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl for a test cert")
def test_in_cluster_service_account(tmp_path: Path, serve: Any,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = tmp_path / "ca.crt", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    token = tmp_path / "token"
    token.write_text("service-account-token")
    api = serve(_objects(EXAMPLES / "multilevel"), tls=(cert, key))
    port = api.server.server_address[1]
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(port))
    # the pod's service-account files, where the client looks for them
    monkeypatch.setattr("kubernetes.config.incluster_config.SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr("kubernetes.config.incluster_config.SERVICE_CERT_FILENAME", str(cert))
    out = tmp_path / "s.yaml"
    assert main(["import", "--in-cluster", "--now", str(EXAMPLE_NOW),
                 "--output", str(out)]) == EXIT_OK
    expected = import_dumps([str(EXAMPLES / "multilevel")], now=EXAMPLE_NOW).data
    assert yaml.safe_load(out.read_text()) == expected
    assert {h.lower() for h in api.headers} == {"bearer service-account-token"}


def _limit_memory() -> None:  # pragma: no cover - runs in the child
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


@pytest.mark.parametrize("what", ["zero", "fifo"])
def test_a_kubeconfig_that_is_no_regular_file_is_refused_unread(tmp_path: Path,
                                                                what: str) -> None:
    """The Kubernetes client reads a kubeconfig whole by its name; a
    device would fill the memory and a named pipe without a writer block it forever (a
    child process, bounded in memory and time, so that neither can hang the tests)."""
    import os
    import sys

    path = "/dev/zero"
    if what == "fifo":
        path = str(tmp_path / "kubeconfig")
        os.mkfifo(path)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    done = subprocess.run([sys.executable, "-m", "solver.cli", "import", "--kubeconfig",
                           path], capture_output=True, text=True, timeout=120, env=env,
                          check=False, preexec_fn=_limit_memory)
    assert done.returncode == EXIT_INVALID, done.stderr[-2000:]
    assert f"{path}: must be a regular file" in done.stderr
