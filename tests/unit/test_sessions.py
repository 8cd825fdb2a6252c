"""The one HTTP session factory: FME's FMERequestsSession inside FME, the library's outside
(the environment's proxies and CA bundle, never ~/.netrc), and every session handed in
bounded by phase-measuring adapters or refused."""
from __future__ import annotations

import requests
import pytest
from requests.adapters import BaseAdapter, HTTPAdapter

from fme_ai_resilience.core.clock import FakeClock, SystemClock
from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.services.http import sessions
from fme_ai_resilience.services.pipeline import build_processor, build_sink
from fme_ai_resilience.services.processing.processor import Model
from fme_ai_resilience.services.http.session_choice import EnvironmentSession, session_choice
from fme_ai_resilience.services.http.sessions import (PhaseAdapter, bounded, fme_session_class,
                                                      new_session, reset_session_choice)
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.store import open_store
from fme_ai_resilience.testing import FakeFMERequestsSession, installed_fmetools
from fme_ai_resilience.testing.network import FakeCertStoreAdapter

from helpers.forward_proxy import EchoServer, ForwardProxy


URL = "https://vision.example.com/analyze"
SERVICE = "https://services.example.com/arcgis/rest/services/inspection/FeatureServer"


@pytest.fixture(autouse=True)
def fresh_choice():
    reset_session_choice()
    yield
    reset_session_choice()


