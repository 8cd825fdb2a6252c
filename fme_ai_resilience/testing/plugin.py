"""The pytest plugin of :mod:`fme_ai_resilience.testing` (entry point ``pytest11``).

Fixtures, each undoing what it does when the test ends:

* ``fake_fme``: fake ``fme`` and ``fmeobjects`` modules in ``sys.modules`` for the test; the
  :class:`~.features.FakeFME` they serve (its ``macros`` and ``log``);
* ``fme_macros``: that ``fme.macroValues`` dictionary, to fill in;
* ``fake_clock``: a :class:`~fme_ai_resilience.core.clock.FakeClock`;
* ``fake_vision``: a :class:`~.vision.FakeVision` answering through an active
  ``responses`` mock (loopback URLs pass through to real servers);
* ``fake_fmetools``: a stand-in for Safe's ``fmetools.http`` in ``sys.modules``, so the
  library's HTTP sessions are ``FMERequestsSession`` as inside FME (the class is yielded);
* ``fair_db``: the URL of a new SQLite ledger with its schema, for ``FAIR_DB``;
* ``photo_host``: a :class:`~.photos.PhotoHost` on 127.0.0.1 the downloader accepts.

A PythonCaller script usually imports ``fme`` and ``fmeobjects`` at its top, as FME's template
does, so a test module importing it needs them at collection time: the ini option
``fme_fake_modules = true`` (or ``--fme-fake-modules``) puts the fakes in ``sys.modules`` for
the whole session, and takes them out at its end. Without it nothing is installed beyond a
fixture or a ``run_caller`` call.
"""
from __future__ import annotations

import contextlib
import re
from typing import Any, Dict, Iterator

import pytest

from ..core.clock import FakeClock
from ..store import open_store
from .features import FakeFME, installed_fme
from .network import installed_fmetools
from .photos import PhotoHost
from .vision import FakeVision

__all__ = ["fake_fme", "fme_macros", "fake_clock", "fake_vision", "fake_fmetools", "fair_db",
           "photo_host",
           "pytest_addoption", "pytest_configure", "pytest_unconfigure", "FAKE_MODULES_OPTION"]

_LOOPBACK = re.compile(r"^https?://(127\.0\.0\.1|localhost|\[::1\])[:/]")
#: The ini option (and, with dashes, the command-line flag) for session-wide fake modules.
FAKE_MODULES_OPTION = "fme_fake_modules"
_SESSION = pytest.StashKey[contextlib.ExitStack]()


def pytest_addoption(parser: Any) -> None:
    help_text = ("put fake fme and fmeobjects modules in sys.modules for the whole session "
                 "(for PythonCaller scripts importing them at the top)")
    parser.addini(FAKE_MODULES_OPTION, help_text, type="bool", default=False)
    parser.addoption("--fme-fake-modules", action="store_true", dest=FAKE_MODULES_OPTION,
                     default=False, help=help_text)


def pytest_configure(config: Any) -> None:
    if config.getoption(FAKE_MODULES_OPTION) or config.getini(FAKE_MODULES_OPTION):
        stack = contextlib.ExitStack()
        stack.enter_context(installed_fme())
        config.stash[_SESSION] = stack


def pytest_unconfigure(config: Any) -> None:
    stack = config.stash.get(_SESSION, None)
    if stack is not None:
        stack.close()
        del config.stash[_SESSION]


@pytest.fixture
def fake_fme() -> Iterator[FakeFME]:
    """Fake ``fme`` and ``fmeobjects`` for the test; what was in ``sys.modules`` comes back."""
    with installed_fme() as fake:
        yield fake


@pytest.fixture
def fme_macros(fake_fme: FakeFME) -> Dict[str, str]:
    """``fme.macroValues`` for the test (empty at first)."""
    return fake_fme.macros


@pytest.fixture
def fake_clock() -> FakeClock:
    """A clock that moves only when told (``advance``) or slept on."""
    return FakeClock()


@pytest.fixture
def fake_vision() -> Iterator[FakeVision]:
    """A scripted Vision AI service at ``https://vision.test/analyze`` through ``responses``."""
    try:
        import responses
    except ImportError:
        pytest.skip("fake_vision needs responses: pip install responses")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add_passthru(_LOOPBACK)
        vision = FakeVision()
        vision.register(mock)
        yield vision


@pytest.fixture
def fake_fmetools() -> Iterator[type]:
    """``fmetools.http`` as inside FME for the test: the library's sessions are its
    ``FMERequestsSession`` (yielded); what was in ``sys.modules`` comes back."""
    with installed_fmetools() as session_class:
        yield session_class


@pytest.fixture
def photo_host() -> Iterator[PhotoHost]:
    """A photo host on 127.0.0.1 the downloader accepts (``photo_host.add(name)`` gives a
    photo's URL; ``run_caller(..., photo_host=photo_host)`` lets the downloader in)."""
    with PhotoHost() as host:
        yield host


@pytest.fixture
def fair_db(tmp_path: Any) -> str:
    """A new SQLite ledger with its schema, as the ``FAIR_DB`` published parameter."""
    path = tmp_path / "fair-ledger.db"
    open_store(f"sqlite:///{path}", init_schema=True).close()
    return f"sqlite:///{path}"
