"""Photo download: the SSRF guard, limits, ArcGIS errors in 200 bodies, token handling."""
from __future__ import annotations

import logging
import re

import pytest
import requests
import responses

from fme_ai_resilience.errors import DownloadError, ErrorClass, UnsafeURL
from fme_ai_resilience.settings import DownloadSettings
from fme_ai_resilience.services.vision.download import (DownloadPolicy, check_peer, check_url,
                                                        fetch_photo)

HOST = "services.example.com"
PHOTO = f"https://{HOST}/arcgis/rest/services/inspection/FeatureServer/0/11/attachments/42"
TOKEN = "Zq8-portal-token-7781xx"
PUBLIC = {HOST: ["93.184.216.34"], "cdn.example.net": ["151.101.1.1"],
          "evil.example.org": ["10.0.0.5"], "rebind.example.com": ["93.184.216.34", "::1"],
          "localhost": ["127.0.0.1", "::1"]}
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 100


def resolver(host, port):
    """A fake DNS: the table above, nothing else resolves."""
    if host not in PUBLIC:
        raise OSError(f"unknown host {host}")
    return PUBLIC[host]


def policy(**kwargs):
    values = dict(allowed_hosts=(HOST,), resolver=resolver)
    values.update(kwargs)
    return DownloadPolicy(**values)


LISTED = policy(allowed_hosts=(HOST, "127.0.0.1", "localhost", "169.254.169.254", "::1",
                               "::ffff:127.0.0.1", "2130706433", "0x7f.1", "evil.example.org",
                               "rebind.example.com"),
                allow_http_hosts=("127.0.0.1", "localhost", "169.254.169.254", "::1",
                                  "::ffff:127.0.0.1", "2130706433", "0x7f.1"))

SSRF = [
    "http://127.0.0.1/",
    "http://localhost/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://2130706433/",
    "http://0x7f.1/",
    "file:///etc/passwd",
    "ftp://services.example.com/photo.jpg",
    "https://elsewhere.example.org/photo.jpg",
    "https://evil.example.org/photo.jpg",
    f"http://{HOST}/photo.jpg",
    f"https://user:pw@{HOST}/photo.jpg",
]


@pytest.mark.parametrize("url", SSRF)
def test_ssrf_table_is_refused_by_default(url):
    """Each dangerous URL is refused with UnsafeURL under the survey's policy."""
    with pytest.raises(UnsafeURL):
        check_url(url, policy())


