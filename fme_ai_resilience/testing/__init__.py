"""Test PythonCaller scripts without FME: fake features, ``fme.macroValues``, FME's log, a
scripted Vision AI service and a fake clock, and a pytest plugin with fixtures for them.

For FME authors' own tests (docs/testing.md)::

    from fme_ai_resilience.testing import FakeFeature, run_caller

    run = run_caller(FeatureProcessor, [FakeFeature({"asset_type": "hydrant"})],
                     {"FAIR_DB": "sqlite:////tmp/ledger.db"})
    assert run.rejected == []

The pytest plugin (registered through the ``pytest11`` entry point, so installing the
package is enough) offers ``fake_fme``, ``fme_macros``, ``fake_clock``, ``fake_vision``,
``fake_fmetools`` and ``fair_db``; each restores what it changes. Nothing here needs ``fmeobjects``, and ``responses``
only for :class:`FakeVision`.
"""
from __future__ import annotations

from ..core.clock import FakeClock
from .features import (FakeFeature, FakeFME, FMEException, LogLine, current_fme,
                       fme_encrypt, installed_fme)
from .network import FakeFMERequestsSession, installed_fmetools
from .photos import PhotoHost
from .runner import OUTPUT, REJECTED, CallerRun, run_caller
from .vision import FakeVision, Fault

__all__ = ["FakeFeature", "FakeFME", "FMEException", "LogLine", "installed_fme", "current_fme",
           "run_caller", "CallerRun", "OUTPUT", "REJECTED", "FakeVision", "Fault", "FakeClock",
           "FakeFMERequestsSession", "installed_fmetools", "fme_encrypt", "PhotoHost"]
