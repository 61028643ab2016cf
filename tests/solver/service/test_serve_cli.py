"""``npu-place serve`` on an address it cannot listen on: exit 2 naming the options."""

from __future__ import annotations

import io
import socket

from solver.cli import main


def test_a_busy_port_is_a_clear_input_error() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        out, err = io.StringIO(), io.StringIO()
        code = main(["serve", "--host", "127.0.0.1", "--port", str(port)], out, err)
    assert code == 2
    assert err.getvalue().startswith(f"error: --host/--port: cannot listen on 127.0.0.1:{port}: ")
    assert "in use" in err.getvalue()
    assert "Traceback" not in err.getvalue()


def test_an_address_this_machine_does_not_have_is_refused() -> None:
    out, err = io.StringIO(), io.StringIO()
    # TEST-NET-1 (RFC 5737): never an address of this machine; bind fails, nothing is sent
    code = main(["serve", "--host", "192.0.2.1", "--port", "0", "--insecure"], out, err)
    assert code == 2
    assert "error: --host/--port: cannot listen on 192.0.2.1:0" in err.getvalue()
