"""Photo download against real loopback servers: signed URLs, token origin, header deadlines."""
from __future__ import annotations

import threading
import time

import pytest

from fme_ai_resilience.core.errors import DownloadError, ErrorClass
from fme_ai_resilience.services.vision import DownloadPolicy, fetch_photo

from helpers.loopback import read_request, response, serve  # noqa: F401 (fixture)


JPEG = b"\xff\xd8\xff" + b"\x02" * 64


def policy_for(*servers):
    """Loopback allowed over plain http, on the ports of ``servers`` only (port 80 otherwise)."""
    return DownloadPolicy(allowed_hosts=tuple(f"127.0.0.1:{s.port}" for s in servers),
                          allow_http_hosts=("127.0.0.1",), allow_private_hosts=("127.0.0.1",),
                          connect_s=5.0, ttfb_s=5.0, body_s=5.0)
SIGNED = ["/blob/p.jpg?sv=2024-01-01&se=2026-12-01&sp=r&sig=SAS%2Bsig%3D",
          "/b/p.jpg?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F1%2Fus&"
          "X-Amz-Signature=abc123",
          "/o/p.jpg?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature=0f0f",
          "/p.jpg?key=apikey-123456"]


def storage(seen):
    """A storage server answering 200 only to the exact signed request line, else 403."""
    def handler(conn, stop):
        line = read_request(conn).split(b"\r\n")[0].decode()
        seen.append(line)
        if any(f"GET {path} " in line for path in SIGNED):
            conn.sendall(response(200, JPEG, ["Content-Type: image/jpeg"]))
        else:
            conn.sendall(response(403))
    return handler


@pytest.mark.parametrize("path", SIGNED)
def test_signed_photo_url_is_requested_with_its_signature(serve, path):
    """SAS, S3, GCS and key= signatures reach the storage byte for byte; shown URLs redact them."""
    seen = []
    server = serve(storage(seen))
    photo = fetch_photo(server.url + path + "&token=portal-tok-9981", "portal-tok-9981",
                        policy_for(server))
    assert photo.content == JPEG
    assert seen == [f"GET {path} HTTP/1.1"]
    secret = path.rpartition("=")[2]
    assert secret not in photo.url and "[REDACTED]" in photo.url


def test_signed_url_behind_a_redirect_keeps_its_signature(serve):
    """A redirect to a pre-signed URL is followed with the signature intact."""
    seen = []
    store = serve(storage(seen))

    def portal(conn, stop):
        read_request(conn)
        conn.sendall(response(302, headers=[f"Location: {store.url}{SIGNED[1]}"]))

    first = serve(portal)
    assert fetch_photo(first.url + "/a.jpg", None, policy_for(first, store)).content == JPEG
    assert seen == [f"GET {SIGNED[1]} HTTP/1.1"]


def test_refused_signed_url_keeps_the_signature_out_of_the_error(serve):
    """A 403 from the storage names the URL with its signature redacted."""
    server = serve(storage([]))
    with pytest.raises(DownloadError) as info:
        fetch_photo(server.url + "/blob/x.jpg?sig=NotTheRightSig99", None, policy_for(server))
    assert info.value.error_class is ErrorClass.AUTH
    assert "NotTheRightSig99" not in str(info.value)


def test_token_not_sent_to_another_port_of_the_same_host(serve):
    """After a redirect to another port of the first host (another origin) no token is sent."""
    heads = []

    def other(conn, stop):
        heads.append(read_request(conn).lower())
        conn.sendall(response(200, JPEG, ["Content-Type: image/jpeg"]))

    second = serve(other)

    def first(conn, stop):
        heads.append(read_request(conn).lower())
        conn.sendall(response(302, headers=[f"Location: {second.url}/x.jpg"]))

    origin = serve(first)
    assert fetch_photo(origin.url + "/a.jpg", "portal-tok-9981",
                       policy_for(origin, second)).content == JPEG
    assert b"x-esri-authorization: bearer portal-tok-9981" in heads[0]
    assert len(heads) == 2 and b"portal-tok-9981" not in heads[1]
    assert b"authorization" not in heads[1]


def test_token_sent_again_after_a_redirect_within_the_origin(serve):
    """A redirect to another path on the same scheme, host and port keeps the token."""
    heads = []

    def handler(conn, stop):
        head = read_request(conn)
        heads.append(head.lower())
        if head.startswith(b"GET /a.jpg"):
            conn.sendall(response(302, headers=["Location: /b.jpg"]))
        else:
            conn.sendall(response(200, JPEG, ["Content-Type: image/jpeg"]))

    server = serve(handler)
    assert fetch_photo(server.url + "/a.jpg", "portal-tok-9981",
                       policy_for(server)).content == JPEG
    assert all(b"x-esri-authorization: bearer portal-tok-9981" in h for h in heads)
    assert len(heads) == 2


def test_slow_name_lookup_of_a_photo_host_is_connect_timeout():
    """A photo host whose lookup outlasts connect_s is CONNECT_TIMEOUT, not an endless wait."""
    release = threading.Event()

    def stuck(host, port):
        release.wait(10)
        return ["127.0.0.1"]

    policy = DownloadPolicy(allowed_hosts=("photos.test:9",), allow_http_hosts=("photos.test",),
                            allow_private_hosts=("photos.test",), resolver=stuck,
                            connect_s=0.3, ttfb_s=0.3, body_s=0.3)
    start = time.monotonic()
    try:
        with pytest.raises(DownloadError) as info:
            fetch_photo("http://photos.test:9/p.jpg", None, policy)
    finally:
        release.set()
    assert info.value.error_class is ErrorClass.CONNECT_TIMEOUT
    assert time.monotonic() - start <= policy.connect_s + 1.5     # long before the lookup
