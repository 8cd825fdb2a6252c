"""ArcGIS token providers: refresh before expiry, one refresh at a time, classified failures,
secrets nowhere but the POST body, and the choice made from the arcgis settings."""
from __future__ import annotations

import logging
import sys
import threading
import time
import types
from urllib.parse import parse_qs

import pytest
import requests
import responses

from fme_ai_resilience.core.errors import ConfigurationError, ErrorClass, TokenError
from fme_ai_resilience.core.config.pipeline_settings import ArcGISSettings
from fme_ai_resilience.services.arcgis.credentials import (FmeWebConnectionToken, OAuthAppToken,
                                                           StaticToken, TokenProvider, UserToken,
                                                           portal_rest_url,
                                                           token_provider_from_settings)
from fme_ai_resilience.core.config.settings import Settings

PORTAL = "https://portal.example.com/portal"
OAUTH_URL = f"{PORTAL}/sharing/rest/oauth2/token"
GENERATE_URL = f"{PORTAL}/sharing/rest/generateToken"
CLIENT_SECRET = "app-secret-7c1f9e2d"
PASSWORD = "pw-horse-battery-3141"


def form(call) -> dict:
    """The POSTed form of a recorded request, one value per field."""
    body = call.request.body
    text = body.decode() if isinstance(body, bytes) else body
    return {k: v[0] for k, v in parse_qs(text).items()}


def oauth(clock, **kw) -> OAuthAppToken:
    return OAuthAppToken(PORTAL, "app-id-1", CLIENT_SECRET, **kw)


def user(**kw) -> UserToken:
    return UserToken(PORTAL, "surveyor", PASSWORD, **kw)


def test_static_token_is_handed_out_as_given_and_hidden_in_its_repr():
    """StaticToken returns its token, lists it as a secret and never shows it."""
    provider = StaticToken("static-token-abcdef")
    assert provider.token(now=0.0) == "static-token-abcdef"
    assert provider.secrets == ("static-token-abcdef",)
    provider.invalidate()
    assert provider.token(now=1.0) == "static-token-abcdef"
    assert "static-token" not in repr(provider)
    assert isinstance(provider, TokenProvider)


def test_an_empty_static_token_is_a_configuration_error():
    """A blank token is refused when the provider is made."""
    with pytest.raises(ConfigurationError):
        StaticToken("  ")


@pytest.mark.parametrize("given", [PORTAL, PORTAL + "/", PORTAL + "/sharing/rest",
                                   PORTAL + "/sharing/rest/", PORTAL + "/sharing"])
def test_portal_url_is_accepted_with_or_without_the_rest_suffix(given):
    """The token endpoints are found whether or not the portal URL ends in /sharing/rest."""
    assert portal_rest_url(given) == f"{PORTAL}/sharing/rest"


@responses.activate
def test_oauth_posts_client_credentials_and_reuses_the_token_until_the_margin(clock):
    """One client-credentials POST; the token is reused until refresh_margin_s before expiry."""
    responses.post(OAUTH_URL, json={"access_token": "app-token-1", "expires_in": 7200})
    responses.post(OAUTH_URL, json={"access_token": "app-token-2", "expires_in": 7200})
    provider = oauth(clock, refresh_margin_s=120, expiration_min=120)
    assert provider.token(now=clock.now()) == "app-token-1"
    sent = form(responses.calls[0])
    assert sent == {"client_id": "app-id-1", "client_secret": CLIENT_SECRET,
                    "grant_type": "client_credentials", "expiration": "120", "f": "json"}
    assert responses.calls[0].request.method == "POST"
    clock.advance(7200 - 121)
    assert provider.token(now=clock.now()) == "app-token-1"
    assert len(responses.calls) == 1
    clock.advance(1)
    assert provider.token(now=clock.now()) == "app-token-2"
    assert len(responses.calls) == 2
    assert provider.expires_at == clock.now() + 7200


