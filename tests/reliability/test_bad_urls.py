"""A ledger URL or a database server cannot make a command crash or flood the terminal: a port
or connect timeout in the URL that is no whole number is one line naming it (exit 2, as any
malformed ``--db``) with either driver, and a server's error message, however long, is cut to
a bounded line."""
from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from fme_ai_resilience.cli import main
MAX_DETAIL = 2000   # the longest driver message a command prints

BAD_OPTIONS = ("connect_timeout=inf", "connect_timeout=abc", "connect_timeout=-1",
               "port=abc", "port=99999", "port=%D9%A3")


@pytest.mark.parametrize("scheme", ["postgresql+pg8000", "postgresql+psycopg2"])
@pytest.mark.parametrize("option", BAD_OPTIONS)
def test_a_bad_port_or_connect_timeout_in_the_url_is_one_line_and_exit_2(scheme, option,
                                                                          capsys):
    """Guarantee: ``?connect_timeout=inf``, ``?port=abc`` and their like are refused before
    any connection, by either driver: exit 2 and one line naming the option, no traceback."""
    pytest.importorskip(scheme.split("+")[1])
    name = option.split("=")[0]
    started = time.monotonic()
    code = main(["status", "--db", f"{scheme}://u@127.0.0.1:5432/db?{option}"])
    err = capsys.readouterr().err
    assert (code, err.count("\n")) == (2, 1), err
    assert f"{name}=" in err and "Traceback" not in err
    assert time.monotonic() - started < 30


class HostilePostgres:
    """A loopback 'PostgreSQL server' that answers any startup with an ErrorResponse whose
    message is ``size`` bytes long (refusing TLS and GSS encryption first)."""

    def __init__(self, size):
        self.message = b"x" * (size - 9) + b"THE-END-1"
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.served = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                try:
                    while True:
                        size, code = struct.unpack("!ii", conn.recv(8, socket.MSG_WAITALL))
                        conn.recv(size - 8, socket.MSG_WAITALL)
                        if code in (80877103, 80877104):   # SSLRequest, GSSENCRequest
                            conn.sendall(b"N")
                            continue
                        break
                    self.served += 1
                    fields = b"SFATAL\0VFATAL\0C28000\0M" + self.message + b"\0\0"
                    conn.sendall(b"E" + struct.pack("!i", len(fields) + 4) + fields)
                except (OSError, struct.error):
                    pass

    def close(self):
        self.sock.close()


@pytest.mark.parametrize("scheme", ["postgresql+pg8000", "postgresql+psycopg2"])
def test_a_hostile_servers_50_mb_error_message_is_cut(scheme, capsys):
    """Guarantee: a database server answering with a 50 MB error message leaves one error line
    of at most a few thousand characters and no control characters (exit 1), with either
    driver, in bounded time."""
    pytest.importorskip(scheme.split("+")[1])
    server = HostilePostgres(50 * 1024 * 1024)
    try:
        started = time.monotonic()
        code = main(["status", "--db", f"{scheme}://u@127.0.0.1:{server.port}/db"
                                       f"?sslmode=disable&connect_timeout=20"])
        out = capsys.readouterr()
    finally:
        server.close()
    assert server.served >= 1, "the driver never reached the server"
    assert code == 1 and "Traceback" not in out.err, out.err[:300]
    assert len(out.out) + len(out.err) < MAX_DETAIL + 500, len(out.err)
    assert "THE-END-1" not in out.err
    assert not any(c < " " for c in out.err.rstrip("\n")), "a control character reached stderr"
    if scheme.endswith("pg8000"):   # libpq refuses so long a message itself
        assert "xxxxxxxx" in out.err
    assert time.monotonic() - started < 90
