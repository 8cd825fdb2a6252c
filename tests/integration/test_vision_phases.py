"""Per-phase time limits against real loopback sockets: each phase runs out on its own budget."""
from __future__ import annotations

import email.utils
import json
import select
import socket
import threading
import time
from dataclasses import replace
from urllib.parse import urlsplit

import pytest

from fme_ai_resilience.core.resilience.timeouts import TimeoutBudget
from fme_ai_resilience.core.clock import SystemClock
from fme_ai_resilience.core.errors import DownloadError, ErrorClass, UnsafeURL
from fme_ai_resilience.services.vision import Credentials, DownloadPolicy, VisionClient, fetch_photo
from fme_ai_resilience.services.vision.download import check_peer
from fme_ai_resilience.services.vision.phases import timed_session

from helpers.loopback import read_request, response, serve  # noqa: F401 (fixture)


BUDGET_S = 0.3
BUDGET = TimeoutBudget(connect_s=BUDGET_S, tls_s=BUDGET_S, ttfb_s=BUDGET_S, body_s=BUDGET_S)
LOW, HIGH = 0.8, 1.5   # measured phase within [0.8 x budget, budget + 1.5 s]
#: The budget of a call no phase of which should run out: a busy machine's stall on loopback
#: stays far inside it, so a healthy call is never a timeout.
HEALTHY_S = 5.0
HEALTHY = TimeoutBudget(connect_s=HEALTHY_S, tls_s=HEALTHY_S, ttfb_s=HEALTHY_S,
                        body_s=HEALTHY_S)
API_KEY = "loopback-key-5531abcd"
OK_BODY = json.dumps({"condition": "good", "confidence": 0.9}).encode()


def within(measured, budget_s=BUDGET_S):
    return LOW * budget_s <= measured <= budget_s + HIGH


def client_for(url, timeouts=BUDGET, **kwargs):
    return VisionClient(url + "/analyze", "generic", Credentials(api_key=API_KEY),
                        timeouts=timeouts, **kwargs)


def test_success_measures_every_phase(serve):
    """A normal answer is ok, with connect, ttfb and body phases measured."""
    def handler(conn, stop):
        read_request(conn)
        conn.sendall(response(200, OK_BODY, ["Content-Type: application/json"]))

    out = client_for(serve(handler).url, HEALTHY).analyze(b"img", "t1")
    assert out.ok and out.assessment.condition == "good"
    assert set(out.phases) == {"connect", "ttfb", "body"}
    assert out.phases["connect"] > 0
    assert 0 < out.duration_s < HEALTHY.total_s


def test_headers_late_is_ttfb_timeout_after_about_ttfb(serve):
    """Headers delayed past ttfb_s give TTFB_TIMEOUT after about ttfb_s."""
    def handler(conn, stop):
        read_request(conn)
        stop.wait(BUDGET_S * 4)
        conn.sendall(response(200, OK_BODY))

    out = client_for(serve(handler).url, replace(HEALTHY, ttfb_s=BUDGET_S)).analyze(b"img", "t2")
    assert (out.error_class, out.timed_out_phase) == (ErrorClass.TTFB_TIMEOUT, "ttfb")
    assert within(out.phases["ttfb"]), out.phases


def trickler(content_type, byte=b" ", length=1000, every_s=0.02):
    """A handler sending headers at once, then the body one byte every ``every_s``."""
    def handler(conn, stop):
        read_request(conn)
        conn.sendall(response(200, b"", [f"Content-Type: {content_type}"], length=length))
        for _ in range(length):
            if stop.wait(every_s):
                return
            conn.sendall(byte)
    return handler


def test_trickled_body_is_body_timeout_after_about_body_s(serve):
    """Headers on time, then a body trickling byte by byte past body_s: BODY_TIMEOUT."""
    out = client_for(serve(trickler("application/json")).url,
                     replace(HEALTHY, body_s=BUDGET_S)).analyze(b"img", "t3")
    assert (out.error_class, out.timed_out_phase) == (ErrorClass.BODY_TIMEOUT, "body")
    assert out.status_code == 200
    assert within(out.phases["body"]), out.phases