@pytest.fixture
def no_proxy_environment(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def test_outside_fme_the_session_is_the_librarys_own():
    """Without fmetools the factory makes the library's session, with phase adapters."""
    session = new_session(clock=FakeClock())
    assert isinstance(session, EnvironmentSession)
    assert isinstance(session.get_adapter(URL), PhaseAdapter)
    assert session_choice().kind == "environment" and session_choice().problem is None


def test_outside_fme_every_call_goes_through_the_environments_proxy(no_proxy_environment):
    """HTTP_PROXY names a proxy on loopback: the library's session sends its call there (the
    proxy sees it, absolute-form, and alone knows the name), and the answer comes back
    through it; with the name in NO_PROXY the call goes straight out instead."""
    with ForwardProxy(aliases={"vision.test": "127.0.0.1"}) as proxy, EchoServer() as target:
        url = target.url.replace("127.0.0.1", "vision.test")
        no_proxy_environment.setenv("HTTP_PROXY", proxy.url)
        session = new_session(clock=SystemClock())
        answer = session.get(f"{url}/analyze?x=1", timeout=(2, 5))
        assert answer.status_code == 200 and answer.json()["path"] == "/analyze?x=1"
        assert proxy.seen == [f"GET {url}/analyze?x=1"]
        no_proxy_environment.setenv("NO_PROXY", "vision.test")
        with pytest.raises(requests.ConnectionError):   # straight out: no such name here
            new_session(clock=SystemClock(), resolver=_nowhere).get(url, timeout=(2, 5))
        assert len(proxy.seen) == 1   # NO_PROXY honoured


def _nowhere(host, port):
    raise OSError(f"{host} is known only to the proxy")


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_loopback_address_never_goes_to_the_environments_proxy(no_proxy_environment, host):
    """With HTTP_PROXY and HTTPS_PROXY set and no NO_PROXY, a call to this machine's
    loopback goes straight to it: the proxy's loopback is not this machine's, and the key
    a local service gets must not reach the proxy."""
    with ForwardProxy() as proxy, EchoServer() as target:
        no_proxy_environment.setenv("HTTP_PROXY", proxy.url)
        no_proxy_environment.setenv("HTTPS_PROXY", proxy.url)
        seen = new_session(clock=SystemClock()).get(
            target.url.replace("127.0.0.1", host),
            headers={"Authorization": "Bearer local-key"}, timeout=(2, 5)).json()
        assert seen["headers"]["Authorization"] == "Bearer local-key"
        assert proxy.seen == []


@pytest.mark.parametrize("url, proxied", [
    ("http://[::1]:8080/x", False), ("https://127.8.0.1/x", False),
    ("http://localhost./x", False), ("http://models.localhost:11434/x", False),
    ("https://vision.example.com/x", True), ("http://10.0.0.7/x", True),
    ("http://127.0.0.1.example.com/x", True), ("http://[::ffff:10.0.0.7]/x", True),
])
def test_only_loopback_addresses_skip_the_environments_proxy(no_proxy_environment, url,
                                                             proxied):
    """Loopback (127.0.0.0/8, ::1, localhost) skips the proxy; every other host, private
    ones included (NO_PROXY is the way), and proxies given in code, keep it."""
    no_proxy_environment.setenv("HTTP_PROXY", "http://proxy.corp:3128")
    no_proxy_environment.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    session = new_session(clock=SystemClock())
    chosen = session.merge_environment_settings(url, {}, False, None, None)["proxies"]
    assert bool(chosen) is proxied
    given = {"http": "http://given:1", "https": "http://given:1"}
    assert session.merge_environment_settings(url, dict(given), False, None, None)[
        "proxies"] == given


def test_outside_fme_the_ca_bundle_comes_from_the_environment_but_never_netrc(
        no_proxy_environment, tmp_path):
    """REQUESTS_CA_BUNDLE is the session's certificate bundle; a ~/.netrc entry for the host
    never replaces the Authorization the library sets (nor adds one)."""
    bundle = tmp_path / "corporate-ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    no_proxy_environment.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    session = new_session(clock=SystemClock())
    assert session.merge_environment_settings(URL, {}, None, None, None)["verify"] == \
        str(bundle)
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine 127.0.0.1 login someone password netrc-secret-9\n")
    netrc.chmod(0o600)
    no_proxy_environment.setenv("NETRC", str(netrc))
    no_proxy_environment.setenv("HOME", str(tmp_path))
    with EchoServer() as target:
        seen = new_session(clock=SystemClock()).get(
            target.url, headers={"Authorization": "Bearer mine"}, timeout=(2, 5)).json()
        plain = new_session(clock=SystemClock()).get(target.url, timeout=(2, 5)).json()
    assert seen["headers"]["Authorization"] == "Bearer mine"
    assert "Authorization" not in plain["headers"]


def test_inside_fme_the_session_is_fmerequestssession_bounded(fake_fmetools):
    """With fmetools importable the session is FMERequestsSession, its own adapter class kept
    under the phase-measuring one, FME's proxies and User-Agent intact."""
    session = new_session(clock=FakeClock())
    assert isinstance(session, fake_fmetools) and fake_fmetools.made == [session]
    adapter = session.get_adapter(URL)
    assert isinstance(adapter, PhaseAdapter) and isinstance(adapter, FakeCertStoreAdapter)
    assert session.headers["User-Agent"].startswith("FME/")


def test_the_choice_is_made_once(monkeypatch):
    """fmetools is looked up once per process (the package's copy, then an installed one),
    not on every session."""
    import importlib
    looked_up = []
    real = importlib.import_module

    def spy(name, *args, **kwargs):
        if name.endswith("fmetools.http"):
            looked_up.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", spy)
    for _ in range(3):
        new_session(clock=FakeClock())
    assert looked_up == ["fme_ai_resilience._vendor.fmetools.http", "fmetools.http"]
    assert fme_session_class() is None


def test_build_processor_uses_fmes_session_inside_fme(tmp_path, fake_fmetools):
    """The processor's Vision AI client, layers and token provider share FME's session."""
    settings = Settings.from_mapping({"vision.endpoint": URL,
                                      "intake.feature_services": SERVICE})
    with open_store(f"sqlite:///{tmp_path / 'l.db'}", init_schema=True, create=True) as store:
        processor = build_processor(settings, store=store)
    session = processor.routes[Model.PRIMARY].client.session
    assert isinstance(session, fake_fmetools)
    assert isinstance(session.get_adapter(URL), PhaseAdapter)


def test_build_processor_outside_fme_uses_the_librarys_session(tmp_path):
    """Outside FME build_processor's session is the library's own, never a bare Session."""
    settings = Settings.from_mapping({"vision.endpoint": URL,
                                      "intake.feature_services": SERVICE})
    with open_store(f"sqlite:///{tmp_path / 'l.db'}", init_schema=True, create=True) as store:
        processor = build_processor(settings, store=store)
    session = processor.routes[Model.PRIMARY].client.session
    assert not isinstance(session, FakeFMERequestsSession)
    assert isinstance(session.get_adapter(URL), PhaseAdapter)


def test_the_review_queues_sink_uses_fmes_session_inside_fme(tmp_path, fake_fmetools):
    """build_sink (``review resolve`` writes the verdict through it) shares the one factory's
    session: FME's inside FME, with the phase-measuring adapter."""
    settings = Settings.from_mapping({"vision.endpoint": URL})
    with open_store(f"sqlite:///{tmp_path / 'l.db'}", init_schema=True, create=True) as store:
        sink = build_sink(settings, store=store)
    session = sink.layers._session
    assert isinstance(session, fake_fmetools)
    assert isinstance(session.get_adapter(URL), PhaseAdapter)


def test_a_plain_session_handed_in_is_bounded_with_its_pool_settings():
    """A caller's requests.Session gets phase adapters keeping its pool size and retries."""
    session = requests.Session()
    session.mount("https://", HTTPAdapter(pool_maxsize=33, max_retries=2))
    bounded(session=session, clock=FakeClock())
    adapter = session.get_adapter(URL)
    assert isinstance(adapter, PhaseAdapter)
    assert adapter._pool_maxsize == 33 and adapter.max_retries.total == 2


def test_something_that_is_no_session_is_refused():
    """An object that is no requests.Session cannot be bounded: a ConfigurationError says so."""
    with pytest.raises(ConfigurationError) as info:
        bounded(session=object(), clock=FakeClock())
    assert "connect, TTFB and body limits" in str(info.value)


def test_an_adapter_of_another_kind_is_refused():
    """A mounted adapter that is no HTTPAdapter is refused, naming it."""
    class Odd(BaseAdapter):
        def send(self, *a, **k):
            raise AssertionError

        def close(self):
            pass

    session = requests.Session()
    session.mount("https://", Odd())
    with pytest.raises(ConfigurationError, match="Odd"):
        bounded(session=session, clock=FakeClock())


def test_an_adapter_needing_arguments_is_refused():
    """An HTTPAdapter subclass that cannot be rebuilt without arguments is refused."""
    class Needy(HTTPAdapter):
        def __init__(self, secret_arg, **kwargs):
            super().__init__(**kwargs)

    session = requests.Session()
    session.mount("https://", Needy(1))
    with pytest.raises(ConfigurationError, match="Needy"):
        bounded(session=session, clock=FakeClock())


def test_fmes_session_failing_falls_back_to_the_environment_and_says_why(fake_fme):
    """FMERequestsSession refusing FME's proxy settings inside FME: the library's session
    (the environment's proxies) from then on, and the choice names FME's reason."""
    with installed_fmetools() as cls:
        def broken(self):
            raise RuntimeError("proxy authentication NTLM is not supported")
        cls.__init__ = broken
        session = new_session(clock=FakeClock())
        assert isinstance(session, EnvironmentSession)
        choice = session_choice()
        assert choice.kind == "environment" and "NTLM is not supported" in choice.problem
        assert isinstance(new_session(clock=FakeClock()), EnvironmentSession)


def test_inside_fme_without_fmetools_the_choice_says_what_is_missing(fake_fme):
    """FME without fmetools importable: the environment's session, and a problem naming
    what is missing (the callers WARN with it); outside FME no problem at all."""
    choice = session_choice()
    assert choice.kind == "environment" and "fmetools is not installed" in choice.problem


def test_a_broken_fmetools_falls_back_to_the_librarys_session(monkeypatch):
    """fmetools present without FMERequestsSession: the library's own session."""
    import sys
    import types
    broken = types.ModuleType("fmetools.http")
    monkeypatch.setitem(sys.modules, "fmetools", types.ModuleType("fmetools"))
    monkeypatch.setitem(sys.modules, "fmetools.http", broken)   # no FMERequestsSession
    assert isinstance(new_session(clock=FakeClock()), EnvironmentSession)
    assert sessions.fme_session_class() is None


def test_inside_fme_netrc_never_replaces_the_librarys_authorization(no_proxy_environment,
                                                                    tmp_path, fake_fmetools):
    """FME's FMERequestsSession reads the environment as requests does: a ~/.netrc entry (or
    a ``default`` one) of the engine's account must not replace the Authorization the
    library sets (the Vision key, the FME Flow token), nor add one."""
    netrc = tmp_path / ".netrc"
    netrc.write_text("default login someone password netrc-secret-9\n")
    netrc.chmod(0o600)
    no_proxy_environment.setenv("NETRC", str(netrc))
    no_proxy_environment.setenv("HOME", str(tmp_path))
    with EchoServer() as target:
        session = new_session(clock=SystemClock())
        assert isinstance(session, fake_fmetools)
        seen = session.get(target.url, headers={"Authorization": "Bearer mine"},
                           timeout=(2, 5)).json()
        plain = new_session(clock=SystemClock()).get(target.url, timeout=(2, 5)).json()
    assert seen["headers"]["Authorization"] == "Bearer mine"
    assert "Authorization" not in plain["headers"]