@pytest.mark.parametrize("url, reason", [
    ("http://127.0.0.1/", "loopback"), ("http://localhost/", "loopback"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"), ("http://[::1]/", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "IPv4-mapped"), ("http://2130706433/", "non-canonical"),
    ("http://0x7f.1/", "non-canonical"), ("https://evil.example.org/p.jpg", "10.0.0.5"),
    ("https://rebind.example.com/p.jpg", "::1, a loopback")])
def test_ssrf_addresses_refused_even_when_host_is_listed(url, reason):
    """Listing a host is not enough: private, loopback, mapped or odd numeric addresses fail."""
    with pytest.raises(UnsafeURL, match=re.escape(reason)):
        check_url(url, LISTED)


def test_localhost_refused_via_its_resolved_address():
    """'localhost' is refused for resolving to loopback, not only for being unlisted."""
    pol = policy(allowed_hosts=("localhost",), allow_http_hosts=("localhost",))
    with pytest.raises(UnsafeURL, match="loopback"):
        check_url("http://localhost/", pol)


def test_dns_name_resolving_to_private_address_is_refused():
    """A listed DNS name resolving to 10.0.0.5 (injected resolver) is refused."""
    with pytest.raises(UnsafeURL, match="10.0.0.5"):
        check_url("https://evil.example.org/p.jpg", LISTED)


def test_private_address_allowed_when_host_explicitly_allowed():
    """allow_private_hosts admits an on-premises host on a private address."""
    pol = policy(allowed_hosts=("evil.example.org",), allow_private_hosts=("evil.example.org",))
    assert check_url("https://evil.example.org/p.jpg", pol) == ("evil.example.org", 443)


def test_peer_address_check_after_connect():
    """The post-connect check refuses a private peer unless the host may be private."""
    check_peer(HOST, "93.184.216.34", policy())
    with pytest.raises(UnsafeURL, match="10.0.0.5"):
        check_peer(HOST, "10.0.0.5", policy())
    check_peer(HOST, "10.0.0.5", policy(allow_private_hosts=(HOST,)))
    with pytest.raises(UnsafeURL, match="peer"):
        check_peer(HOST, "", policy())


def test_public_allowed_host_passes_and_subdomain_entries_work():
    """The survey host passes; '.example.net' admits cdn.example.net."""
    assert check_url(PHOTO, policy()) == (HOST, 443)
    assert check_url("https://cdn.example.net/x.jpg",
                     policy(allowed_hosts=(".example.net",)))[0] == "cdn.example.net"


def test_policy_for_service_takes_host_of_service_url():
    """for_service allows the serviceUrl host plus configured hosts and settings' limits."""
    pol = DownloadPolicy.for_service(
        f"https://{HOST}/abc/arcgis/rest/services/inspection/FeatureServer",
        DownloadSettings(allowed_hosts=("cdn.example.net",), max_photo_bytes=1000))
    assert pol.allowed_hosts == (HOST, "cdn.example.net") and pol.max_bytes == 1000


@responses.activate
def test_fetch_sends_token_only_in_esri_header():
    """The token travels as X-Esri-Authorization: Bearer, never in the URL."""
    responses.add(responses.GET, PHOTO, body=JPEG, content_type="image/jpeg")
    photo = fetch_photo(PHOTO, TOKEN, policy(), session=requests.Session())
    assert photo.content == JPEG and photo.content_type == "image/jpeg"
    sent = responses.calls[0].request
    assert sent.headers["X-Esri-Authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in sent.url and "token" not in sent.url
    assert TOKEN not in repr(photo)


@responses.activate
def test_token_query_parameter_is_moved_out_of_the_url():
    """A photo URL carrying token=... is requested without it; the token goes in the header."""
    responses.add(responses.GET, PHOTO, body=JPEG, content_type="image/jpeg")
    fetch_photo(f"{PHOTO}?token={TOKEN}&f=image", TOKEN, policy(), session=requests.Session())
    sent = responses.calls[0].request
    assert TOKEN not in sent.url and sent.url.endswith("?f=image")
    assert sent.headers["X-Esri-Authorization"] == f"Bearer {TOKEN}"


@responses.activate
def test_redirect_to_private_address_is_refused():
    """A redirect from the allowed host to 169.254.169.254 is refused before it is followed."""
    responses.add(responses.GET, PHOTO, status=302,
                  headers={"Location": "http://169.254.169.254/latest/meta-data/"})
    with pytest.raises(UnsafeURL, match="169.254.169.254"):
        fetch_photo(PHOTO, TOKEN, LISTED, session=requests.Session())
    assert len(responses.calls) == 1


@responses.activate
def test_redirect_to_allowed_host_is_followed_without_token():
    """A redirect to another allowed public host is followed; the token is not forwarded."""
    cdn = "https://cdn.example.net/blob/42.jpg"
    responses.add(responses.GET, PHOTO, status=302, headers={"Location": cdn})
    responses.add(responses.GET, cdn, body=JPEG, content_type="image/jpeg")
    pol = policy(allowed_hosts=(HOST, "cdn.example.net"))
    assert fetch_photo(PHOTO, TOKEN, pol, session=requests.Session()).content == JPEG
    assert "X-Esri-Authorization" not in responses.calls[1].request.headers


@responses.activate
def test_too_many_redirects_are_refused():
    """More than max_redirects hops raise UnsafeURL."""
    responses.add(responses.GET, PHOTO, status=302, headers={"Location": PHOTO})
    with pytest.raises(UnsafeURL, match="redirects"):
        fetch_photo(PHOTO, None, policy(max_redirects=3), session=requests.Session())
    assert len(responses.calls) == 4


@pytest.mark.parametrize("code", [498, 499])
@responses.activate
def test_arcgis_token_error_in_http_200_is_auth(code):
    """ArcGIS's HTTP-200 {"error": {"code": 498}} is an AUTH failure."""
    responses.add(responses.GET, PHOTO, json={"error": {"code": code,
                                                        "message": "Invalid token.",
                                                        "details": []}})
    with pytest.raises(DownloadError) as info:
        fetch_photo(PHOTO, TOKEN, policy(), session=requests.Session())
    assert info.value.error_class is ErrorClass.AUTH and info.value.status_code == 200


@pytest.mark.parametrize("status, cls", [(404, ErrorClass.NOT_FOUND), (403, ErrorClass.AUTH),
                                         (503, ErrorClass.SERVER_ERROR),
                                         (429, ErrorClass.RATE_LIMITED)])
@responses.activate
def test_http_errors_carry_their_class(status, cls):
    """HTTP errors raise DownloadError with the class the retry engine needs."""
    responses.add(responses.GET, PHOTO, status=status, headers={"Retry-After": "12"})
    with pytest.raises(DownloadError) as info:
        fetch_photo(PHOTO, TOKEN, policy(), session=requests.Session())
    assert info.value.error_class is cls and info.value.status_code == status
    if cls in (ErrorClass.SERVER_ERROR, ErrorClass.RATE_LIMITED):
        assert info.value.retry_after_s == 12.0


@responses.activate
def test_non_image_content_type_is_refused():
    """An HTML page where a photo was expected raises UnsafeURL."""
    responses.add(responses.GET, PHOTO, body="<html>login</html>", content_type="text/html")
    with pytest.raises(UnsafeURL, match="image"):
        fetch_photo(PHOTO, TOKEN, policy(), session=requests.Session())


@responses.activate
def test_size_limit_enforced_while_streaming_and_by_length():
    """Bodies over max_bytes are refused, whether announced or only discovered."""
    responses.add(responses.GET, PHOTO, body=JPEG * 20, content_type="image/jpeg",
                  auto_calculate_content_length=True)
    responses.add(responses.GET, PHOTO, body=JPEG * 20, content_type="image/jpeg")
    with pytest.raises(UnsafeURL, match="limit 500"):
        fetch_photo(PHOTO, None, policy(max_bytes=500), session=requests.Session())
    with pytest.raises(UnsafeURL, match="larger than 500"):
        fetch_photo(PHOTO, None, policy(max_bytes=500), session=requests.Session())


@responses.activate
def test_connection_failures_are_classified():
    """Connect and read timeouts and refusals raise DownloadError with their class."""
    for exc, cls in ((requests.exceptions.ConnectTimeout(), ErrorClass.CONNECT_TIMEOUT),
                     (requests.exceptions.ReadTimeout(), ErrorClass.TTFB_TIMEOUT),
                     (requests.exceptions.ConnectionError(), ErrorClass.CONNECTION_ERROR)):
        responses.add(responses.GET, PHOTO, body=exc)
        with pytest.raises(DownloadError) as info:
            fetch_photo(PHOTO, TOKEN, policy(), session=requests.Session())
        assert info.value.error_class is cls


def test_unresolvable_host_is_a_connection_error():
    """A listed host that does not resolve is CONNECTION_ERROR (retryable), not unsafe."""
    with pytest.raises(DownloadError) as info:
        check_url("https://nowhere.example.com/p.jpg",
                  policy(allowed_hosts=("nowhere.example.com",)))
    assert info.value.error_class is ErrorClass.CONNECTION_ERROR


@responses.activate
def test_token_in_no_exception_or_log(caplog):
    """Through every failure path the token is in no exception message and no log line."""
    caplog.set_level(logging.DEBUG)
    leaky = f"{PHOTO}?token={TOKEN}"
    responses.add(responses.GET, PHOTO, json={"error": {"code": 498,
                                                        "message": f"Invalid token {TOKEN}"}})
    responses.add(responses.GET, PHOTO, status=404)
    responses.add(responses.GET, PHOTO, body=JPEG, content_type="image/jpeg")
    messages = []
    for url in (PHOTO, leaky, f"http://{HOST}/x?token={TOKEN}"):
        try:
            fetch_photo(url, TOKEN, policy(), session=requests.Session())
        except (DownloadError, UnsafeURL) as exc:
            messages.append(str(exc) + repr(exc))
    photo = fetch_photo(PHOTO, TOKEN, policy(), session=requests.Session())
    assert len(messages) == 3
    texts = messages + [r.getMessage() for r in caplog.records] + [repr(photo)]
    assert not [t for t in texts if TOKEN in t]


@responses.activate
@pytest.mark.parametrize("name", ["token", "Token", "access_token"])
def test_portal_token_parameters_are_stripped_and_others_kept(name):
    """Only portal-token parameters leave the requested URL; a signature stays byte for byte."""
    responses.add(responses.GET, PHOTO, body=JPEG, content_type="image/jpeg")
    fetch_photo(f"{PHOTO}?{name}={TOKEN}&sig=a%2Bb%3D", TOKEN, policy(),
                session=requests.Session())
    assert responses.calls[0].request.url == f"{PHOTO}?sig=a%2Bb%3D"


@responses.activate
def test_token_not_sent_over_http_after_https():
    """A redirect from https to plain http on the same host carries no token."""
    plain = f"http://{HOST}/photo.jpg"
    responses.add(responses.GET, PHOTO, status=302, headers={"Location": plain})
    responses.add(responses.GET, plain, body=JPEG, content_type="image/jpeg")
    pol = policy(allow_http_hosts=(HOST,))
    assert fetch_photo(PHOTO, TOKEN, pol, session=requests.Session()).content == JPEG
    assert responses.calls[0].request.headers["X-Esri-Authorization"] == f"Bearer {TOKEN}"
    assert "X-Esri-Authorization" not in responses.calls[1].request.headers


@pytest.mark.parametrize("url, host", [(f"https://{HOST}./photo.jpg", HOST),
                                       ("https://cdn.example.net./x.jpg", "cdn.example.net")])
def test_trailing_dot_in_host_is_the_same_host(url, host):
    """A host written with a trailing dot is the same host for the allow-list."""
    pol = policy(allowed_hosts=(HOST + ".", ".example.net"))
    assert check_url(url, pol) == (host, 443)
    with pytest.raises(UnsafeURL, match="allow-list"):
        check_url("https://elsewhere.example.org./p.jpg", pol)


def test_refusal_messages_do_not_show_the_token():
    """A refused URL carrying the portal token in its path is shown with the token redacted."""
    with pytest.raises(UnsafeURL) as info:
        fetch_photo(f"http://{HOST}/{TOKEN}/p.jpg", TOKEN, policy(), session=requests.Session())
    assert TOKEN not in str(info.value) and "plain http" in str(info.value)


@pytest.mark.parametrize("body", ["[" * 100_000 + "]" * 100_000,
                                  '{"error": {"code": 1' + "0" * 400 + "}}",
                                  '{"error": ' + '{"details": ' * 5000 + "1" + "}" * 5001])
@responses.activate
def test_a_photo_host_answering_hostile_json_is_bad_format(body):
    """Deep JSON or a number no float holds from the photo host is DownloadError BAD_FORMAT."""
    responses.add(responses.GET, PHOTO, body=body, content_type="application/json")
    with pytest.raises(DownloadError) as info:
        fetch_photo(PHOTO, TOKEN, policy(), session=requests.Session())
    assert info.value.error_class is ErrorClass.BAD_FORMAT
