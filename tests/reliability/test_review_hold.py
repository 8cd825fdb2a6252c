"""A verdict reaches the layer once even when its write-back is slow: the write-back is held
for longer than it can take at the configured ``arcgis.request_timeout_s``, so a second
resolve meanwhile is refused instead of writing it again."""
from __future__ import annotations

import pytest

from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.services.processing.review import ReviewRefused, resolve
from fme_ai_resilience.services.processing.sinks import PostgresTableSink
from fme_ai_resilience.store import open_store

from helpers.review_queue import review_queue

T0 = 1_790_000_000.0


class SlowSink(PostgresTableSink):
    """A table sink whose first write-back is still in flight ``late_s`` later, when another
    reviewer resolves the same photo; it counts the write-backs that reached it."""

    def __init__(self, late_s, settings, store):
        self.late_s, self.settings, self.store = late_s, settings, store
        self.writes, self.second = 0, None

    def flag(self, conclusion, *, store, now, fence=None):
        self.writes += 1
        if self.writes == 1:
            try:
                resolve("b1", "good", "reviewer 2", "", self.settings, self, store=self.store,
                        now=now + self.late_s)
                self.second = "written"
            except ReviewRefused as exc:
                self.second = str(exc)
        super().flag(conclusion, store=store, now=now)


@pytest.fixture
def ledger(tmp_path):
    db = f"sqlite:///{tmp_path / 'l.db'}"
    review_queue(db)
    with open_store(db) as store:
        yield store


def test_a_slow_write_back_is_not_written_twice(ledger):
    """Guarantee: with ``arcgis.request_timeout_s`` raised to 60 s, a second resolve 130 s into
    the first one's write-back (past any fixed two-minute hold, within what the write-back may
    take) is refused; the verdict reaches the layer once."""
    settings = Settings.from_mapping({"arcgis.request_timeout_s": "60",
                                      "writeback.sink": "table"})
    sink = SlowSink(130.0, settings, ledger)
    resolve("b1", "fair", "reviewer 1", "", settings, sink, store=ledger, now=T0)
    assert sink.writes == 1, f"written {sink.writes} times (second resolve: {sink.second})"
    assert "being written back by another process" in sink.second
    assert ledger.review_item("b1").written_at is not None


def test_the_hold_outlasts_the_write_back_and_then_lets_go(ledger):
    """Guarantee: the hold is at least the write-back's own bound (every request it may send at
    the configured timeout) and at least two minutes; a holder that vanished is taken over
    once the hold is past."""
    from fme_ai_resilience.services.processing.review import write_hold_s

    for timeout_s in (1.0, 30.0, 300.0):
        settings = Settings.from_mapping({"arcgis.request_timeout_s": str(timeout_s)})
        assert write_hold_s(settings) >= max(120.0, 16 * 4 * timeout_s)
    settings = Settings.from_mapping({"arcgis.request_timeout_s": "60"})

    class Vanishing(PostgresTableSink):
        def flag(self, conclusion, *, store, now, fence=None):
            raise SystemExit("the resolving process died mid-write")

    with pytest.raises(SystemExit):
        resolve("b1", "fair", "reviewer 1", "", settings, Vanishing(), store=ledger, now=T0)
    ledger.claim_review_write("b1", now=T0, write_s=write_hold_s(settings))   # held again
    with pytest.raises(ReviewRefused, match="being written back"):
        resolve("b1", "fair", "r2", "", settings, PostgresTableSink(), store=ledger,
                now=T0 + write_hold_s(settings) - 1)
    done = resolve("b1", "fair", "r2", "", settings, PostgresTableSink(), store=ledger,
                   now=T0 + write_hold_s(settings) + 1)
    assert done.done.value == "written again"
