"""Access control: bearer token (401 without or with a wrong one; probes open), TLS with a
self-signed certificate, the non-loopback host rule, and the token kept out of logs and
metrics — against real servers on loopback."""

from __future__ import annotations

import contextlib
import datetime
import io
import ipaddress
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from models.check import check
from models.compiled import compile_scenario
from solver.cli.main import main
from solver.service.app import ServiceConfig
from solver.service.auth import (
    AccessSetupError,
    BearerAuth,
    HiddenToken,
    check_exposure,
    check_tls,
    is_loopback,
    load_token,
)
from solver.service.client import PlanClient, ServiceError
from tests.solver.service.conftest import body, example, running_server

TOKEN = "s3cr3t-Token-0123456789abcdef"


# --------------------------------------------------------------------------- setup rules


def test_token_file_is_read_stripped_and_checked(tmp_path: Path) -> None:
    good = tmp_path / "token"
    good.write_text(f"  {TOKEN}\n")
    assert load_token(good) == TOKEN
    bad = [("empty", "\n", "is empty"), ("spaced", "two words", "one word"),
           ("binary", "caf\u00e9", "ASCII")]
    for name, content, message in bad:
        path = tmp_path / name
        path.write_text(content, encoding="utf-8")
        with pytest.raises(AccessSetupError, match=message) as info:
            load_token(path)
        assert str(path) in str(info.value)
    with pytest.raises(AccessSetupError, match="cannot read"):
        load_token(tmp_path / "missing")


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.3.4.5", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("0.0.0.0", False), ("::", False), ("10.0.0.7", False),
    ("planner.example", False)])
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_non_loopback_host_needs_a_token_or_insecure() -> None:
    check_exposure("127.0.0.1", has_token=False, insecure=False)
    check_exposure("0.0.0.0", has_token=True, insecure=False)
    check_exposure("0.0.0.0", has_token=False, insecure=True)
    with pytest.raises(AccessSetupError, match="--token-file"):
        check_exposure("0.0.0.0", has_token=False, insecure=False)


def test_serve_refuses_an_exposed_host_without_a_token_with_exit_2(tmp_path: Path) -> None:
    err = io.StringIO()
    assert main(["serve", "--host", "0.0.0.0", "--port", "0"], err=err) == 2
    assert "--host 0.0.0.0" in err.getvalue() and "--insecure" in err.getvalue()
    empty = tmp_path / "token"
    empty.write_text("")
    err = io.StringIO()
    assert main(["serve", "--token-file", str(empty)], err=err) == 2
    assert f"--token-file {empty}: the file is empty" in err.getvalue()
    err = io.StringIO()
    assert main(["serve", "--ssl-certfile", str(empty)], err=err) == 2
    assert "give both" in err.getvalue()
    err = io.StringIO()
    assert main(["serve", "--ssl-certfile", str(empty), "--ssl-keyfile", str(empty)],
                err=err) == 2
    assert "not a PEM certificate" in err.getvalue()


def test_the_token_never_shows_in_a_repr() -> None:
    hidden = HiddenToken(TOKEN)
    assert TOKEN not in repr(hidden) and TOKEN not in str(hidden)
    assert TOKEN not in repr(ServiceConfig(token=TOKEN))
    assert TOKEN not in repr(BearerAuth(lambda *a: None, hidden))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- token


def test_routes_need_the_token_and_probes_stay_open() -> None:
    config = ServiceConfig(warmup=False, token=TOKEN)
    with running_server(config) as (url, _):
        http = httpx.Client(base_url=url, timeout=30)
        assert http.get("/healthz").status_code == 200
        assert http.get("/readyz").status_code == 200
        content = body(example())
        headers = {"content-type": "application/json"}
        for auth in (None, "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x",
                     "Bearer", f"Bearer {TOKEN[:-1]}"):
            sent = dict(headers, **({} if auth is None else {"authorization": auth}))
            response = http.post("/v1/plan", content=content, headers=sent)
            assert response.status_code == 401, auth
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert response.json()["error"] == "unauthorized"
            assert TOKEN not in response.text
        for path in ("/metrics", "/v1/clusters/x", "/openapi.json"):
            assert http.get(path).status_code == 401, path
        with PlanClient(url, token="wrong") as wrong:
            with pytest.raises(ServiceError) as info:
                wrong.plan(content, engine="greedy")
            assert info.value.status == 401
        with PlanClient(url, token=TOKEN) as client:
            placement = client.plan(content, engine="greedy", time_limit=5)
            assert check(compile_scenario(example()), placement) == []
            client.put_cluster("c1", content)
            assert client.plan_cluster("c1", engine="greedy", time_limit=5).jobs
            metrics = client.metrics()
        assert 'code="401"' in metrics  # refusals are counted ...
        assert TOKEN not in metrics  # ... and the token is nowhere


# --------------------------------------------------------------------------- TLS