def _full_backlog_listener():
    """A listener with listen(0) whose accept queue is filled by connections never accepted.

    Returns (listener, fillers, port) once a further connection attempt no longer completes,
    or None if the kernel keeps accepting handshakes.
    """
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(16):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        fillers.append(s)
        _, writable, _ = select.select([], [s], [], 0.2)
        if not writable:
            return listener, fillers, port
    for s in fillers:
        s.close()
    listener.close()
    return None


def test_handshake_never_completing_is_connect_timeout():
    """A full accept queue drops SYNs: CONNECT_TIMEOUT after about connect_s."""
    setup = _full_backlog_listener()
    if setup is None:
        pytest.skip("this kernel completes handshakes beyond a full accept queue")
    listener, fillers, port = setup
    try:
        out = client_for(f"http://127.0.0.1:{port}").analyze(b"img", "t4")
    finally:
        for s in fillers:
            s.close()
        listener.close()
    assert (out.error_class, out.timed_out_phase) == (ErrorClass.CONNECT_TIMEOUT, "connect")
    assert out.status_code is None
    assert within(out.phases["connect"]), out.phases


def test_refused_connection_is_connection_error():
    """Nothing listening: CONNECTION_ERROR, quickly."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    out = client_for(f"http://127.0.0.1:{port}").analyze(b"img", "t5")
    assert out.error_class is ErrorClass.CONNECTION_ERROR and out.timed_out_phase is None


@pytest.mark.parametrize("form", ["seconds", "http-date"])
def test_429_retry_after_seconds_and_http_date(serve, form):
    """429 with Retry-After as delta-seconds or as an HTTP date gives retry_after_s."""
    value = "30" if form == "seconds" else email.utils.formatdate(time.time() + 30,
                                                                  usegmt=True)

    def handler(conn, stop):
        read_request(conn)
        conn.sendall(response(429, b'{"error": {"message": "slow down"}}',
                              [f"Retry-After: {value}", "Content-Type: application/json"]))

    out = client_for(serve(handler).url, HEALTHY).analyze(b"img", "t6")
    assert out.error_class is ErrorClass.RATE_LIMITED and out.status_code == 429
    assert 27 <= out.retry_after_s <= 30


def test_502_html_page_is_server_error(serve):
    """A proxy's HTML 502 page is SERVER_ERROR with a redacted excerpt of the page."""
    page = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"

    def handler(conn, stop):
        read_request(conn)
        conn.sendall(response(502, page, ["Content-Type: text/html"], reason="Bad Gateway"))

    out = client_for(serve(handler).url, HEALTHY).analyze(b"img", "t7")
    assert (out.error_class, out.status_code) == (ErrorClass.SERVER_ERROR, 502)
    assert "502 Bad Gateway" in out.excerpt


def test_a_body_shorter_than_its_content_length_is_a_transport_failure(serve):
    """The connection cut mid-body (fewer bytes than Content-Length) is TRUNCATED, retried
    like a 5xx, never a FORMAT dead letter."""
    def handler(conn, stop):
        read_request(conn)
        conn.sendall(response(200, OK_BODY[:15], ["Content-Type: application/json"],
                              length=len(OK_BODY)))

    out = client_for(serve(handler).url, HEALTHY).analyze(b"img", "t8")
    assert out.error_class is ErrorClass.TRUNCATED
    assert "Content-Length" in out.detail


def test_oversize_body_is_cut_at_the_limit(serve):
    """A 4 MB answer against a 64 KB limit stops reading at the limit: BAD_FORMAT."""
    sent = {}

    def handler(conn, stop):
        read_request(conn)
        conn.sendall(response(200, b"", ["Content-Type: application/json"],
                              length=4 * 1024 * 1024))
        total = 0
        try:
            for _ in range(64):
                conn.sendall(b"x" * 65536)
                total += 65536
        finally:
            sent["bytes"] = total

    server = serve(handler)
    out = client_for(server.url, HEALTHY, max_response_bytes=65536).analyze(b"img", "t9")
    assert out.error_class is ErrorClass.BAD_FORMAT
    assert "larger than 65536 bytes" in out.errors[0]
    assert out.timed_out_phase is None
    server.close()
    assert sent["bytes"] < 4 * 1024 * 1024


