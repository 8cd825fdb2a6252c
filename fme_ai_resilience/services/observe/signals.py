"""The golden signals read from the ledger.

:func:`read_signals` reads the window's calls, completions and registrations, the backlog and
the format anomalies from the store, with the ledger's state and its monotonic totals
(counters, histograms, breakers, ladder), and hands them to the pure
:func:`fme_ai_resilience.core.observe.signals.golden_signals`.
"""
from __future__ import annotations

from typing import Optional

from ...core.config.settings import Settings
from ...core.observe.signals import GoldenSignals, golden_signals
from ...store.base import Store
from ...store.pipeline_rows import SAMPLE_LIMIT

__all__ = ["read_signals"]


def read_signals(settings: Settings, *, store: Store, now: float,
                 window_s: Optional[float] = None) -> GoldenSignals:
    """The golden signals over the window ending at ``now`` (``alerts.window_s`` by default),
    from the ledger's samples, its state (honest counts, due work, leases, review queue) and
    its monotonic totals (what ``/metrics`` exports)."""
    window = settings.alerts.window_s if window_s is None else window_s
    since = now - window
    return golden_signals(
        settings, calls=store.call_samples(since), completions=store.completion_samples(since),
        registrations=store.registration_samples(since),
        backlog=store.backlog(), format_anomalies=store.anomalies_since(since), now=now,
        window_s=window, sample_limit=SAMPLE_LIMIT, ledger=store.ledger_state(now=now),
        metrics=store.ledger_metrics(now=now), senders=store.sender_counts())
