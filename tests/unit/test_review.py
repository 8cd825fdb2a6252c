"""The review queue: photos skipped by policy or answered under the threshold wait for a person;
``review list|show|resolve`` works them, each verdict recorded and written back once; with a
skip policy the skipped photos count as skipped and in review, never as analysed, in every
report (status, check, /metrics, the signals)."""
from __future__ import annotations

import io
import json
import time

import pytest
import responses
from prometheus_client.parser import text_string_to_metric_families

from fme_ai_resilience.cli import main
from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.gateway import make_app
from fme_ai_resilience.core.ledger import LayerStatus, ReviewState, Status, TaskOutcome
from fme_ai_resilience.services.observe.signals import read_signals
from fme_ai_resilience.services.processing.review import ReviewRefused, Resolved, resolve
from fme_ai_resilience.services.resilience.degrade import Degradation
from fme_ai_resilience.services.processing.sinks import PostgresTableSink
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.store import open_store

from helpers.processing import SKIP_BENCHES, VISION, answer, make, register, submission


COUNTS = ("analysed", "accepted", "review", "awaiting_analysis", "held_back", "in_review",
          "reviewed", "skipped_by_policy", "expanded", "dead_by_cause", "due",
          "expired_leases", "review_queue")


@pytest.fixture
def clock():
    """A fake clock at the wall clock's time: the commands read the real one."""
    return FakeClock(time.time())


def counts(figures):
    return {k: figures[k] for k in COUNTS}