def loopback_policy(*urls, phase_s=BUDGET_S):
    """Loopback allowed (plain http, private addresses) on the ports of ``urls`` only, each
    phase limited to ``phase_s``."""
    return DownloadPolicy(allowed_hosts=tuple(f"127.0.0.1:{urlsplit(u).port}" for u in urls),
                          allow_http_hosts=("127.0.0.1",), allow_private_hosts=("127.0.0.1",),
                          max_bytes=4096, connect_s=phase_s, ttfb_s=phase_s, body_s=phase_s)


def test_photo_download_from_explicitly_allowed_loopback(serve):
    """With loopback explicitly allowed the photo is fetched; without it, refused."""
    jpeg = b"\xff\xd8\xff" + b"\x01" * 500

    def handler(conn, stop):
        head = read_request(conn)
        assert b"x-esri-authorization: bearer tok-123456" in head.lower()
        conn.sendall(response(200, jpeg, ["Content-Type: image/jpeg"]))

    url = serve(handler).url + "/0/11/attachments/42"
    assert fetch_photo(url, "tok-123456", loopback_policy(url, phase_s=HEALTHY_S)
                       ).content == jpeg
    listed = DownloadPolicy(allowed_hosts=(f"127.0.0.1:{urlsplit(url).port}",),
                            allow_http_hosts=("127.0.0.1",))
    with pytest.raises(UnsafeURL, match="loopback"):
        fetch_photo(url, "tok-123456", listed)