@responses.activate
def test_generate_token_posts_the_user_and_referer_and_renews_before_expires_ms(clock):
    """generateToken gets username, password, client=referer; `expires` (ms) sets the renewal."""
    expires_ms = (clock.now() + 1800) * 1000
    responses.post(GENERATE_URL, json={"token": "user-token-1", "expires": expires_ms,
                                       "ssl": True})
    responses.post(GENERATE_URL, json={"token": "user-token-2",
                                       "expires": expires_ms + 1_800_000})
    provider = user(referer="https://fme.example.com", refresh_margin_s=300)
    assert provider.token(now=clock.now()) == "user-token-1"
    assert form(responses.calls[0]) == {
        "username": "surveyor", "password": PASSWORD, "client": "referer",
        "referer": "https://fme.example.com", "expiration": "120", "f": "json"}
    assert provider.referer == "https://fme.example.com"
    clock.advance(1800 - 301)
    assert provider.token(now=clock.now()) == "user-token-1"
    clock.advance(1)
    assert provider.token(now=clock.now()) == "user-token-2"


def test_the_user_token_referer_defaults_to_the_portal():
    """Without a referer the token is bound to the portal's own URL."""
    assert user().referer == PORTAL


@responses.activate
def test_expiry_is_the_earlier_of_the_lifetime_asked_for_and_the_one_given(clock):
    """A portal claiming a later expiry than asked for (or a skewed clock) cannot stretch it."""
    responses.post(GENERATE_URL, json={"token": "t-1", "expires": (clock.now() + 10**6) * 1000})
    provider = user(expiration_min=60, refresh_margin_s=0)
    provider.token(now=clock.now())
    assert provider.expires_at == clock.now() + 3600


@responses.activate
def test_a_margin_longer_than_the_token_life_renews_at_half_life(clock):
    """A 60 s token with a 120 s margin is renewed after 30 s, not on every call."""
    responses.post(OAUTH_URL, json={"access_token": "short-1", "expires_in": 60})
    responses.post(OAUTH_URL, json={"access_token": "short-2", "expires_in": 60})
    provider = oauth(clock, refresh_margin_s=120)
    assert provider.token(now=clock.now()) == "short-1"
    clock.advance(29)
    assert provider.token(now=clock.now()) == "short-1"
    clock.advance(1)
    assert provider.token(now=clock.now()) == "short-2"


@responses.activate
def test_invalidate_makes_the_next_call_fetch_a_new_token(clock):
    """After invalidate() (the server refused the token) the next token() asks the portal."""
    responses.post(OAUTH_URL, json={"access_token": "first-token", "expires_in": 7200})
    responses.post(OAUTH_URL, json={"access_token": "second-token", "expires_in": 7200})
    provider = oauth(clock)
    assert provider.token(now=clock.now()) == "first-token"
    provider.invalidate()
    assert provider.expires_at is None
    assert provider.token(now=clock.now()) == "second-token"
    assert provider.refreshes == 2


OAUTH_REFUSED = {"error": {"code": 400, "error": "invalid_client",
                           "error_description": "Invalid client_secret",
                           "message": "Invalid client_secret", "details": []}}
GENERATE_REFUSED = {"error": {"code": 400, "message": "Unable to generate token.",
                              "details": ["Invalid username or password."]}}


@pytest.mark.parametrize("make, url, answer", [
    (lambda: oauth(None), OAUTH_URL, OAUTH_REFUSED),
    (lambda: oauth(None), OAUTH_URL, {"error": "invalid_client",
                                      "error_description": "bad client"}),
    (lambda: user(), GENERATE_URL, GENERATE_REFUSED),
    (lambda: user(), GENERATE_URL, {"error": {"code": 403, "message": "Forbidden"}}),
], ids=["oauth-error-object", "oauth-error-string", "generate-bad-password", "forbidden"])
@responses.activate
def test_refused_credentials_in_an_http_200_body_are_auth(make, url, answer):
    """Bad credentials, reported inside an HTTP 200 body, raise TokenError with class AUTH."""
    responses.post(url, json=answer, status=200)
    with pytest.raises(TokenError) as caught:
        make().token(now=1000.0)
    assert caught.value.error_class is ErrorClass.AUTH
    assert CLIENT_SECRET not in str(caught.value) and PASSWORD not in str(caught.value)


@responses.activate
def test_a_refusal_over_http_400_is_auth_too():
    """An HTTP 400 from the token endpoint is a credential problem (AUTH), not BAD_REQUEST."""
    responses.post(GENERATE_URL, json=GENERATE_REFUSED, status=400)
    with pytest.raises(TokenError) as caught:
        user().token(now=1000.0)
    assert caught.value.error_class is ErrorClass.AUTH
    assert "Invalid username or password" in str(caught.value)


