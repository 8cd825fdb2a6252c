"""Photo download: the SSRF guard, limits, ArcGIS errors in 200 bodies, token handling."""
from __future__ import annotations

import logging
import re

import pytest
import requests
import responses

from fme_ai_resilience.core.errors import ConfigurationError, DownloadError, ErrorClass, UnsafeURL
from fme_ai_resilience.core.config.settings import DownloadSettings, IntakeSettings, Settings
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


def test_peer_address_check_before_connect():
    """The check run before each socket opens refuses a private address unless allowed."""
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


def test_policy_from_settings_takes_the_configured_services_and_hosts():
    """from_settings allows the configured services' hosts plus configured hosts and limits."""
    settings = Settings(
        intake=IntakeSettings(feature_services=(
            f"https://{HOST}/abc/arcgis/rest/services/inspection/FeatureServer",
            "https://gis.example.org:6443/arcgis/rest/services/water/FeatureServer")),
        download=DownloadSettings(allowed_hosts=("cdn.example.net",), max_photo_bytes=1000,
                                  allow_private_hosts=("gis.example.org",)))
    pol = DownloadPolicy.from_settings(settings, resolver=resolver)
    assert pol.allowed_hosts == (HOST, "gis.example.org:6443", "cdn.example.net")
    assert pol.max_bytes == 1000 and pol.allow_private_hosts == ("gis.example.org",)
    assert pol.ports_for("gis.example.org", "https") == {6443}
    assert not hasattr(DownloadPolicy, "for_service")


def test_nothing_configured_allows_no_photo_host():
    """Settings naming no service and no host allow nothing, whatever a webhook names."""
    pol = DownloadPolicy.from_settings(Settings(), resolver=resolver)
    with pytest.raises(UnsafeURL, match="allow-list"):
        check_url(PHOTO, pol)


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


PHOTOS = "photos.test"
AGREE = {PHOTOS: ["93.184.216.34"], "attacker.example": ["93.184.216.35"]}


def photos_policy(**kwargs):
    values = dict(allowed_hosts=("." + PHOTOS, PHOTOS),
                  resolver=lambda host, port: AGREE.get(host, ["93.184.216.36"]))
    values.update(kwargs)
    return DownloadPolicy(**values)


@pytest.mark.parametrize("url", [
    "https://attacker.example\\x.photos.test/p.jpg",
    "https://attacker.example\\@photos.test/p.jpg",
    "https://photos.test:443\\@attacker.example/p.jpg",
    "https://attacker.example%2f.photos.test/p.jpg",
    "https://attacker.example%5c.photos.test/p.jpg",
    "https://a b.photos.test/p.jpg",
    "https://photos.test\t/p.jpg",
    "https://ph\u200botos.test/p.jpg",
    "https://x_y.photos.test/p.jpg",
    "https://-x.photos.test/p.jpg",
    "https://" + "a" * 64 + ".photos.test/p.jpg",
])
def test_a_host_two_parsers_read_differently_or_outside_the_grammar_is_refused(url):
    """A backslash, a percent sign or any character outside host name grammar is UnsafeURL."""
    with pytest.raises(UnsafeURL):
        check_url(url, photos_policy())


def test_the_backslash_host_is_refused_before_any_request():
    """fetch_photo never sends the token to a host urllib3 reads out of a backslash URL."""
    with responses.RequestsMock() as mock:   # any request at all would fail the test
        with pytest.raises(UnsafeURL, match="backslash"):
            fetch_photo("https://attacker.example\\x.photos.test/p.jpg", TOKEN, photos_policy(),
                        session=requests.Session())
        assert len(mock.calls) == 0


