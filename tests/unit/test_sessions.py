"""The one HTTP session factory: FME's FMERequestsSession inside FME, the library's outside,
and every session handed in bounded by phase-measuring adapters or refused."""
from __future__ import annotations

import requests
import pytest
from requests.adapters import BaseAdapter, HTTPAdapter

from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.services.http import sessions
from fme_ai_resilience.services.pipeline import build_processor, build_sink
from fme_ai_resilience.services.processing.processor import Model
from fme_ai_resilience.services.http.sessions import (PhaseAdapter, bounded, fme_session_class,
                                                      new_session, reset_session_choice)
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.store import open_store
from fme_ai_resilience.testing import FakeFMERequestsSession, installed_fmetools
from fme_ai_resilience.testing.network import FakeCertStoreAdapter

URL = "https://vision.example.com/analyze"


@pytest.fixture(autouse=True)
def fresh_choice():
    reset_session_choice()
    yield
    reset_session_choice()


def test_outside_fme_the_session_is_the_librarys_own():
    """Without fmetools the factory makes a plain requests.Session with phase adapters."""
    session = new_session(clock=FakeClock())
    assert type(session) is requests.Session
    assert isinstance(session.get_adapter(URL), PhaseAdapter)
    assert session.trust_env is False


def test_inside_fme_the_session_is_fmerequestssession_bounded(fake_fmetools):
    """With fmetools importable the session is FMERequestsSession, its own adapter class kept
    under the phase-measuring one, FME's proxies and User-Agent intact."""
    session = new_session(clock=FakeClock())
    assert isinstance(session, fake_fmetools) and fake_fmetools.made == [session]
    adapter = session.get_adapter(URL)
    assert isinstance(adapter, PhaseAdapter) and isinstance(adapter, FakeCertStoreAdapter)
    assert session.headers["User-Agent"].startswith("FME/")


def test_the_choice_is_made_once(monkeypatch):
    """fmetools is looked up once per process, not on every session."""
    looked_up = []
    real = __import__

    def spy(name, *args, **kwargs):
        if name == "fmetools.http":
            looked_up.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr("builtins.__import__", spy)
    for _ in range(3):
        new_session(clock=FakeClock())
    assert looked_up == ["fmetools.http"]
    assert fme_session_class() is None


def test_build_processor_uses_fmes_session_inside_fme(tmp_path, fake_fmetools):
    """The processor's Vision AI client, layers and token provider share FME's session."""
    settings = Settings.from_mapping({"vision.endpoint": URL})
    with open_store(f"sqlite:///{tmp_path / 'l.db'}", init_schema=True, create=True) as store:
        processor = build_processor(settings, store=store)
    session = processor.routes[Model.PRIMARY].client.session
    assert isinstance(session, fake_fmetools)
    assert isinstance(session.get_adapter(URL), PhaseAdapter)


def test_build_processor_outside_fme_uses_the_librarys_session(tmp_path):
    """Outside FME build_processor's session is the library's own, never a bare Session."""
    settings = Settings.from_mapping({"vision.endpoint": URL})
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


def test_fmes_session_failing_is_a_configuration_error():
    """FMERequestsSession refusing FME's proxy settings comes back as a ConfigurationError."""
    with installed_fmetools() as cls:
        def broken(self):
            raise RuntimeError("proxy authentication NTLM is not supported")
        cls.__init__ = broken
        with pytest.raises(ConfigurationError, match="FME network settings"):
            new_session(clock=FakeClock())


def test_a_broken_fmetools_falls_back_to_the_librarys_session(monkeypatch):
    """fmetools present without FMERequestsSession: the library's own session."""
    import sys
    import types
    broken = types.ModuleType("fmetools.http")
    monkeypatch.setitem(sys.modules, "fmetools", types.ModuleType("fmetools"))
    monkeypatch.setitem(sys.modules, "fmetools.http", broken)   # no FMERequestsSession
    assert type(new_session(clock=FakeClock())) is requests.Session
    assert sessions.fme_session_class() is None