@pytest.fixture
def connects(monkeypatch):
    """Every socket connect, recorded; any outside the loopback range refused unsent."""
    seen = []
    real = socket.socket.connect

    def connect(sock, address):
        seen.append(tuple(address[:2]))
        if not str(address[0]).startswith("127."):
            raise ConnectionRefusedError(111, "outside loopback: not sent")
        return real(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return seen


def test_a_rebinding_name_never_reaches_an_internal_port(serve, connects):
    """A name approved at a public address connects there, not where a second lookup points."""
    server = serve(lambda conn, stop: conn.sendall(response(200, b"\xff\xd8",
                                                            ["Content-Type: image/jpeg"])))
    lookups = []

    def resolver(host, port):
        lookups.append(host)
        return ["93.184.216.34"]   # public when checked; the system would say 127.0.0.1

    policy = DownloadPolicy(allowed_hosts=(f"localhost:{server.port}",),
                            allow_http_hosts=("localhost",), resolver=resolver,
                            connect_s=BUDGET_S, ttfb_s=BUDGET_S, body_s=BUDGET_S)
    with pytest.raises(DownloadError) as info:
        fetch_photo(f"http://localhost:{server.port}/p", "tok-123456", policy)
    assert info.value.error_class is ErrorClass.CONNECTION_ERROR
    assert connects == [("93.184.216.34", server.port)] and lookups == ["localhost"]


def test_the_connection_uses_the_addresses_the_check_approved(serve):
    """The name is looked up once: the photo comes from the approved address, not a new one."""
    jpeg = b"\xff\xd8\xff" + b"\x03" * 64
    server = serve(lambda conn, stop: (read_request(conn), conn.sendall(
        response(200, jpeg, ["Content-Type: image/jpeg"]))))
    internal = socket.socket()
    internal.bind(("127.0.0.2", server.port))
    internal.listen(4)
    internal.setblocking(False)
    answers = iter([["127.0.0.1"], ["127.0.0.2"], ["127.0.0.2"]])

    def resolver(host, port):
        return next(answers)

    policy = DownloadPolicy(allowed_hosts=(f"photos.test:{server.port}",),
                            allow_http_hosts=("photos.test",),
                            allow_private_hosts=("photos.test",), resolver=resolver,
                            connect_s=HEALTHY_S, ttfb_s=HEALTHY_S, body_s=HEALTHY_S)
    try:
        assert fetch_photo(f"http://photos.test:{server.port}/p.jpg", None,
                           policy).content == jpeg
        with pytest.raises(BlockingIOError):
            internal.accept()   # nothing ever connected to the second answer
    finally:
        internal.close()


def test_an_address_is_checked_before_its_socket_opens(serve, connects):
    """An address the session's check refuses opens no socket: no internal port is touched."""
    server = serve(lambda conn, stop: None)
    strict = DownloadPolicy()   # no host may be private here
    session = timed_session(clock=SystemClock(), resolver=lambda host, port: ["127.0.0.1"],
                            address_check=lambda host, address: check_peer(host, address,
                                                                           strict))
    lenient = DownloadPolicy(allowed_hosts=(f"photos.test:{server.port}",),
                             allow_http_hosts=("photos.test",),
                             allow_private_hosts=("photos.test",),
                             resolver=lambda host, port: ["127.0.0.1"])
    with pytest.raises(UnsafeURL, match="would reach 127.0.0.1, a loopback address"):
        fetch_photo(f"http://photos.test:{server.port}/p.jpg", None, lenient, session=session)
    assert connects == []


def test_photo_trickle_and_oversize(serve):
    """A trickled photo is BODY_TIMEOUT; one over max_bytes without a length is UnsafeURL."""
    def endless(conn, stop):
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nConnection: close\r\n\r\n")
        for _ in range(10):
            conn.sendall(b"\x00" * 1024)

    trickled = serve(trickler("image/jpeg", b"\x00")).url + "/p"
    with pytest.raises(DownloadError) as info:
        fetch_photo(trickled, None, loopback_policy(trickled))
    assert info.value.error_class is ErrorClass.BODY_TIMEOUT
    large = serve(endless).url + "/p"
    with pytest.raises(UnsafeURL, match="larger than 4096"):
        fetch_photo(large, None, loopback_policy(large))


def test_secrets_stay_out_of_outcomes_exceptions_and_logs(serve, caplog):
    """Through real failure paths the API key and token reach no outcome, error or log line.
    The answers that come at once have seconds to come; the slow one runs out at 1 s."""
    import logging
    token = "portal-tok-99Q8w7e6r5"
    caplog.set_level(logging.DEBUG)
    waited = TimeoutBudget(connect_s=HEALTHY_S, tls_s=HEALTHY_S, ttfb_s=1.0, body_s=HEALTHY_S)

    def echo(status, ctype):
        def handler(conn, stop):
            head = read_request(conn).decode("latin-1")
            body = f"{status} for {head}".encode()   # echoes every request header back
            conn.sendall(response(status, body, [f"Content-Type: {ctype}"]))
        return handler

    def slow(conn, stop):
        read_request(conn)
        stop.wait(waited.ttfb_s * 3)

    client = VisionClient(serve(echo(401, "application/json")).url, "generic",
                          Credentials(api_key=API_KEY), timeouts=waited)
    outcomes = [client.analyze(b"img", "r1")]
    for handler in (echo(502, "text/html"), echo(200, "text/plain"), slow):
        client.endpoint = serve(handler).url
        outcomes.append(client.analyze(b"img", "r2"))
    assert [o.error_class for o in outcomes] == [
        ErrorClass.AUTH, ErrorClass.SERVER_ERROR, ErrorClass.BAD_FORMAT, ErrorClass.TTFB_TIMEOUT]
    errors = []
    for handler in (echo(401, "text/plain"), echo(200, "application/json"), slow):
        try:
            url = serve(handler).url + f"/p?token={token}"
            fetch_photo(url, token, loopback_policy(url, phase_s=waited.ttfb_s))
        except (DownloadError, UnsafeURL) as exc:
            errors.append(f"{exc} {exc!r}")
    assert len(errors) == 3
    texts = [repr(o) + o.excerpt for o in outcomes] + errors
    texts += [r.getMessage() for r in caplog.records]
    assert all("Bearer [REDACTED]" in o.excerpt for o in outcomes[:3])   # it was echoed
    for secret in (API_KEY, token):
        assert not [t for t in texts if secret in t]


def silent(conn, stop):
    """A handler that accepts the TCP connection and never says a word (no TLS either)."""
    stop.wait(BUDGET_S * 10)


def test_stalled_tls_handshake_is_connect_timeout(serve):
    """TCP accepted but no TLS ServerHello: CONNECT_TIMEOUT in the connect phase."""
    server = serve(silent)
    out = client_for(f"https://127.0.0.1:{server.port}").analyze(b"img", "t-tls")
    assert (out.error_class, out.timed_out_phase) == (ErrorClass.CONNECT_TIMEOUT, "connect")
    assert within(out.phases["connect"], BUDGET.connect_s + BUDGET.tls_s), out.phases


def test_stalled_tls_handshake_of_a_photo_is_connect_timeout(serve):
    """fetch_photo over https to a server that never speaks TLS: CONNECT_TIMEOUT."""
    server = serve(silent)
    with pytest.raises(DownloadError) as info:
        url = f"https://127.0.0.1:{server.port}/p.jpg"
        fetch_photo(url, None, loopback_policy(url))
    assert info.value.error_class is ErrorClass.CONNECT_TIMEOUT


TRICKLE_BUDGET = TimeoutBudget(connect_s=BUDGET_S, tls_s=BUDGET_S, ttfb_s=0.5, body_s=BUDGET_S)


def header_trickler(body=OK_BODY, content_type="application/json", every_s=0.1):
    """A handler sending its response headers one byte every ``every_s`` seconds."""
    def handler(conn, stop):
        read_request(conn)
        for i, byte in enumerate(response(200, body, [f"Content-Type: {content_type}",
                                                      "X-Pad: " + "a" * 200])):
            if stop.wait(every_s if i else 0):
                return
            conn.sendall(bytes([byte]))
    return handler


def test_trickled_headers_are_ttfb_timeout_within_the_budget(serve):
    """Headers trickled a byte every 0.1 s cannot stretch a 0.5 s TTFB budget: TTFB_TIMEOUT."""
    client = VisionClient(serve(header_trickler()).url + "/analyze", "generic",
                          Credentials(api_key=API_KEY), timeouts=TRICKLE_BUDGET)
    out = client.analyze(b"img", "t-trickle")
    assert (out.error_class, out.timed_out_phase) == (ErrorClass.TTFB_TIMEOUT, "ttfb")
    assert out.duration_s <= TRICKLE_BUDGET.connect_s + TRICKLE_BUDGET.ttfb_s + HIGH


def test_trickled_photo_headers_are_ttfb_timeout_within_the_budget(serve):
    """fetch_photo's headers trickled past its connect + TTFB budget: TTFB_TIMEOUT."""
    url = serve(header_trickler(b"\xff\xd8", "image/jpeg")).url + "/p.jpg"
    start = time.monotonic()
    with pytest.raises(DownloadError) as info:
        fetch_photo(url, None, loopback_policy(url))
    assert info.value.error_class is ErrorClass.TTFB_TIMEOUT
    policy = loopback_policy(url)
    assert time.monotonic() - start <= policy.connect_s + policy.ttfb_s + HIGH


def test_header_watchdog_never_fires_on_a_reused_connection(serve):
    """After a call, its watchdog is off: the pooled connection serves a later call intact."""
    connections = []

    def keep_alive(conn, stop):
        connections.append(conn)
        for _ in range(2):
            if not read_request(conn):
                return
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(OK_BODY) + OK_BODY)

    client = client_for(serve(keep_alive).url)
    assert client.analyze(b"img", "t-a").ok
    time.sleep(BUDGET.connect_s + BUDGET.ttfb_s + 0.3)   # past the first call's deadline
    second = client.analyze(b"img", "t-b")
    assert second.ok, second
    assert len(connections) == 1