@pytest.mark.parametrize("address, form", [
    ("2002:7f00:1::", "6to4"), ("2002:a9fe:a9fe::", "6to4"), ("2002:0a00:0005::1", "6to4"),
    ("fec0::1", "site-local"), ("64:ff9b::7f00:1", "NAT64"), ("64:ff9b::a9fe:a9fe", "NAT64"),
    ("64:ff9b:1::a00:5", "NAT64"), ("::7f00:1", "IPv4-compatible"),
    ("::ffff:0:7f00:1", "IPv4-translated"), ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo"),
    ("2606:4700::5efe:7f00:1", "ISATAP"), ("2606:4700::200:5efe:a9fe:a9fe", "ISATAP"),
    ("::ffff:127.0.0.1", "IPv4-mapped"), ("100.64.0.1", "not a public"),
])
def test_every_embedded_ipv4_form_is_checked(address, form):
    """6to4, NAT64, Teredo, ISATAP, compatible and translated forms of private IPv4 are refused."""
    pol = photos_policy(resolver=lambda host, port: [address])
    with pytest.raises(UnsafeURL, match=form):
        check_url("https://photos.test/p.jpg", pol)
    with pytest.raises(UnsafeURL):
        check_peer(PHOTOS, address, pol)


@pytest.mark.parametrize("address", ["2002:5db8:d822::1", "64:ff9b::5db8:d822",
                                     "2606:2800:220:1:248:1893:25c8:1946", "93.184.216.34"])
def test_public_addresses_in_embedded_forms_pass(address):
    """A 6to4 or NAT64 address of a public IPv4 address, and plain public ones, are allowed."""
    pol = photos_policy(resolver=lambda host, port: [address])
    assert check_url("https://photos.test/p.jpg", pol) == (PHOTOS, 443)


@pytest.mark.parametrize("url, allowed, ok", [
    ("https://photos.test/p.jpg", (PHOTOS,), True),
    ("https://photos.test:443/p.jpg", (PHOTOS,), True),
    ("https://photos.test:8443/p.jpg", (PHOTOS,), False),
    ("https://photos.test:22/p.jpg", (PHOTOS,), False),
    ("https://photos.test:80/p.jpg", (PHOTOS,), False),
    ("https://photos.test:8443/p.jpg", (PHOTOS + ":8443",), True),
    ("https://photos.test/p.jpg", (PHOTOS + ":8443",), False),
    ("https://photos.test/p.jpg", (PHOTOS + ":8443", PHOTOS), True),
    ("https://cdn.photos.test:6443/p.jpg", (".photos.test:6443",), True),
    ("https://cdn.photos.test:6444/p.jpg", (".photos.test:6443",), False),
])
def test_only_the_default_port_unless_one_is_configured(url, allowed, ok):
    """Port 443 only, unless a host:port entry names another port for the host."""
    pol = photos_policy(allowed_hosts=allowed)
    if ok:
        assert check_url(url, pol)[0].endswith(PHOTOS)
    else:
        with pytest.raises(UnsafeURL, match="port"):
            check_url(url, pol)


def test_plain_http_hosts_get_port_80_only():
    """A host allowed over plain http gets port 80, not any port."""
    pol = photos_policy(allowed_hosts=(PHOTOS,), allow_http_hosts=(PHOTOS,))
    assert check_url("http://photos.test/p.jpg", pol) == (PHOTOS, 80)
    with pytest.raises(UnsafeURL, match="port"):
        check_url("http://photos.test:8080/p.jpg", pol)
    pol = photos_policy(allowed_hosts=(PHOTOS + ":8080",), allow_http_hosts=(PHOTOS,))
    assert check_url("http://photos.test:8080/p.jpg", pol) == (PHOTOS, 8080)


@pytest.mark.parametrize("entry", ["photos.test:0", "photos.test:99999", "photos.test:x",
                                   "photos test", "photos.test/p", "user@photos.test",
                                   "[::1", "https://photos.test"])
def test_allow_list_entries_are_checked(entry):
    """A malformed allow-list entry is a ConfigurationError naming the setting."""
    with pytest.raises(ConfigurationError, match="download.allowed_hosts"):
        DownloadPolicy(allowed_hosts=(entry,))


def test_allow_list_entries_may_be_ipv6_literals_with_ports():
    """[v6]:port and a bare v6 literal are both entries."""
    pol = DownloadPolicy(allowed_hosts=("[2606:2800:220:1::1]:8443", "2606:2800:220:1::2"),
                         resolver=resolver)
    assert check_url("https://[2606:2800:220:1::1]:8443/p.jpg", pol)[1] == 8443
    assert check_url("https://[2606:2800:220:1::2]/p.jpg", pol)[1] == 443
    with pytest.raises(UnsafeURL, match="port"):
        check_url("https://[2606:2800:220:1::1]/p.jpg", pol)