@pytest.mark.parametrize("kw, expected", [
    (dict(status=500, body="<html>oops</html>"), ErrorClass.SERVER_ERROR),
    (dict(status=200, json={"error": {"code": 503, "message": "busy"}}), ErrorClass.SERVER_ERROR),
    (dict(status=429, json={}, headers={"Retry-After": "7"}), ErrorClass.RATE_LIMITED),
    (dict(body=requests.exceptions.ConnectTimeout()), ErrorClass.CONNECT_TIMEOUT),
    (dict(body=requests.exceptions.ReadTimeout()), ErrorClass.TTFB_TIMEOUT),
    (dict(body=requests.exceptions.ConnectionError()), ErrorClass.CONNECTION_ERROR),
], ids=["http-500", "200-error-503", "429", "connect-timeout", "read-timeout", "refused"])
@responses.activate
def test_a_portal_outage_keeps_a_transient_class(kw, expected):
    """Timeouts, refused connections, 5xx and 429 stay transient, so the task is parked."""
    responses.post(OAUTH_URL, **kw)
    with pytest.raises(TokenError) as caught:
        oauth(None).token(now=1000.0)
    assert caught.value.error_class is expected
    if expected is ErrorClass.RATE_LIMITED:
        assert caught.value.retry_after_s == 7.0


@pytest.mark.parametrize("answer", [{"expires_in": 60}, {"access_token": "", "expires_in": 9},
                                    {"access_token": 42}])
@responses.activate
def test_an_answer_without_a_token_is_bad_format(answer):
    """A token answer holding no token string is a format problem, not a success."""
    responses.post(OAUTH_URL, json=answer)
    with pytest.raises(TokenError) as caught:
        oauth(None).token(now=1000.0)
    assert caught.value.error_class is ErrorClass.BAD_FORMAT


@responses.activate
def test_a_failed_renewal_keeps_the_token_while_it_is_valid(clock, caplog):
    """In the margin a portal failure is logged and the still-valid token used; after expiry
    the failure is raised."""
    responses.post(OAUTH_URL, json={"access_token": "still-good-token", "expires_in": 600})
    responses.post(OAUTH_URL, status=503)
    provider = oauth(clock, refresh_margin_s=120)
    provider.token(now=clock.now())
    clock.advance(500)
    with caplog.at_level(logging.WARNING, logger="fme_ai_resilience.credentials"):
        assert provider.token(now=clock.now()) == "still-good-token"
    assert "renewing" in caplog.text and "still-good-token" not in caplog.text
    calls = len(responses.calls)
    assert provider.token(now=clock.now() + 1) == "still-good-token"
    assert len(responses.calls) == calls   # the next try waits a little
    clock.advance(100)
    with pytest.raises(TokenError) as caught:
        provider.token(now=clock.now())
    assert caught.value.error_class is ErrorClass.SERVER_ERROR


@responses.activate
def test_concurrent_callers_share_one_refresh():
    """Eight threads asking at once for an expired token cause one token request."""
    def slow(request):
        time.sleep(0.05)   # keep the refresh in flight while the others arrive
        return 200, {}, '{"access_token": "shared-token", "expires_in": 3600}'

    responses.add_callback(responses.POST, OAUTH_URL, callback=slow)
    provider = oauth(None)
    barrier = threading.Barrier(8)
    got = []

    def ask():
        barrier.wait()
        got.append(provider.token(now=1000.0))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == ["shared-token"] * 8
    assert len(responses.calls) == 1


@responses.activate
def test_secrets_never_reach_reprs_urls_errors_or_logs(caplog):
    """Client secret, password and token appear only in the POST body of the token request."""
    responses.post(OAUTH_URL, json={"access_token": "app-token-xyz1", "expires_in": 60})
    responses.post(GENERATE_URL, json={"error": {"code": 400, "message": f"bad {PASSWORD}"}})
    app, named = oauth(None), user()
    with caplog.at_level(logging.DEBUG):
        app.token(now=0.0)
        with pytest.raises(TokenError) as caught:
            named.token(now=0.0)
    for text in (repr(app), repr(named), str(caught.value), caplog.text,
                 *(c.request.url for c in responses.calls)):
        for secret in (CLIENT_SECRET, PASSWORD, "app-token-xyz1"):
            assert secret not in text
    assert "[REDACTED]" in str(caught.value)
    assert set(app.secrets) == {CLIENT_SECRET, "app-token-xyz1"}
    assert PASSWORD in named.secrets