def slow_resolver(release, table=None):
    """A resolver that answers from ``table`` but only once ``release`` is set (a stuck DNS)."""
    def resolve(host, port):
        release.wait(10)
        return (table or {}).get(host, [])
    return resolve


def test_slow_name_lookup_is_connect_timeout_in_the_connect_phase(serve):
    """A lookup slower than the connect budget is CONNECT_TIMEOUT, counted as connect time."""
    server = serve(lambda conn, stop: conn.sendall(response(200, OK_BODY)))
    release = threading.Event()
    session = timed_session(clock=SystemClock(), resolver=slow_resolver(release))
    client = VisionClient(f"http://slow-dns.test:{server.port}/analyze", "generic",
                          Credentials(api_key=API_KEY), timeouts=BUDGET, session=session)
    try:
        out = client.analyze(b"img", "t-dns")
    finally:
        release.set()
    assert (out.error_class, out.timed_out_phase) == (ErrorClass.CONNECT_TIMEOUT, "connect")
    assert within(out.phases["connect"]), out.phases


def test_connection_goes_to_the_looked_up_address_under_its_name(serve):
    """The socket goes to the resolver's address; the Host header keeps the name."""
    heads = []

    def handler(conn, stop):
        heads.append(read_request(conn))
        conn.sendall(response(200, OK_BODY, ["Content-Type: application/json"]))

    server = serve(handler)
    release = threading.Event()
    release.set()
    resolver = slow_resolver(release, {"vision.test": ["127.0.0.1"]})
    client = VisionClient(f"http://vision.test:{server.port}/analyze", "generic",
                          Credentials(api_key=API_KEY), HEALTHY,
                          session=timed_session(clock=SystemClock(), resolver=resolver))
    out = client.analyze(b"img", "t-dns-ok")
    assert out.ok, out
    assert f"host: vision.test:{server.port}".encode() in heads[0].lower()


