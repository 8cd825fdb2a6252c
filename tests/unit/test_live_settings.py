"""Settings that follow the resilience_config table through a short-TTL cache."""
from __future__ import annotations

import logging

import pytest

from fme_ai_resilience.core.errors import ConfigurationError, StoreUnavailable
from fme_ai_resilience.services.config.settings import LiveSettings
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.store import open_store


@pytest.fixture
def ledger(tmp_path):
    with open_store(f"sqlite:///{tmp_path / 'ledger.db'}", init_schema=True) as store:
        yield store


def test_a_changed_row_takes_effect_after_the_ttl_not_before(ledger, clock):
    """An operator's UPDATE reaches the engines within ttl_s, and the table is not re-read sooner."""
    live = LiveSettings(Settings(), store=ledger, ttl_s=30.0, clock=clock)
    assert live.get().breaker.failure_rate == 0.5
    ledger.set_config({"breaker.failure_rate": "0.3"}, now=clock.now())
    clock.advance(29.0)
    assert live.get().breaker.failure_rate == 0.5
    clock.advance(1.0)
    assert live.get().breaker.failure_rate == 0.3


def test_rows_apply_over_the_base_settings(ledger, clock):
    """Published parameters stay in force for every setting the table does not name."""
    base = Settings.from_mapping({"intake.engines": "12"})
    ledger.set_config({"intake.latency_promise_s": "60"}, now=clock.now())
    settings = LiveSettings(base, store=ledger, clock=clock).get()
    assert (settings.intake.engines, settings.intake.latency_promise_s) == (12, 60.0)


def test_a_bad_row_keeps_the_last_good_settings_and_is_logged_once(ledger, clock, caplog):
    """A typo in the table never stops intake: the last good settings stay, one error names it."""
    live = LiveSettings(Settings(), store=ledger, ttl_s=1.0, clock=clock)
    ledger.set_config({"retry.task_attempts": "4"}, now=clock.now())
    assert live.get().retry.task_attempts == 4
    ledger.set_config({"retry.task_attempts": "four"}, now=clock.now())
    with caplog.at_level(logging.ERROR, logger="fme_ai_resilience.live_settings"):
        for _ in range(3):
            clock.advance(1.0)
            assert live.get().retry.task_attempts == 4
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "retry.task_attempts" in errors[0].getMessage()
    ledger.set_config({"retry.task_attempts": "5"}, now=clock.now())
    clock.advance(1.0)
    assert live.get().retry.task_attempts == 5


class _Unreachable:
    def __init__(self):
        self.reads = 0

    def get_config(self):
        self.reads += 1
        raise StoreUnavailable("connection refused")


def test_an_unreachable_ledger_keeps_the_settings_and_is_asked_again_after_the_ttl(clock):
    """A database outage does not change thresholds, nor turn every call into a failed read."""
    store = _Unreachable()
    base = Settings.from_mapping({"intake.engines": "3"})
    live = LiveSettings(base, store=store, ttl_s=10.0, clock=clock)
    assert live.get() is base and live.get() is base
    assert store.reads == 1
    clock.advance(10.0)
    live.get()
    assert store.reads == 2


@pytest.mark.parametrize("ttl", [-1.0, float("nan"), float("inf")])
def test_ttl_must_be_a_finite_non_negative_number(ttl, clock):
    """A nonsense cache time is refused with the field named."""
    with pytest.raises(ConfigurationError, match="ttl_s"):
        LiveSettings(store=_Unreachable(), ttl_s=ttl, clock=clock)