def test_a_web_connection_outside_fme_is_a_configuration_error(monkeypatch):
    """Without FME's fmewebservices module, asking for a web connection fails clearly."""
    monkeypatch.setitem(sys.modules, "fmewebservices", None)
    with pytest.raises(ConfigurationError, match="needs FME"):
        FmeWebConnectionToken("ArcGIS Online (surveys)")


class FakeConnection:
    def __init__(self, token):
        self.value, self.suspect = token, 0

    def getAccessToken(self):  # noqa: N802 - FME's spelling
        return self.value

    def setSuspectExpired(self):  # noqa: N802
        self.suspect += 1


class FakeManager:
    def __init__(self, connections):
        self.connections = connections

    def getNamedConnection(self, name):  # noqa: N802
        return self.connections.get(name)


def test_a_web_connection_hands_out_fme_s_token_and_marks_it_suspect_on_invalidate():
    """The token comes from getAccessToken(); invalidate() calls setSuspectExpired()."""
    connection = FakeConnection("  fme-held-token  ")
    provider = FmeWebConnectionToken("agol", manager=FakeManager({"agol": connection}))
    assert provider.token(now=0.0) == "fme-held-token"
    assert provider.secrets == ("fme-held-token",)
    provider.invalidate()
    assert connection.suspect == 1
    assert repr(provider) == "FmeWebConnectionToken('agol')"


def test_a_missing_or_unauthorised_web_connection_is_reported():
    """An unknown name is a ConfigurationError; a connection giving no token is AUTH."""
    with pytest.raises(ConfigurationError, match="no web connection"):
        FmeWebConnectionToken("nope", manager=FakeManager({})).token(now=0.0)
    empty = FmeWebConnectionToken("agol", manager=FakeManager({"agol": FakeConnection("")}))
    with pytest.raises(TokenError) as caught:
        empty.token(now=0.0)
    assert caught.value.error_class is ErrorClass.AUTH


ALL = dict(token="static-token-1234", client_id="app", client_secret=CLIENT_SECRET,
           username="surveyor", password=PASSWORD, web_connection="agol")


@pytest.mark.parametrize("drop, expected", [
    ((), StaticToken),
    (("token",), OAuthAppToken),
    (("token", "client_id", "client_secret"), UserToken),
    (("token", "client_id", "client_secret", "username", "password"), FmeWebConnectionToken),
    (tuple(ALL), type(None)),
], ids=["static", "oauth", "user", "web-connection", "none"])
def test_settings_pick_static_then_oauth_then_user_then_web_connection(monkeypatch, drop,
                                                                      expected):
    """token_provider_from_settings follows the documented precedence."""
    fake = types.ModuleType("fmewebservices")
    fake.FMENamedConnectionManager = lambda: FakeManager({})
    monkeypatch.setitem(sys.modules, "fmewebservices", fake)
    values = {k: v for k, v in ALL.items() if k not in drop}
    provider = token_provider_from_settings(Settings(arcgis=ArcGISSettings(**values)))
    assert type(provider) is expected


def test_settings_carry_the_margin_and_timeout_into_the_provider():
    """token_refresh_margin_s and request_timeout_s reach the provider (the group alone works)."""
    group = ArcGISSettings(client_id="app", client_secret=CLIENT_SECRET,
                           token_refresh_margin_s=300.0, request_timeout_s=12.0)
    provider = token_provider_from_settings(group)
    assert isinstance(provider, OAuthAppToken)
    assert provider.refresh_margin_s == 300.0 and provider.timeout_s == (12.0, 12.0)
    assert provider.url == "https://www.arcgis.com/sharing/rest/oauth2/token"


def test_settings_with_credentials_but_no_portal_are_refused():
    """client_id or username without a portal URL is a ConfigurationError naming the setting."""
    with pytest.raises(ConfigurationError, match="arcgis.portal_url"):
        token_provider_from_settings(ArcGISSettings(portal_url="", username="u", password="p"))
