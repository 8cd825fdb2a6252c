"""Settings that follow the ``resilience_config`` table at run time, through a short-TTL cache.

Operators change a threshold with one ``UPDATE`` (or ``Store.set_config``) and every engine and
gateway picks it up within ``ttl_s`` seconds, without a redeploy. The table's rows are applied
over a base (defaults, published parameters, ``FAIR_*`` variables).

A bad row never takes the pipeline down: the last good settings stay in force and the problem
is logged once, naming the setting and the reason. A ledger that cannot be read keeps the last
good settings too, and is asked again after ``ttl_s``.
"""
from __future__ import annotations

import logging
import math
import threading
from typing import Dict, Optional

from ...core.checks import finite
from ...core.clock import Clock, SystemClock
from ...core.errors import ConfigurationError, StoreError
from ...core.text.redact import redact_text
from ...core.config.settings import Settings
from ...store.base import Store

__all__ = ["LiveSettings"]

log = logging.getLogger("fme_ai_resilience.core.config.settings")


class LiveSettings:
    """The settings in force: ``base`` with the ``resilience_config`` rows applied over it.

    :meth:`get` reads the table at most once every ``ttl_s`` seconds (on the injected clock's
    monotonic time); between reads it returns the cached value. Safe to share between threads.
    """

    def __init__(self, base: Optional[Settings] = None, ttl_s: float = 30.0, *, store: Store,
                 clock: Optional[Clock] = None) -> None:
        finite("ttl_s", ttl_s, minimum=0)
        self.store = store
        self.base = base or Settings()
        self.ttl_s = float(ttl_s)
        self.clock = clock or SystemClock()
        self._current = self.base
        self._rows: Optional[Dict[str, str]] = None
        self._read_at = -math.inf
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LiveSettings(ttl_s={self.ttl_s:g}, rows={len(self._rows or {})})"

    def get(self) -> Settings:
        """The settings in force (re-reading the table when the cache is older than ``ttl_s``)."""
        if self.clock.monotonic() - self._read_at < self.ttl_s:
            return self._current
        return self.refresh()

    def refresh(self) -> Settings:
        """Read the table now and return the settings in force."""
        with self._lock:
            self._read_at = self.clock.monotonic()
            try:
                rows = dict(self.store.get_config())
            except StoreError as exc:
                log.warning("settings: resilience_config unreadable (%s); keeping the settings "
                            "in force", redact_text(str(exc)))
                return self._current
            if rows == self._rows:
                return self._current
            self._rows = rows
            try:
                self._current = self.base.with_values(rows)
            except ConfigurationError as exc:
                log.error("settings: resilience_config has a bad value, keeping the settings in "
                          "force until it is fixed: %s", redact_text(str(exc)))
            else:
                log.info("settings: %d value(s) from resilience_config in force", len(rows))
            return self._current