def _self_signed(tmp_path: Path, passphrase: bytes | None = None) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "npu-place test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    certfile, keyfile = tmp_path / "cert.pem", tmp_path / "key.pem"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption() if passphrase is None
        else serialization.BestAvailableEncryption(passphrase)))
    return certfile, keyfile


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_tls_and_token_on_a_real_server_and_no_token_in_its_log(tmp_path: Path) -> None:
    certfile, keyfile = _self_signed(tmp_path)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "solver.cli", "serve", "--port", str(port),
             "--log-level", "debug", "--token-file", str(token_file),
             "--ssl-certfile", str(certfile), "--ssl-keyfile", str(keyfile)],
            stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        with PlanClient(url, token=TOKEN, verify=str(certfile)) as client:
            while True:
                assert proc.poll() is None, log_path.read_text()
                try:
                    if client.readyz():  # open without the token, over HTTPS
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.2)
            placement = client.plan(body(example()), engine="auto", time_limit=3)
            assert check(compile_scenario(example()), placement) == []
            assert TOKEN not in client.metrics()
        with PlanClient(url, verify=str(certfile)) as anonymous:
            with pytest.raises(ServiceError) as info:
                anonymous.plan(body(example()), engine="greedy")
            assert info.value.status == 401
        with pytest.raises(httpx.ConnectError):  # not the service's certificate: refused
            httpx.get(url + "/healthz", timeout=5)
        with pytest.raises(httpx.HTTPError):  # plain HTTP on the TLS port: no answer
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0  # an idle, drained server exits with 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log_path.read_text()
    assert "Uvicorn running on https://" in text or "https" in text, text[-2000:]
    assert TOKEN not in text


# --------------------------------------------------------------------------- setup files
# Every file ``serve`` reads is bounded, and it never prompts


def _limit_memory() -> None:  # pragma: no cover - runs in the child
    """At most 3 GiB of address space: an unbounded read fails fast instead of filling
    the machine."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def _take_terminal() -> None:  # pragma: no cover - runs in the child
    """Make the child's stdin (a pseudo-terminal) its controlling terminal, where OpenSSL
    would prompt for a passphrase."""
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    _limit_memory()


def _serve(args: list[str], terminal: bool = False) -> tuple[int | None, str]:
    """``npu-place serve --port 0 ARGS`` in a child process: its exit code (``None`` when
    it was still running after 90 s and was killed) and its output."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    command = [sys.executable, "-m", "solver.cli", "serve", "--port", "0", *args]
    if not terminal:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=90,
                                  env=env, stdin=subprocess.DEVNULL, check=False,
                                  preexec_fn=_limit_memory)
        except subprocess.TimeoutExpired as exc:
            return None, str(exc.stderr or "")
        return done.returncode, done.stderr
    master, slave = os.openpty()
    proc = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True, preexec_fn=_take_terminal)
    os.close(slave)
    output = b""
    deadline = time.monotonic() + 90
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                with contextlib.suppress(OSError):
                    output += os.read(master, 65536)
        code = proc.poll()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        with contextlib.suppress(OSError):
            while select.select([master], [], [], 0)[0]:
                chunk = os.read(master, 65536)
                if not chunk:
                    break
                output += chunk
        os.close(master)
    return code, output.decode("utf-8", "replace")


@pytest.mark.parametrize("terminal", [False, True])
def test_serve_refuses_an_encrypted_key_and_never_prompts(tmp_path: Path,
                                                          terminal: bool) -> None:
    certfile, keyfile = _self_signed(tmp_path, passphrase=b"correct horse")
    code, output = _serve(["--ssl-certfile", str(certfile), "--ssl-keyfile", str(keyfile)],
                          terminal)
    assert "pass phrase" not in output.lower(), output[-2000:]
    assert code == 2, output[-2000:]
    assert f"--ssl-keyfile {keyfile}: the private key is encrypted with a passphrase" \
        in output


def test_the_tls_check_accepts_a_plain_key(tmp_path: Path) -> None:
    check_tls(*map(str, _self_signed(tmp_path)))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")
@pytest.mark.parametrize(("option", "what", "says"), [
    ("--token-file", "zero", "the file is larger than the limit of 65536 bytes"),
    ("--token-file", "fifo", "the file is empty"),
    ("--ssl-certfile", "fifo", "must be a regular file"),
    ("--ssl-keyfile", "zero", "must be a regular file"),
    ("--ssl-certfile", "big", "the file is 1048577 bytes; the limit is 1048576 bytes"),
])
def test_serve_reads_its_setup_files_within_bounds(tmp_path: Path, option: str, what: str,
                                                   says: str) -> None:
    """``/dev/zero`` is refused one byte past the limit (never read into memory), a named
    pipe without a writer is empty (never waited on), and the TLS files OpenSSL opens
    again must be bounded regular files."""
    certfile, keyfile = _self_signed(tmp_path)
    if what == "zero":
        path = Path("/dev/zero")
    elif what == "fifo":
        path = tmp_path / "pipe"
        os.mkfifo(path)
    else:
        path = tmp_path / "big.pem"
        path.write_bytes(b"#" * (1024 * 1024 + 1))
    files = {"--ssl-certfile": str(certfile), "--ssl-keyfile": str(keyfile)}
    args = [option, str(path)]
    if option.startswith("--ssl"):
        files[option] = str(path)
        args = [arg for pair in files.items() for arg in pair]
    code, output = _serve(args)
    assert code == 2, output[-2000:]
    assert f"{option} {path}: " in output and says in output, output[-2000:]
