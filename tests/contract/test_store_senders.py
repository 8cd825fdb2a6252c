"""The webhook senders' counts: every backend keeps them apart from intake's own counters."""
from __future__ import annotations

import pytest

from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.core.ledger import BAD_SIGNATURE, DELIVERED, SenderCount

from helpers.ledger_rows import T0


def test_deliveries_and_refused_signatures_are_counted_per_sender(store):
    store.record_sender("arcgis_online", DELIVERED, now=T0)
    store.record_sender("arcgis_online", DELIVERED, now=T0 + 30)
    store.record_sender("arcgis_online", BAD_SIGNATURE, now=T0 + 40)
    store.record_sender("arcgis_enterprise", DELIVERED, now=T0 + 50)
    assert store.sender_counts() == [
        SenderCount("arcgis_enterprise", DELIVERED, 1, T0 + 50, T0 + 50),
        SenderCount("arcgis_online", BAD_SIGNATURE, 1, T0 + 40, T0 + 40),
        SenderCount("arcgis_online", DELIVERED, 2, T0, T0 + 30)]


def test_sender_counts_stay_out_of_intakes_own_counters(store):
    store.record_sender("arcgis_online", DELIVERED, now=T0)
    assert store.intake_counters() == {"invalid_not_kept": 0, "refusals_not_recorded": 0}


def test_an_unknown_event_is_refused_before_anything_is_written(store):
    with pytest.raises(ConfigurationError):
        store.record_sender("arcgis_online", "delivered-ish", now=T0)
    assert store.sender_counts() == []
