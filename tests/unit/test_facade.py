"""The package facade: the names a user needs, loaded lazily, and ``__all__`` everywhere."""
from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys

import pytest

import fme_ai_resilience

#: What ``import fme_ai_resilience`` must not pull in: it runs on every FME translation.
HEAVY = ("requests", "urllib3", "jsonschema", "sqlite3", "psycopg2", "fme_ai_resilience.store",
         "fme_ai_resilience.services")


def _fresh(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout


def test_importing_the_package_loads_nothing_heavy():
    """``import fme_ai_resilience`` imports no HTTP, schema or database library."""
    loaded = json.loads(_fresh("import sys, json, fme_ai_resilience; "
                               "print(json.dumps(sorted(sys.modules)))"))
    assert [m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(HEAVY)] == []


def test_a_user_imports_the_client_and_the_store_from_the_package():
    """``from fme_ai_resilience import VisionClient, open_store`` works in a fresh process."""
    out = _fresh("from fme_ai_resilience import VisionClient, open_store, decide, "
                 "ResilienceError; print(VisionClient.__module__, open_store.__module__)")
    assert out.split() == ["fme_ai_resilience.services.vision.client", "fme_ai_resilience.store"]


@pytest.mark.parametrize("name", sorted(set(fme_ai_resilience.__all__) - {"__version__"}))
def test_every_exported_name_resolves_to_its_module(name):
    """Each name in ``__all__`` is the object of the module the facade maps it to."""
    module = importlib.import_module(fme_ai_resilience._EXPORTS[name])
    assert getattr(fme_ai_resilience, name) is getattr(module, name)


def test_an_unknown_name_is_an_attribute_error():
    """A misspelt name fails like any missing attribute (so ``hasattr`` works)."""
    with pytest.raises(AttributeError, match="VisonClient"):
        fme_ai_resilience.VisonClient  # noqa: B018


def _public_modules():
    for info in pkgutil.walk_packages(fme_ai_resilience.__path__, "fme_ai_resilience."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts[1:]) or parts[-1] == "sql":
            continue
        yield info.name


@pytest.mark.parametrize("name", sorted(_public_modules()))
def test_every_public_module_declares_its_public_names(name):
    """``__all__`` exists and names only what the module defines."""
    module = importlib.import_module(name)
    assert isinstance(getattr(module, "__all__", None), list), f"{name} has no __all__"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert missing == []


def test_the_librarys_logger_has_a_null_handler_and_the_cli_still_shows_warnings():
    """Used as a library with no logging set up, its warnings are not printed by Python's
    last resort (a NullHandler on ``fme_ai_resilience``); the command line, an application,
    shows them on stderr."""
    import subprocess
    import sys

    code = ("import logging, fme_ai_resilience.services\n"
            "logging.getLogger('fme_ai_resilience.demo').warning('library warning')\n"
            "from fme_ai_resilience.cli.logs import show_warnings\n"
            "show_warnings()\n"
            "logging.getLogger('fme_ai_resilience.demo').warning('command warning')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "command warning\n"