UPLOAD = b"\xff\xd8" + b"\x07" * (6 * 1024 * 1024)   # a 6 MB photo
UPLOAD_BUDGET = TimeoutBudget(connect_s=BUDGET_S, tls_s=BUDGET_S, ttfb_s=8.0, body_s=BUDGET_S)


def slow_reader(bytes_per_s, answer=True):
    """A handler reading the request body at ``bytes_per_s`` (or never, with rate 0)."""
    def handler(conn, stop):
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(65536)
            if not chunk:
                return
            head += chunk
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        got = len(head.partition(b"\r\n\r\n")[2])
        while got < length:
            if stop.wait(65536 / bytes_per_s if bytes_per_s else 30):
                return
            chunk = conn.recv(65536)
            if not chunk:
                return
            got += len(chunk)
        if answer:
            conn.sendall(response(200, OK_BODY, ["Content-Type: application/json"]))
    return handler


def small_window(server):
    """Keep the kernel from buffering the upload for the server (a 64 KB receive window)."""
    server.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    return server


def test_a_slow_image_upload_counts_against_ttfb_not_connect(serve):
    """A 6 MB upload at 2 MB/s outlasts connect_s but not ttfb_s: the call succeeds."""
    server = small_window(serve(slow_reader(2 * 1024 * 1024)))
    client = VisionClient(server.url + "/analyze", "generic", Credentials(api_key=API_KEY),
                          timeouts=UPLOAD_BUDGET)
    out = client.analyze(UPLOAD, "t-upload")
    assert out.ok, out
    assert out.phases["ttfb"] > out.phases["connect"]


def test_a_stalled_image_upload_is_ttfb_timeout(serve):
    """A server that stops reading the upload leaves the call TTFB_TIMEOUT, not a connect error."""
    server = small_window(serve(slow_reader(0)))
    budget = TimeoutBudget(connect_s=BUDGET_S, tls_s=BUDGET_S, ttfb_s=1.0, body_s=BUDGET_S)
    client = VisionClient(server.url + "/analyze", "generic", Credentials(api_key=API_KEY),
                          timeouts=budget)
    out = client.analyze(UPLOAD, "t-stall")
    assert (out.error_class, out.timed_out_phase) == (ErrorClass.TTFB_TIMEOUT, "ttfb"), out