@pytest.fixture
def db(tmp_path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    open_store(url, init_schema=True).close()
    return url


def _skip_two_benches_and_analyse_a_hydrant(db, clock):
    """A skip policy at L3: two benches SKIPPED for review, one hydrant analysed."""
    settings = Settings.from_mapping(SKIP_BENCHES)
    with open_store(db) as store:
        register(store, submission("b1", photo="b1", asset_type="bench"),
                 submission("b2", photo="b2", asset_type="bench"),
                 submission("h", photo="h", asset_type="hydrant"), now=clock.now())
        Degradation(store=store, clock=clock).set_override("L3")
        with responses.RequestsMock() as mock:
            mock.add(responses.POST, VISION, json=answer())
            results = make(store, clock, settings=settings,
                           sink=PostgresTableSink()).run_batch().results
        store.set_config({"writeback.sink": "table"}, now=clock.now())
    return {r.key: r.outcome for r in results}


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_skip_policy_counts_skipped_and_in_review_never_analysed_everywhere(db, clock,
                                                                              capsys):
    """status, check --json, /metrics and the signals all say 1 analysed, 2 skipped."""
    outcomes = _skip_two_benches_and_analyse_a_hydrant(db, clock)
    assert outcomes == {"b1": TaskOutcome.SKIPPED, "b2": TaskOutcome.SKIPPED,
                        "h": TaskOutcome.ACCEPTED}
    with open_store(db) as store:
        signals = read_signals(Settings(), store=store, now=clock.now())
        app = make_app(store=store)
        body = b"".join(app({"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics",
                             "wsgi.input": io.BytesIO()}, lambda status, headers: None))
        assert store.asset_condition("b1")["outcome"] == LayerStatus.MANUAL_REVIEW.value
    ledger = signals.ledger_figures()
    assert (ledger["analysed"], ledger["skipped_by_policy"], ledger["in_review"]) == (1, 2, 2)
    assert (signals.analysed, signals.skipped) == (1, 2)
    code, out, _ = _run(capsys, "status", "--db", db, "--json")
    assert code == 0 and counts(json.loads(out)["signals"]["ledger"]) == counts(ledger)
    code, out, _ = _run(capsys, "check", "--db", db, "--json")
    assert counts(json.loads(out)["ledger"]) == counts(ledger)
    assert json.loads(out)["traffic"]["analysed"] == 1
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    photos = {s.labels["state"]: s.value for s in families["fair_photos"].samples}
    assert (photos["analysed"], photos["skipped_by_policy"], photos["in_review"]) == (1, 2, 2)
    code, out, _ = _run(capsys, "status", "--db", db)
    assert "analysed                       1" in out and "skipped by policy              2" \
        in out


def test_review_list_show_and_resolve_once(db, clock, capsys):
    """A verdict is recorded and written back (REVIEWED on the asset row); a second is refused."""
    _skip_two_benches_and_analyse_a_hydrant(db, clock)
    code, out, _ = _run(capsys, "review", "list", "--db", db)
    assert code == 0 and "b1  MANUAL_REVIEW  bench" in out and "\nh " not in out
    code, out, _ = _run(capsys, "review", "show", "b2", "--db", db)
    assert code == 0 and json.loads(out)["why"] == "skipped by policy (never analysed)"
    code, out, _ = _run(capsys, "review", "resolve", "b1", "--db", db, "--condition", "fair",
                        "--reviewer", "inspector 7", "--note", "paint flaking")
    assert code == 0 and "recorded" in out
    with open_store(db) as store:
        row = store.asset_condition("b1")
        assert (row["outcome"], row["condition"]) == (LayerStatus.REVIEWED.value, "fair")
        item = store.review_item("b1")
        assert item.state is ReviewState.RESOLVED and item.written_at is not None
        assert item.verdict.reviewer == "inspector 7" and item.verdict.note == "paint flaking"
        assert store.review_stats()[0] == 1
        assert store.get("b1").status is Status.SUCCEEDED
    code, _, err = _run(capsys, "review", "resolve", "b1", "--db", db, "--condition", "good",
                        "--reviewer", "someone else")
    assert code == 1 and "already resolved by inspector 7 as 'fair'" in err
    with open_store(db) as store:
        assert store.asset_condition("b1")["condition"] == "fair"
    assert _run(capsys, "review", "resolve", "h", "--db", db, "--condition", "good",
                "--reviewer", "x")[0] == 1    # analysed and accepted: not in the queue
    assert _run(capsys, "review", "resolve", "b2", "--db", db, "--condition", "rusty",
                "--reviewer", "x")[0] == 2    # not a condition of validation.conditions


class FailingSink(PostgresTableSink):
    """A table sink whose first ``failures`` writes fail as a layer outage would."""

    def __init__(self, failures):
        self.failures = failures
        self.writes = 0

    def flag(self, conclusion, *, store, now):
        if self.failures:
            self.failures -= 1
            raise ReviewRefused("the layer is down")
        self.writes += 1
        super().flag(conclusion, store=store, now=now)


def test_a_verdict_whose_write_back_failed_is_written_by_the_next_resolve(db, clock):
    """The verdict is kept once; the next resolve writes that verdict, not a second one."""
    _skip_two_benches_and_analyse_a_hydrant(db, clock)
    sink = FailingSink(failures=1)
    settings = Settings()
    with open_store(db) as store:
        with pytest.raises(ReviewRefused):
            resolve("b1", "damaged", "first", "", settings, sink, store=store,
                    now=clock.now() + 10)
        again = resolve("b1", "good", "second", "", settings, sink, store=store,
                        now=clock.now() + 20)
        assert again.done is Resolved.WRITTEN_AGAIN and again.verdict.reviewer == "first"
        assert store.asset_condition("b1")["condition"] == "damaged" and sink.writes == 1
        with pytest.raises(ReviewRefused):
            resolve("b1", "good", "third", "", settings, sink, store=store,
                    now=clock.now() + 30)
        assert sink.writes == 1


def test_an_answer_under_the_threshold_is_in_the_review_queue_and_analysed(db, clock):
    """REVIEW counts as analysed and waits in the queue for a person to confirm it."""
    with open_store(db) as store:
        register(store, submission("low"), now=clock.now())
        with responses.RequestsMock() as mock:
            mock.add(responses.POST, VISION, json=answer(confidence=0.3))
            (result,) = make(store, clock).run_batch().results
        assert result.outcome is TaskOutcome.REVIEW
        counts = store.outcome_counts()
        assert (counts.analysed, counts.in_review, counts.skipped) == (1, 1, 0)
        (item,) = store.review_items()
        assert item.key == "low" and item.outcome is TaskOutcome.REVIEW


class ConcurrentSink(PostgresTableSink):
    """A layer so slow that another reviewer's process resolves the photo mid-write."""

    def __init__(self, db, clock):
        super().__init__()
        self.db, self.clock, self.writes, self.second = db, clock, 0, None

    def flag(self, conclusion, *, store, now):
        self.writes += 1
        if self.second is None:
            self.second = ""
            with open_store(self.db) as other, pytest.raises(ReviewRefused) as refused:
                resolve("b1", "good", "second", "", Settings(), self, store=other,
                        now=now + 1)
            self.second = str(refused.value)
        super().flag(conclusion, store=store, now=now)


def test_two_processes_resolving_one_photo_write_it_back_once(db, clock):
    """A resolve while another process's write-back is in flight is refused: one write."""
    _skip_two_benches_and_analyse_a_hydrant(db, clock)
    sink = ConcurrentSink(db, clock)
    with open_store(db) as store:
        first = resolve("b1", "damaged", "first", "", Settings(), sink, store=store,
                        now=clock.now() + 10)
        assert first.done is Resolved.RECORDED and sink.writes == 1
        assert "being written" in sink.second
        assert store.asset_condition("b1")["condition"] == "damaged"


def test_a_secret_pasted_into_a_verdict_note_is_never_stored(db, clock):
    """A token or key in the reviewer's note is redacted before the verdict is recorded."""
    _skip_two_benches_and_analyse_a_hydrant(db, clock)
    note = "checked on site; token=AbC123secretXYZ987 sk-test-0123456789abcdef"
    with open_store(db) as store:
        done = resolve("b1", "fair", "inspector", note, Settings(), PostgresTableSink(),
                       store=store, now=clock.now() + 10)
        stored = store.review_item("b1").verdict.note
    for secret in ("AbC123secretXYZ987", "sk-test-0123456789abcdef"):
        assert secret not in stored and secret not in done.verdict.note
    assert stored.startswith("checked on site")


def test_review_list_is_bounded_and_says_how_many_are_waiting(db, clock, capsys):
    """--limit past 1000 is a usage error; a page shorter than the queue says its place."""
    _skip_two_benches_and_analyse_a_hydrant(db, clock)
    with pytest.raises(SystemExit) as usage:
        main(["review", "list", "--db", db, "--limit", "1001"])
    assert usage.value.code == 2 and "must be <= 1000" in capsys.readouterr().err
    code, out, _ = _run(capsys, "review", "list", "--db", db, "--limit", "1")
    assert code == 0 and "photos 1-1 of 2 waiting" in out and out.count("MANUAL_REVIEW") == 1
